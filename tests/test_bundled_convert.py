"""The bundled GGUF's conversion to a bf16 folder parses the GGUF once and writes the same folder."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.model


def test_conversion_parses_the_gguf_once_and_writes_the_same_files(tmp_path, monkeypatch):
    import gguf

    from rolebound.models import bundled

    reference = bundled.converted_dir()     # this machine's copy, in the usual model folder
    made = []

    class Counting(gguf.GGUFReader):
        def __init__(self, *args, **kw):
            made.append(args)
            super().__init__(*args, **kw)

    monkeypatch.setattr(gguf, "GGUFReader", Counting)
    monkeypatch.setenv("ROLEBOUND_MODEL_DIR", str(tmp_path))
    fresh = bundled.converted_dir()
    assert fresh.parent == tmp_path
    assert len(made) == 1, "transformers' four reads of the GGUF share one parse"
    assert gguf.GGUFReader is Counting      # put back after the conversion
    names = sorted(p.name for p in reference.iterdir() if p.name != "rolebound.json")  # it names the source path
    assert names == sorted(p.name for p in fresh.iterdir() if p.name != "rolebound.json")
    for name in names:
        a, b = (fresh / name).read_bytes(), (reference / name).read_bytes()
        if name.endswith(".json") and a != b:
            # tokenizer_config.json records how its loader was called (local_files_only follows
            # HF_HUB_OFFLINE in the converting process's environment), not what the files hold
            a, b = ({k: v for k, v in json.loads(x).items() if k != "local_files_only"} for x in (a, b))
        assert a == b, name
