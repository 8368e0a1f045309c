"""The model's chat template on the client side, for API backends that prefill an assistant turn
(Capability's Injection) through the completions endpoint.

A template comes from one of:
- a local tokenizer folder (rendered by transformers, exactly as the model's own tokenizer does);
- a tokenizer_config.json (its `chat_template`, `bos_token`, `eos_token`), a GGUF file (the one
  llama.cpp serves: `tokenizer.chat_template`), or a Jinja file;
- the server: llama.cpp's `llama-server` answers `GET /props` with the model's `chat_template`
  and its bos/eos tokens (vLLM and llama-cpp-python's server expose none; vLLM instead takes
  `continue_final_message`, see openai_api.py).
A Jinja source is rendered the way transformers renders one (a sandboxed environment with
trim_blocks, lstrip_blocks, loop controls, `raise_exception`, `strftime_now`, `tojson`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ..errors import BackendError


@dataclass
class Template:
    source: str
    bos_token: str = ""
    eos_token: str = ""
    origin: str = ""            # what the template came from, for the manifest

    def render(self, messages: Sequence[dict], add_generation_prompt: bool = True) -> str:
        return _compiled(self.source).render(messages=list(messages), add_generation_prompt=add_generation_prompt,
                                             bos_token=self.bos_token, eos_token=self.eos_token)


_CACHE: dict[str, Any] = {}


def _compiled(source: str):
    if source not in _CACHE:
        from datetime import datetime

        from jinja2.exceptions import TemplateError

        from ..sandbox import BoundedEnvironment, compile_template

        def raise_exception(message):
            raise TemplateError(message)

        def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
            return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

        env = BoundedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
        env.filters["tojson"] = tojson
        env.globals["raise_exception"] = raise_exception
        env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
        _CACHE[source] = compile_template(source, env)
    return _CACHE[source]


def _token(value: Any) -> str:
    if isinstance(value, dict):          # {"content": "<s>", ...} in older tokenizer configs
        value = value.get("content")
    return str(value or "")


def from_file(path: str) -> Template:
    """A tokenizer_config.json or a Jinja file (a folder goes through transformers instead)."""
    p = Path(path)
    if not p.is_file():
        raise BackendError(f"chat_template: no such file or folder: {path}")
    if p.suffix.lower() == ".gguf":
        return from_gguf(p)
    text = p.read_text(encoding="utf-8")
    if p.suffix.lower() != ".json":
        return Template(source=text, origin=f"file {p.name}")
    try:
        cfg = json.loads(text)
    except ValueError as exc:
        raise BackendError(f"chat_template: {path} is not valid JSON ({exc})") from None
    tpl = cfg.get("chat_template") if isinstance(cfg, dict) else None
    if isinstance(tpl, list):            # named templates: the default one
        tpl = next((t.get("template") for t in tpl if t.get("name") == "default"), None)
    if not isinstance(tpl, str) or not tpl.strip():
        raise BackendError(f"chat_template: {path} holds no chat_template")
    return Template(source=tpl, bos_token=_token(cfg.get("bos_token")), eos_token=_token(cfg.get("eos_token")),
                    origin=f"file {p.name}")


_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def gguf_metadata(path: Path, keys: set[str]) -> dict[str, Any]:
    """The GGUF header's key-value pairs named in `keys`, read straight from the file (gguf's
    GGUFReader parses every tensor too: 30 s on a loaded 2-core machine for a 100 MB model)."""
    import struct

    def read(fmt: str):
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, fh.read(size))[0]

    def string() -> str:
        return fh.read(read("<Q")).decode("utf-8", errors="replace")

    def value(kind: int, keep: bool):
        if kind == 8:
            return string()
        if kind == 9:
            inner, n = read("<I"), read("<Q")
            items = [value(inner, keep) for _ in range(n)]
            return items if keep else None
        return read(_SCALARS[kind])

    out: dict[str, Any] = {}
    with open(path, "rb") as fh:
        if fh.read(4) != b"GGUF":
            raise BackendError(f"chat_template: {path} is not a GGUF file")
        read("<I")
        read("<Q")
        for _ in range(read("<Q")):
            key = string()
            val = value(read("<I"), key in keys)
            if key in keys:
                out[key] = val
    return out


def from_gguf(path: Path) -> Template:
    keys = {"tokenizer.chat_template", "tokenizer.ggml.tokens", "tokenizer.ggml.bos_token_id",
            "tokenizer.ggml.eos_token_id"}
    try:
        meta = gguf_metadata(path, keys)
    except (OSError, KeyError, UnicodeError, ValueError) as exc:
        raise BackendError(f"chat_template: cannot read {path} as GGUF ({type(exc).__name__}: {exc})") from None
    source = meta.get("tokenizer.chat_template")
    if not source:
        raise BackendError(f"chat_template: {path} holds no tokenizer.chat_template")
    tokens = meta.get("tokenizer.ggml.tokens") or []

    def special(key: str) -> str:
        i = meta.get(key)
        return tokens[i] if isinstance(i, int) and 0 <= i < len(tokens) else ""

    return Template(source=source, bos_token=special("tokenizer.ggml.bos_token_id"),
                    eos_token=special("tokenizer.ggml.eos_token_id"), origin=f"file {path.name}")


def server_root(base_url: str) -> str:
    """http://host:8080/v1 -> http://host:8080 (llama-server's own routes sit beside /v1)."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


MAX_PROPS_BYTES = 16 * 1024 * 1024     # GET /props: a template and settings, some KB


def from_server(base_url: str | None, key: str | None, timeout: float = 10.0) -> Template | None:
    """The template llama-server reports at GET /props; None when the server offers none (any
    error: another server, or none listening)."""
    if not base_url:
        return None
    from urllib.parse import unquote, urlsplit, urlunsplit

    import httpx2

    parts = urlsplit(server_root(base_url) + "/props")
    auth = (unquote(parts.username), unquote(parts.password or "")) if parts.username is not None else None
    url = urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1]))
    headers = {} if auth or not key or key == "EMPTY" else {"Authorization": f"Bearer {key}"}
    try:
        with httpx2.stream("GET", url, headers=headers, auth=auth, timeout=timeout) as resp:
            if resp.status_code != 200:
                return None
            body = bytearray()
            for chunk in resp.iter_bytes():     # decompressed a piece at a time: a bomb stops here
                body += chunk
                if len(body) > MAX_PROPS_BYTES:
                    return None
        data = json.loads(body)
    except Exception:  # noqa: BLE001 - no template there, whatever the reason
        return None
    tpl = data.get("chat_template") if isinstance(data, dict) else None
    if not isinstance(tpl, str) or not tpl.strip():
        return None
    return Template(source=tpl, bos_token=_token(data.get("bos_token")), eos_token=_token(data.get("eos_token")),
                    origin="server /props")
