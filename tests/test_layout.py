"""The package's shape: no import cycles, every module importable on its own, one folder per suite,
and metrics modules free of plotting code."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "rolebound"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


# Python files under a suite's data/ folder are scripts (make_bank.py), not modules.
MODULES = {module_name(p): p for p in sorted(PKG.rglob("*.py")) if p.parent.name != "data"}


def _type_checking_only(tree: ast.AST) -> set[int]:
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for b in node.body for n in ast.walk(b))
    return skip


def imports_of(name: str, path: Path) -> set[str]:
    """Modules of the package that `name` imports anywhere, at import time or inside functions
    (`if TYPE_CHECKING:` blocks aside). `from pkg import mod` imports pkg.mod, not pkg's own code
    beyond what importing pkg.mod needs (pkg is already being imported as its parent)."""
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_only(tree)
    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            subs = {f"{base}.{a.name}" for a in node.names} & set(MODULES)
            out.update(subs)
            if len(subs) < len(node.names):
                out.add(base)
    return {m for m in out if m in MODULES and m != name}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycles():
    graph = {n: imports_of(n, p) for n, p in MODULES.items()}
    # The root package re-exports the API lazily, on attribute access (rolebound.run), never at
    # import time, and every module may read rolebound.__version__.
    graph["rolebound"] = set()
    assert find_cycle(graph) is None


def test_the_core_never_imports_a_suite():
    core = {n: p for n, p in MODULES.items() if not n.startswith("rolebound.suites.")
            or n == "rolebound.suites.base"}
    for n, p in core.items():
        bad = sorted(m for m in imports_of(n, p) if m.startswith("rolebound.suites.") and m != "rolebound.suites.base")
        assert not bad, f"{n} imports {bad}"


def test_metrics_import_no_plotting():
    for n, p in MODULES.items():
        if n.rpartition(".")[2] == "metrics" or n.startswith("rolebound.metrics"):
            text = p.read_text(encoding="utf-8")
            assert "matplotlib" not in text, n


def test_one_folder_per_suite():
    suites = PKG / "suites"
    files = sorted(p.name for p in suites.iterdir() if p.is_file())
    assert files == ["__init__.py", "base.py"]
    for d in (p for p in suites.iterdir() if p.is_dir() and p.name != "__pycache__"):
        assert (d / "__init__.py").exists() and (d / "suite.py").exists() and (d / "README.md").exists(), d


def test_every_module_imports_on_its_own():
    names = sorted(n for n in MODULES if n != "rolebound.testing.fake_server" or True)
    code = ("import importlib, sys\n"
            "bad = []\n"
            f"for name in {names!r}:\n"
            "    for m in [k for k in sys.modules if k == 'rolebound' or k.startswith('rolebound.')]:\n"
            "        del sys.modules[m]\n"
            "    try:\n"
            "        importlib.import_module(name)\n"
            "    except Exception as exc:\n"
            "        bad.append(f'{name}: {type(exc).__name__}: {exc}')\n"
            "print('\\n'.join(bad))\n"
            "sys.exit(1 if bad else 0)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr


def test_atomic_dir_replaces_its_target_only_when_the_block_finishes(tmp_path):
    from rolebound.io import atomic_dir

    target = tmp_path / "model"
    target.mkdir()
    (target / "old").write_text("x")
    with pytest.raises(RuntimeError):
        with atomic_dir(target) as tmp:
            (tmp / "half").write_text("y")
            raise RuntimeError("conversion failed")
    assert [p.name for p in tmp_path.iterdir()] == ["model"] and (target / "old").exists()
    with atomic_dir(target) as tmp:
        (tmp / "new").write_text("z")
    assert [p.name for p in target.iterdir()] == ["new"] and [p.name for p in tmp_path.iterdir()] == ["model"]
