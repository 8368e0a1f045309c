"""Importers of the knowledge-errors suite on the public files in ../shared (skipped without them)."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from conftest import shared_path
from rolebound.errors import InputError
from rolebound.importers import all_importers
from rolebound.suites.knowledge_errors.importers import import_profiles, import_roleke, profile_corpora, roleke_items
from rolebound.suites import get_suite
from rolebound.suites.knowledge_errors.data import load_corpus, load_items

# ../shared/data/external/rp_kw_errors/SOURCE.md: per character, Identity / Relational / Event /
# Attitudinal counts, identical for KKE and UKE (= the paper's Table 5).
EXPECTED = {
    "Ludwig van Beethoven": (7, 17, 27, 4),
    "Julius Caesar": (8, 3, 40, 4),
    "Cleopatra": (8, 6, 36, 5),
    "Isaac Newton": (3, 7, 33, 12),
    "Socrates": (11, 4, 20, 20),
    "Hermione Granger": (8, 5, 35, 7),
    "Lord Voldemort": (10, 5, 32, 8),
    "Spartacus": (9, 3, 42, 1),
    "Martin Luther King Jr.": (5, 6, 35, 9),
}
ORDER = ("identity", "relational", "event", "attitudinal")


@pytest.fixture(scope="module")
def roleke_file():
    return shared_path("data", "external", "rp_kw_errors", "RoleKE-Bench.json")


@pytest.fixture(scope="module")
def profiles_dir():
    return shared_path("data", "external", "trainable-agents", "data", "seed_data", "profiles")


def test_importers_are_registered():
    imps = all_importers()
    assert "roleke-bench" in imps and "character-llm-profiles" in imps


@pytest.mark.slow
def test_whole_roleke_file_counts(roleke_file, tmp_path):
    out = tmp_path / "roleke.jsonl"
    summary = import_roleke(str(roleke_file), str(out))
    assert "990 items" in summary
    # the labels the import renames, each said with its count
    for raw, ours, n in (("Event Memory", "event", 600), ("Relational Memory", "relational", 112),
                         ("Attitudinal Memory", "attitudinal", 140), ("Identity Memory", "identity", 138)):
        assert f"renamed: memory_category '{raw}' -> '{ours}' ({n} items)" in [x.strip() for x in summary.splitlines()]
    items = load_items(out)
    assert len(items) == 990
    cnt = Counter((i.character, i.error_type, i.memory_category) for i in items)
    for ch, per in EXPECTED.items():
        for et in ("KKE", "UKE"):
            assert tuple(cnt[(ch, et, c)] for c in ORDER) == per, (ch, et)
    assert sum(cnt.values()) == 990 and {i.character for i in items} == set(EXPECTED)
    # 495 memories, each with one KKE and one UKE query
    pairs = Counter(i.memory_id for i in items)
    assert len(pairs) == 495 and set(pairs.values()) == {2}
    assert all(i.validated is False and i.source for i in items)
    first = json.loads(roleke_file.read_text(encoding="utf-8"))[0]
    it = next(i for i in items if i.id == first["uuid"])
    assert (it.query, it.correct_memory, it.chunk) == (first["false_query_question"], first["correct_memory"],
                                                       first["memory_chunk"])


@pytest.mark.slow
def test_stats_print_the_counts(roleke_file):
    s = get_suite("knowledge-errors")
    ds = s.load(str(roleke_file), s.run_settings(["vanilla"]))      # the raw JSON loads too
    counts = dict(s.stats(ds))
    table = next(v for k, v in counts.items() if k.startswith("Items per character"))
    row = table[(table.character == "Socrates") & (table.error == "UKE")].iloc[0]
    assert (row["Ide."], row["Rel."], row["Eve."], row["Att."], row["total"]) == (11, 4, 20, 20, 55)
    tot = table[(table.character == "all") & (table.error == "KKE")].iloc[0]
    assert (tot["Eve."], tot["Rel."], tot["Att."], tot["Ide."], tot["total"]) == (300, 56, 70, 69, 495)


@pytest.mark.slow
def test_profiles_become_corpora_that_hold_the_chunks(roleke_file, profiles_dir, tmp_path):
    out = tmp_path / "roleke.corpus.yaml"
    assert "9 character corpora" in import_profiles(str(profiles_dir), str(out))
    corpora = {c.character: c.text for c in load_corpus(out)}
    assert set(corpora) == set(EXPECTED)
    squash = {k: re.sub(r"\s+", " ", v) for k, v in corpora.items()}
    missing = [i.id for i in roleke_items(roleke_file) if re.sub(r"\s+", " ", i.chunk.strip()) not in squash[i.character]]
    assert missing == []
    # next to the imported items, the corpus is picked up without --set corpus
    import_roleke(str(roleke_file), str(tmp_path / "roleke.jsonl"))
    s = get_suite("knowledge-errors")
    ds = s.load(str(tmp_path / "roleke.jsonl"), s.run_settings(["rag"]))
    assert ds.extra["corpus_from_items"] == [] and len(ds.extra["corpora"]["Spartacus"]) >= 5


def test_bad_roleke_records_name_line_and_field(tmp_path):
    bad = tmp_path / "bad.json"
    rec = {"uuid": "u1", "role_name": "X", "memory_category": "Event Memory", "correct_memory": "I a.",
           "false_memory": "I b.", "change_category": "KKE", "memory_chunk": "c", "false_query_question": "Do?"}
    rec2 = dict(rec, uuid="u2")
    del rec2["memory_chunk"]
    bad.write_text(json.dumps([rec, rec2], indent=4), encoding="utf-8")
    with pytest.raises(InputError) as e:
        roleke_items(bad)
    assert e.value.line == 12 and e.value.field == "memory_chunk"   # the second record opens on line 12
    with pytest.raises(InputError):
        profile_corpora(tmp_path / "nope")
