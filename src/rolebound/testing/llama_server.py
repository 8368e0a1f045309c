"""llama-cpp-python's OpenAI-compatible server (`python -m llama_cpp.server`) on 127.0.0.1 and a
free port, for tests and bench/engines.py (needs `make llamacpp`, which installs its [server] extra).

    with LlamaServer(gguf, alias="smollm2") as srv:
        OpenAIBackend("smollm2", base_url=srv.url)

logits_all=False starts it without log-probs (scoring against it must fail clearly).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    def __init__(self, gguf: str | Path, *, alias: str = "model", threads: int = 1, n_ctx: int = 4096,
                 logits_all: bool = True, wait_s: float = 120.0):
        self.gguf, self.alias, self.threads, self.n_ctx = str(gguf), alias, threads, n_ctx
        self.logits_all, self.wait_s = logits_all, wait_s
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def start(self) -> "LlamaServer":
        port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", self.gguf, "--model_alias", self.alias,
             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(self.n_ctx),
             "--n_threads", str(self.threads), "--n_threads_batch", str(self.threads),
             "--logits_all", str(self.logits_all), "--verbose", "False"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.url = f"http://127.0.0.1:{port}/v1"
        deadline = time.time() + self.wait_s
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited: {self.proc.stderr.read()[-800:]}")
            try:
                urllib.request.urlopen(self.url + "/models", timeout=2).read()
                return self
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"llama_cpp.server did not answer within {self.wait_s:.0f} s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc = None

    def __enter__(self) -> "LlamaServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
