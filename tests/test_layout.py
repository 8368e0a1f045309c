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


MODULES = {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _type_checking_only(tree: ast.AST) -> set[int]:
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for b in node.body for n in ast.walk(b))
    return skip


def imports_of(name: str, path: Path, type_checking: bool = False) -> set[str]:
    """Modules of the package that `name` imports anywhere, at import time or inside functions
    (`if TYPE_CHECKING:` blocks aside, unless `type_checking`). `from pkg import mod` imports pkg.mod, not pkg's own code
    beyond what importing pkg.mod needs (pkg is already being imported as its parent)."""
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = set() if type_checking else _type_checking_only(tree)
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


def module_graph() -> dict[str, set[str]]:
    graph = {n: imports_of(n, p) for n, p in MODULES.items()}
    # The root package re-exports the API lazily, on attribute access (rolebound.run), never at
    # import time; no module imports it (test_no_module_imports_the_root_package).
    graph["rolebound"] = set()
    return graph


def test_no_module_imports_the_root_package():
    """rolebound/__init__ re-exports the API, so a module that reads it (its __version__: take
    records.VERSION) closes a circle through api."""
    assert not sorted(n for n, p in MODULES.items() if "rolebound" in imports_of(n, p))


def test_no_import_cycles_even_for_type_checkers():
    """`if TYPE_CHECKING:` imports count too: a circle there is one a type checker walks."""
    graph = {n: imports_of(n, p, type_checking=True) for n, p in MODULES.items()}
    graph["rolebound"] = set()
    assert find_cycle(graph) is None


def package_of(name: str) -> str:
    """The unit of layering: a top-level module or package of the core (rolebound.scoring), one
    suite package (rolebound.suites.charm), or the registry with its base (rolebound.suites)."""
    parts = name.split(".")
    if parts[:2] == ["rolebound", "suites"] and len(parts) > 2 and parts[2] != "base":
        return ".".join(parts[:3])
    return ".".join(parts[:2])


def package_graph() -> dict[str, set[str]]:
    """The packages (package_of) and the other packages each one imports, from module_graph: the
    graph test_no_package_cycles checks and docs/architecture.md's layers draw."""
    graph: dict[str, set[str]] = {}
    for n, deps in module_graph().items():
        graph.setdefault(package_of(n), set()).update(package_of(m) for m in deps)
    for k, v in graph.items():
        v.discard(k)
    return graph


@pytest.mark.slow
def test_no_import_cycles():
    assert find_cycle(module_graph()) is None


@pytest.mark.slow
def test_no_package_cycles():
    """Imports inside functions count: a lazy import hides a cycle from Python, not from the design."""
    assert find_cycle(package_graph()) is None


def test_package_of_names_the_layers():
    assert package_of("rolebound.scoring.choice") == "rolebound.scoring"
    assert package_of("rolebound.runner") == "rolebound.runner"
    assert package_of("rolebound.suites.charm.report") == "rolebound.suites.charm"
    assert package_of("rolebound.suites.base") == package_of("rolebound.suites") == "rolebound.suites"


def test_the_core_never_imports_a_suite():
    core = {n: p for n, p in MODULES.items() if not n.startswith("rolebound.suites.")
            or n == "rolebound.suites.base"}
    for n, p in core.items():
        bad = sorted(m for m in imports_of(n, p) if m.startswith("rolebound.suites.") and m != "rolebound.suites.base")
        assert not bad, f"{n} imports {bad}"


def test_metrics_import_no_plotting():
    for n, p in MODULES.items():
        if n.rpartition(".")[2] in ("metrics", "stats"):
            text = p.read_text(encoding="utf-8")
            assert "matplotlib" not in text, n


SUITE_DIRS = sorted(p for p in (PKG / "suites").iterdir() if p.is_dir() and p.name != "__pycache__")
# Every built-in suite folder has these (a plugin suite may leave out card.py, build.py and
# importers.py: their hooks have defaults; docs/extending.md).
SUITE_FILES = {"__init__.py", "suite.py", "data.py", "prompts.py", "strategies.py", "metrics.py", "report.py",
               "card.py", "build.py", "importers.py", "options.py", "README.md"}


