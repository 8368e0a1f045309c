"""The command's help teaches: every option and argument has help, every command's help ends with
two or three real invocations (which parse, name real suites and models), and the pages read at 80
columns. Errors name the flag as typed and offer the nearest name (difflib)."""

from __future__ import annotations

import shlex

import pytest
import typer
from helpers import needs_script, rolebound

from rolebound.cli import app
from rolebound.errors import closest, did_you_mean

EXAMPLES = "Examples:"


def _tree():
    """(command path, click command, its context) of every command and group, the build commands
    of the suites included (SuiteCommands collects them on first listing)."""
    root = typer.main.get_command(app)
    out = []

    def walk(cmd, path, parent):
        ctx = cmd.context_class(cmd, info_name=path[-1], parent=parent)
        out.append((" ".join(path), cmd, ctx))
        if hasattr(cmd, "list_commands"):
            for name in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, name), [*path, name], ctx)

    walk(root, ["rolebound"], None)
    return out


TREE = _tree()


def _examples(cmd) -> list[str]:
    epilog = cmd.epilog or ""
    assert epilog.startswith(EXAMPLES), "no examples"
    return [ln.strip() for ln in epilog[len(EXAMPLES):].splitlines() if ln.strip() and ln.strip() != "\b"]


def test_the_tree_holds_every_command():
    names = {p for p, _, _ in TREE}
    for p in ("rolebound run", "rolebound data stats", "rolebound data export", "rolebound report",
              "rolebound models install", "rolebound build charm", "rolebound build knowledge-errors"):
        assert p in names


@pytest.mark.parametrize("path,cmd,ctx", TREE, ids=[p for p, _, _ in TREE])
def test_every_parameter_has_help_and_the_help_ends_with_examples(path, cmd, ctx):
    missing = [p.name for p in cmd.get_params(ctx) if not (getattr(p, "help", None) or "").strip()]
    assert not missing, f"{path}: no help for {missing}"
    ex = _examples(cmd)
    assert 2 <= len(ex) <= 3, f"{path}: {len(ex)} examples"
    assert all(x.startswith("rolebound ") for x in ex), ex
    text = cmd.get_help(ctx)
    assert text.rstrip().splitlines()[-1].strip() == ex[-1], f"{path}: the help does not end with its examples"


def _resolve(argv: list[str]):
    """The command an example runs, its arguments parsed by click: an unknown option, a bad value or
    a missing argument raises a UsageError here."""
    cmd, ctx, args = typer.main.get_command(app), None, list(argv)
    name = "rolebound"
    while True:
        ctx = cmd.make_context(name, args, parent=ctx)
        if not hasattr(cmd, "list_commands"):
            return cmd, ctx
        rest = [*ctx._protected_args, *ctx.args]
        if not rest:
            return cmd, ctx
        name, args = rest[0], rest[1:]
        cmd = cmd.get_command(ctx, name)
        assert cmd is not None, f"no command {name!r}"


ALL_EXAMPLES = sorted({x for _, cmd, _ in TREE for x in _examples(cmd)})


@pytest.mark.parametrize("example", ALL_EXAMPLES)
def test_every_example_parses_and_names_real_suites_and_models(example):
    from rolebound.models import parse_spec
    from rolebound.suites import available

    argv = shlex.split(example)[1:]
    cmd, ctx = _resolve(argv)
    p = ctx.params
    suite = p.get("suite") or (p.get("name") if cmd.name == "suites" else None)
    if suite:
        assert suite in available()
        if cmd.name == "export":
            from rolebound.suites import get_suite

            assert get_suite(suite).hub is not None, f"{suite} has no export"
    for key in ("model", "judge", "extractor", "generator"):
        if p.get(key) and p[key] != "self":
            parse_spec(p[key])          # a known backend: BackendError otherwise
    if cmd.name == "import" and p.get("fmt"):
        from rolebound.importers import all_importers

        assert p["fmt"] in all_importers()


