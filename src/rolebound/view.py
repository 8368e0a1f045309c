"""`rolebound view PATH`: open a run's report.html, or serve a folder of runs on 127.0.0.1 with an
index of them (suite, model, strategies, headline figures, date; newest first)."""

from __future__ import annotations

import io
import json
import os
import sys
import webbrowser
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from .errors import InputError
from .io import read_regular
from .store import MANIFEST, METRICS, RECORDS, RunDir
from .term import visible

DEPTH = 3        # runs/<suite>/<model>/<run> at most


def is_run(path: Path) -> bool:
    return (path / MANIFEST).is_file()


def find_runs(root: Path) -> list[Path]:
    """The runs under root; one whose folder is a symlink out of root is not the root's."""
    found, real = [], root.resolve()
    for depth in range(1, DEPTH + 1):
        found += [p.parent for p in root.glob("/".join(["*"] * depth) + "/" + MANIFEST)]
    return sorted(p for p in set(found) if inside(real, p))


def report_of(run_dir: Path) -> Path:
    """The run's report.html, built from records.jsonl first if it is missing."""
    html = run_dir / "report.html"
    if not html.exists():
        if not (run_dir / RECORDS).exists():
            raise InputError("no report.html and no records.jsonl here", file=str(run_dir))
        from .api import build_report

        build_report(run_dir)
    return html


def entry(run_dir: Path, root: Path) -> dict[str, Any]:
    """One index row; a run whose files do not read is listed with the reason, not dropped."""
    rel = run_dir.relative_to(root)
    row: dict[str, Any] = {"path": str(rel), "href": "/".join(quote(p) for p in rel.parts) + "/report.html",
                           "has_report": (run_dir / "report.html").exists(), "suite": "?", "model": "?",
                           "strategies": "", "date": "", "figures": [], "problem": ""}
    try:
        m = RunDir(run_dir).read_manifest()
    except Exception as exc:  # noqa: BLE001 - a broken run must not take the index down
        row["problem"] = f"manifest does not read: {exc}"
        return row
    row.update(suite=m.suite, model=m.model, strategies=", ".join(m.strategies),
               date=m.finished or m.started or "", judge=m.judge or "")
    if not m.finished:
        row["problem"] = "unfinished"
    try:
        metrics = json.loads(read_regular(run_dir / METRICS).decode("utf-8"))
        from .suites import get_suite

        summ = getattr(get_suite(m.suite), "summary", None)
        row["figures"] = [(str(k), str(v)) for k, v in (summ(metrics) if summ else [])][:6]
    except FileNotFoundError:
        row["problem"] = row["problem"] or "no metrics.json yet (rolebound report DIR)"
    except Exception as exc:  # noqa: BLE001
        row["problem"] = f"metrics do not read: {exc}"
    return row


def index_html(root: Path) -> str:
    from jinja2 import Environment, PackageLoader, select_autoescape

    rows = sorted((entry(d, root) for d in find_runs(root)), key=lambda r: r["date"], reverse=True)
    env = Environment(loader=PackageLoader("rolebound", "report/templates"),
                      autoescape=select_autoescape(["html", "j2"]))
    return env.get_template("runs_index.html.j2").render(root=str(root.resolve()), rows=rows)


def inside(root: Path, path: Path) -> Path | None:
    """The path with its symlinks resolved, if that lies in the (resolved) root; else None."""
    try:
        real = path.resolve()
    except (OSError, RuntimeError):          # a symlink loop
        return None
    return real if real == root or root in real.parents else None


class _Handler(SimpleHTTPRequestHandler):
    """Only regular files whose resolved path lies under the root, only to a browser that asked for
    127.0.0.1:PORT or localhost:PORT (another Host is a DNS-rebinding page), no folder listings."""

    root: Path          # resolved

    def send_head(self):
        port = self.server.server_address[1]
        hosts = self.headers.get_all("Host") or []
        if len(hosts) != 1 or hosts[0].strip().lower() not in (f"127.0.0.1:{port}", f"localhost:{port}"):
            self.send_error(421, "Misdirected Request", f"open http://127.0.0.1:{port}/")
            return None
        raw = urlsplit(self.path).path
        try:
            parts = unquote(raw, errors="strict").split("/")
        except UnicodeDecodeError:
            parts = ["\x00"]
        if not raw.startswith("/") or any("\x00" in p or p in (".", "..") for p in parts):
            self.send_error(400, "Bad path")
            return None
        if raw in ("/", "/index.html"):
            return self._send(io.BytesIO(index_html(self.root).encode("utf-8")), "text/html; charset=utf-8")
        path = self.root.joinpath(*(p for p in parts if p))
        if path.is_dir():
            path = path / "index.html"              # a sweep's index page; no listing of a folder
            index = inside(self.root, path)
            if not raw.endswith("/") and index is not None and index.is_file():
                self.send_response(301)             # as http.server does: relative links need the slash
                self.send_header("Location", raw + "/")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
        real = inside(self.root, path)
        try:
            if real is None or not real.is_file():
                raise FileNotFoundError
            fh = open(real, "rb")  # noqa: SIM115 - http.server copies it to the client, then closes it
        except OSError:
            self.send_error(404, "Not found", "the runs are listed at /")
            return None
        return self._send(fh, self.guess_type(str(real)), os.fstat(fh.fileno()).st_size)

    def _send(self, body, ctype: str, size: int | None = None):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(size if size is not None else len(body.getvalue())))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        return body

    def log_message(self, format, *args):  # noqa: A002 - quiet: one line per request is noise here
        pass


class _Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if not isinstance(exc, ConnectionError):         # a browser that went away is no error
            print(visible(f"viewer: a request failed: {type(exc).__name__}: {exc}", newlines=False), file=sys.stderr)


def serve(root: Path, port: int = 8765, open_browser: bool = True) -> None:
    root = Path(root).resolve()
    handler = type("Handler", (_Handler,), {"root": root})
    try:
        httpd = _Server(("127.0.0.1", port), partial(handler, directory=str(root)))
    except OSError as exc:
        raise InputError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}; pick another --port",
                         field="--port") from None
    url = f"http://127.0.0.1:{httpd.server_address[1]}/"
    print(f"serving {len(find_runs(root))} run(s) under {root} at {url} (Ctrl-C stops)", flush=True)
    if open_browser:
        _open(url)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        print("stopped")
    finally:
        httpd.server_close()


def _open(url: str) -> bool:
    try:
        return bool(webbrowser.open(url))
    except webbrowser.Error:
        return False


def view(path: Path, port: int = 8765, open_browser: bool = True) -> None:
    path = Path(path)
    if path.is_file() and is_run(path.parent) and path.suffix != ".html":
        path = path.parent          # a file of a run (manifest.json, records.jsonl): that run
    if path.is_file() and path.suffix != ".html":
        raise InputError("is a file, not a folder; give a run folder or a folder of runs", file=str(path))
    if not path.exists():
        raise InputError("no such folder", file=str(path))
    if path.is_file() or is_run(path):
        html = path if path.is_file() else report_of(path)
        uri = html.resolve().as_uri()
        print(f"report: {html}")
        if not (open_browser and _open(uri)):
            print(f"open {uri} in a browser")
        return
    if not find_runs(path):
        raise InputError("neither a run folder (manifest.json) nor a folder holding runs", file=str(path))
    serve(path, port, open_browser)