def test_one_folder_per_suite():
    suites = PKG / "suites"
    files = sorted(p.name for p in suites.iterdir() if p.is_file())
    assert files == ["__init__.py", "base.py"]
    for d in SUITE_DIRS:
        missing = SUITE_FILES - {p.name for p in d.iterdir()}
        assert not missing, f"{d.name} lacks {sorted(missing)}"
        assert not (d / "cli.py").exists(), f"{d.name}: build commands live in build.py (commands(app))"
        tests = PKG.parents[1] / "tests" / "suites" / d.name
        assert any(tests.glob("test_*.py")), f"no tests/suites/{d.name}/test_*.py"


def test_the_same_names_in_every_suite():
    """report.py's entry point is report_sections; a suite's own modules are imported by their own
    names (no `from . import metrics as M`); suite.py holds no prompt text (prompts.py does)."""
    for d in SUITE_DIRS:
        report = ast.parse((d / "report.py").read_text(encoding="utf-8"))
        assert "report_sections" in {n.name for n in report.body if isinstance(n, ast.FunctionDef)}, d.name
        for p in d.glob("*.py"):
            for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.level == 1 and not node.module:
                    aliased = [a.name for a in node.names if a.asname]
                    assert not aliased, f"{d.name}/{p.name} aliases {aliased}"
        suite = ast.parse((d / "suite.py").read_text(encoding="utf-8"))
        consts = [n for n in suite.body if isinstance(n, ast.Assign) and isinstance(n.value, (ast.Constant, ast.BinOp))
                  and isinstance(getattr(n.value, "value", None), str)]
        assert not consts, f"{d.name}/suite.py defines prompt text; it belongs in prompts.py"


@pytest.mark.slow
def test_every_module_imports_on_its_own():
    import importlib.util

    # the inspect bridge's modules import inspect_ai (rolebound[inspect], in the lock): not without it
    extra = importlib.util.find_spec("inspect_ai") is not None
    names = sorted(m for m in MODULES if extra or not m.startswith("rolebound.inspect."))
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


LONG_ALLOWED: set[tuple[str, str]] = set()      # none: api.run takes one RunRequest now


@pytest.mark.slow
def test_no_function_over_80_lines():
    long = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > 80 and (name, node.name) not in LONG_ALLOWED:
                    long.append(f"{name}.{node.name} ({n} lines)")
    assert not long, long


MAX_PARAMS = 12


def _is_typer_command(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A CLI command: registered with `@app.command()`/`@app.callback()`, or its defaults are
    typer.Option/typer.Argument (a suite's build command, registered in its `commands(app)`)."""
    if any(isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr in ("command", "callback")
           for d in node.decorator_list):
        return True
    defaults = node.args.defaults + [d for d in node.args.kw_defaults if d is not None]
    return any(isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr in ("Option", "Argument")
               for d in defaults)


def param_count(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = node.args
    names = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]
    n = len(names) + (a.vararg is not None) + (a.kwarg is not None)
    return n - (names[:1] in (["self"], ["cls"]))


def test_param_count_counts_every_kind_but_self():
    tree = ast.parse("class C:\n    def f(self, a, /, b, *c, d, **e): pass\ndef g(a, b=1): pass\n")
    f, g = sorted((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)), key=lambda n: n.name)
    assert (param_count(f), param_count(g)) == (5, 2)
    cmd = ast.parse("def run(n: int = typer.Option(1, '--n')): pass").body[0]
    assert _is_typer_command(cmd) and not _is_typer_command(g)


def test_no_function_but_a_cli_command_takes_more_than_12_parameters():
    """Long pass-through signatures hide what travels: pass a typed value (a dataclass, a model)."""
    wide = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _is_typer_command(node):
                if (n := param_count(node)) > MAX_PARAMS:
                    wide.append(f"{name}.{node.name} ({n} parameters)")
    assert not wide, wide
