"""A headless Chromium driven over its DevTools protocol (the Debian `chromium` package and
websocket-client; no browser downloads)."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def need_chromium() -> str:
    path = chromium_path()
    if path is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    pytest.importorskip("websocket", reason="websocket-client is not installed")
    return path


class Browser:
    def __init__(self, width: int = 1400, height: int = 900):
        import websocket

        self.profile = tempfile.mkdtemp(prefix="rb-chromium-")
        self.proc = subprocess.Popen(
            [need_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-extensions", "--remote-debugging-port=0", f"--user-data-dir={self.profile}",
             f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.time() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.time() > deadline or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("chromium did not start")
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        pages = []
        while not pages:
            pages = [t for t in json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list"))
                     if t.get("type") == "page"]
            time.sleep(0.05)
        self.ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=120,
                                              suppress_origin=True)
        self._id = 0
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                  mobile=False)

    def call(self, method: str, **params):
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def js(self, expr: str):
        """Evaluate an expression (awaiting a promise) and return its JSON value; raise on exceptions."""
        res = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"page error: {res['exceptionDetails']}")
        return res["result"].get("value")

    def open(self, url: str, ready: str = "document.readyState === 'complete'", timeout: float = 60) -> None:
        self.call("Page.navigate", url=url)
        self.wait(ready, timeout)

    def wait(self, cond: str, timeout: float = 30) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                if self.js(f"!!({cond})"):
                    return
            except RuntimeError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for: {cond}")

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.ws.close()
        except Exception:  # noqa: BLE001
            pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


def screenshot_page(page: Path, png: Path, width: int = 1200, height: int | None = None) -> None:
    """A full-page screenshot of a local HTML file (docs/figures/card.png is one)."""
    b = Browser(width=width, height=900)
    try:
        b.open(Path(page).resolve().as_uri())
        b.wait("Array.from(document.images).every(function (i) { return i.complete; })")
        h = height or int(b.js("document.documentElement.scrollHeight"))
        b.call("Emulation.setDeviceMetricsOverride", width=width, height=h, deviceScaleFactor=1, mobile=False)
        b.screenshot(Path(png))
    finally:
        b.close()


if __name__ == "__main__":      # python tests/cdp.py PAGE.html OUT.png [HEIGHT]
    import sys

    screenshot_page(Path(sys.argv[1]), Path(sys.argv[2]), height=int(sys.argv[3]) if len(sys.argv) > 3 else None)