@pytest.mark.parametrize("path,cmd,ctx", TREE, ids=[p for p, _, _ in TREE])
def test_the_help_reads_at_80_columns(path, cmd, ctx, monkeypatch):
    """No line past 80 columns, flags without a type (no `<bool>`), the help column of options at
    least 40 wide, and no command's one-line summary cut off with '...'."""
    monkeypatch.setenv("COLUMNS", "80")
    lines = cmd.get_help(ctx).splitlines()
    assert all(len(ln) <= 80 for ln in lines), [ln for ln in lines if len(ln) > 80]
    assert not any("<bool>" in ln for ln in lines)
    in_opts = in_cmds = False
    for ln in lines:
        if ln.strip() in ("Options:", "Arguments:", "Commands:"):
            in_opts, in_cmds = ln.strip() != "Commands:", ln.strip() == "Commands:"
            continue
        if not ln.strip() or not ln.startswith("  "):
            in_opts = in_cmds = False
            continue
        if in_opts and ln.startswith("  -") and "  " in ln.strip():
            col = len(ln) - len(ln.strip().split("  ", 1)[1].lstrip())
            assert 80 - col >= 40, f"{path}: help column {80 - col} wide: {ln!r}"
        if in_cmds:
            assert not ln.rstrip().endswith("..."), f"{path}: summary cut: {ln!r}"


@needs_script
def test_run_help_through_the_script_at_80_columns():
    import os

    res = rolebound("run", "--help", env={**os.environ, "COLUMNS": "80"})
    assert res.returncode == 0
    text = res.stdout
    for flag in ("--top-p P", "--max-tokens N", "--judge-temperature T", "--judge-top-p P", "--judge-max-tokens N"):
        line = next(ln for ln in text.splitlines() if flag in ln)
        assert len(line.split(flag, 1)[1].strip()) > 10, f"no help for {flag}"
    assert "-q, --quiet  " in text and "<bool>" not in text
    assert text.rstrip().splitlines()[-1].strip().startswith("rolebound run ")


@needs_script
def test_models_help_says_what_plain_models_does():
    res = rolebound("models", "--help")
    assert res.returncode == 0
    assert "With no command: every backend" in " ".join(res.stdout.split())
    assert "install" in res.stdout and "rolebound models\n" in res.stdout


def test_did_you_mean_takes_the_nearest_name():
    assert closest("charmm", ["charm", "mcq"]) == "charm"
    assert closest("MCQ", ["charm", "mcq"]) == "mcq"
    assert closest("qwen", ["smollm2-135m", "qwen2.5-coder-1.5b"]) == "qwen2.5-coder-1.5b"
    assert closest("zzz", ["charm", "mcq"]) is None
    assert did_you_mean("zzz", ["charm"]) == ""


def _one_line(res, code=2) -> str:
    assert res.returncode == code, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    return lines[0]


@needs_script
@pytest.mark.parametrize("args,prefix,meant", [
    (["run", "charm", "--model", "gpt-4o-mini"], "error: --model: ", "openai:gpt-4o-mini"),
    (["run", "charm", "-m", "opnai:gpt-4o"], "error: --model: ", "openai:gpt-4o"),
    (["run", "charm", "-m", "random"], "error: --model: ", "fake:random"),
    (["run", "charmm"], "error: SUITE: ", "charm"),
    (["data", "stats", "knowledge-error"], "error: SUITE: ", "knowledge-errors"),
    (["run", "charm", "-m", "fake:random", "--set", "permutaions=2"], "error: --set: ", "permutations"),
    (["run", "charm", "-m", "fake:random", "--strategy", "indepndent"], "error: --strategy: ", "independent"),
    (["data", "import", "mcqcsv", "x.csv", "--out", "x.jsonl"], "error: FORMAT: ", "mcq-csv"),
])
def test_errors_name_the_flag_and_offer_the_nearest_name(args, prefix, meant, tmp_path):
    line = _one_line(rolebound(*args, cwd=tmp_path))
    assert line.startswith(prefix) and "field '" not in line, line
    assert f"(did you mean '{meant}'?)" in line, line
    assert not (tmp_path / "runs").exists()
