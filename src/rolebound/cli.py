"""The `rolebound` command. Heavy imports happen inside commands so `--help` stays fast."""

from __future__ import annotations

import gc
import importlib
import os
import sys
from pathlib import Path
from typing import List, Optional

import typer

from .errors import InputError, RoleboundError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Measure whether a role-playing LLM stays inside its character's boundaries.")
data_app = typer.Typer(no_args_is_help=True, help="Inspect and import datasets.")
build_app = typer.Typer(no_args_is_help=True, help="Construction pipelines that turn seeds into benchmark items.")
app.add_typer(data_app, name="data")
app.add_typer(build_app, name="build")

DEBUG = {"on": False}


def _console():
    from rich.console import Console

    return Console(stderr=False)


def parse_sets(values: list[str] | None, flag: str = "--set") -> dict:
    """--set key=value (value parsed as YAML: numbers, booleans, lists)."""
    import yaml

    out = {}
    for v in values or []:
        if "=" not in v:
            raise InputError(f"expected key=value, got '{v}'", field=flag)
        k, _, raw = v.partition("=")
        try:
            out[k.strip()] = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            out[k.strip()] = raw
    return out


@app.callback()
def _root(debug: bool = typer.Option(False, "--debug", help="Show tracebacks.")):
    DEBUG["on"] = debug


@app.command()
def run(
    suite: Optional[str] = typer.Argument(None, help="charm, knowledge-errors, multiverse, capability or mcq"),
    model: str = typer.Option("bundled", "--model", "-m", help="BACKEND:NAME (see `rolebound models`)"),
    strategy: Optional[str] = typer.Option(None, "--strategy", "-s", help="one or more, comma-separated"),
    data: Optional[str] = typer.Option(None, "--data", help="dataset file (default: the suite's starter set)"),
    limit: Optional[int] = typer.Option(None, "--limit", "-n", min=1, help="run only N items"),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="run directory (same --out resumes)"),
    scoring: Optional[str] = typer.Option(None, "--scoring", help="generate or logprob (suites that offer both)"),
    judge: Optional[str] = typer.Option(None, "--judge", help="judge model BACKEND:NAME (suites with a judge)"),
    repeats: int = typer.Option(1, "--repeats", min=1, help="run everything N times"),
    temperature: Optional[float] = typer.Option(None, "--temperature"),
    top_p: Optional[float] = typer.Option(None, "--top-p"),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens"),
    seed: Optional[int] = typer.Option(None, "--seed"),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", "-c", min=1,
                                              help="requests in flight (API) / items in flight (local)"),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="OpenAI-compatible server URL"),
    api_key_env: Optional[str] = typer.Option(None, "--api-key-env", help="env var holding the API key"),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="per-request timeout, seconds"),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="local models: auto, bf16, fp32"),
    threads: Optional[int] = typer.Option(None, "--threads", min=1,
                                          help="local models: CPU threads (default: automatic; or ROLEBOUND_THREADS)"),
    no_cache: bool = typer.Option(False, "--no-cache", help="bypass the shared response cache"),
    overwrite: bool = typer.Option(False, "--overwrite", help="start the run directory again"),
    sets: Optional[List[str]] = typer.Option(None, "--set", help="suite option key=value (repeatable)"),
    backend_opts: Optional[List[str]] = typer.Option(None, "--backend-opt",
                                                     help="backend option key=value (repeatable), e.g. "
                                                          "transport=aiohttp, tensor_parallel_size=2"),
    config: Optional[Path] = typer.Option(None, "--config", help="YAML run config (may be a grid)"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar"),
):
    """Run a suite against a model; writes manifest, records, metrics and a report."""
    from . import api
    from .config import load_config
    from .records import Decoding

    if config:
        runs = load_config(config).expand()
    else:
        if not suite:
            raise InputError("give a SUITE or --config FILE", field="suite")
        dec = Decoding().merged(temperature=temperature, top_p=top_p, max_tokens=max_tokens, seed=seed)
        bopts = {k: v for k, v in dict(base_url=base_url, api_key_env=api_key_env, timeout=timeout,
                                       dtype=dtype, threads=threads, concurrency=concurrency).items() if v is not None}
        bopts.update(parse_sets(backend_opts, "--backend-opt"))
        runs = [dict(suite=suite, model=model, strategies=strategy, data=data, limit=limit, out=out,
                     scoring=scoring, judge=judge, repeats=repeats, decoding=dec, concurrency=concurrency,
                     use_cache=not no_cache, backend_options=bopts, options=parse_sets(sets))]
    failed = 0
    for kw in runs:
        res = api.run(**kw, overwrite=overwrite, progress=not quiet)
        _summary(res)
        failed += res.counts.errors + res.counts.items_failed
    if failed:
        raise typer.Exit(3)


def _summary(res) -> None:
    from rich.table import Table

    c = res.counts
    con = _console()
    t = Table(title=f"{res.manifest.suite} on {res.manifest.model}", show_header=False)
    t.add_row("run directory", str(res.run_dir))
    t.add_row("items x strategies x repeats", str(res.manifest.counts.get("jobs")))
    t.add_row("model calls", f"{c.calls} (cache hits {c.cache_hits}, resumed {c.resumed})")
    t.add_row("failed calls", f"{c.errors}" + (" -> rerun the same command to retry them" if c.errors else ""))
    if c.items_failed:
        t.add_row("failed items", f"{c.items_failed} (see errors.log)")
    t.add_row("wall time", f"{res.wall_s:.1f} s")
    from .suites import get_suite

    summ = getattr(get_suite(res.manifest.suite), "summary", None)
    if summ and res.metrics:
        for k, v in summ(res.metrics):
            t.add_row(k, v)
    for p in res.report_paths:
        t.add_row("report", str(p))
    con.print(t)


@app.command()
def report(run_dir: Path = typer.Argument(..., help="a run directory"),
           judge: Optional[str] = typer.Option(None, "--judge", help="re-judge with this model first (suites with a judge)"),
           quiet: bool = typer.Option(False, "--quiet", "-q")):
    """Rebuild metrics.json and the report from records.jsonl alone (optionally re-judging)."""
    from . import api

    if judge:
        from .rejudge import rejudge

        rejudge(run_dir, judge, progress=not quiet)
    _, paths = api.build_report(run_dir)
    for p in paths:
        print(p)


@app.command()
def compare(run_dirs: List[Path] = typer.Argument(..., help="two or more run directories"),
            out: Optional[Path] = typer.Option(None, "--out", "-o", help="folder for compare.md/html")):
    """Put several runs side by side (one row per model, strategy)."""
    from .compare import compare_runs

    paths = compare_runs(run_dirs, out)
    for p in paths:
        print(p)


@app.command()
def models():
    """List the model backends."""
    from rich.table import Table

    from .models import BACKENDS

    t = Table("backend", "what", title="--model BACKEND:NAME")
    for k, (_, _, desc) in BACKENDS.items():
        t.add_row(k, desc)
    _console().print(t)


@app.command()
def suites():
    """List the suites and their strategies."""
    from rich.table import Table

    from .suites import available, get_suite

    t = Table("suite", "strategies", "what", title="rolebound run SUITE")
    for name in available():
        s = get_suite(name)
        t.add_row(name, ", ".join(s.strategies), s.description)
    _console().print(t)


@data_app.command("stats")
def data_stats(suite: str = typer.Argument(...), data: Optional[str] = typer.Option(None, "--data"),
               sets: Optional[List[str]] = typer.Option(None, "--set")):
    """Counts of a suite's dataset (the starter set unless --data)."""
    from rich.table import Table

    from .suites import get_suite
    from .suites.base import RunSettings

    s = get_suite(suite)
    settings = RunSettings(strategies=list(s.default_strategies), options=parse_sets(sets))
    ds = s.load(data, settings)
    con = _console()
    con.print(f"[bold]{suite}[/bold]: {len(ds.items)} items from {ds.source} (sha {ds.hash})")
    for title, df in s.stats(ds):
        d = df.reset_index() if getattr(df.index, "name", None) or list(df.index.names) != [None] else df
        t = Table(*[str(c) for c in d.columns], title=title)
        for row in d.itertuples(index=False):
            t.add_row(*[str(x) for x in row])
        con.print(t)


@data_app.command("import")
def data_import(fmt: str = typer.Argument(..., metavar="FORMAT", help="see `rolebound data formats`"),
                src: str = typer.Argument(..., help="source file or folder"),
                out: Path = typer.Option(..., "--out", "-o", help="file to write (loadable with --data)")):
    """Convert a public dataset into a suite's data format."""
    from .importers import all_importers

    imps = all_importers()
    if fmt not in imps:
        raise InputError(f"unknown format '{fmt}'; available: {', '.join(sorted(imps)) or 'none'}", field="FORMAT")
    out.parent.mkdir(parents=True, exist_ok=True)
    print(imps[fmt][0](src, str(out)))


@data_app.command("formats")
def data_formats():
    """List the importable formats."""
    from .importers import all_importers

    for name, (_, help_) in sorted(all_importers().items()):
        print(f"{name:28s} {help_}")


def _register_extensions() -> None:
    """Suites add their own `build` and `data import` commands here."""
    for mod in ("charm", "knowledge_errors", "multiverse", "capability"):
        name = f"rolebound.build.{mod}_cli"
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name).register(build_app, data_app)


_register_extensions()


def main() -> None:
    try:
        _main()
    finally:
        # Everything is written by now: spare the interpreter its last full garbage collection
        # over torch/transformers objects (1.5 s of every run's exit on this 2-core machine).
        gc.freeze()


def _main() -> None:
    try:
        app(standalone_mode=False)
    except RoleboundError as exc:
        if DEBUG["on"] or os.environ.get("ROLEBOUND_DEBUG"):
            raise
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("\ninterrupted; rerun the same command to resume where it stopped", file=sys.stderr)
        sys.exit(130)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:  # click usage errors
        import click

        if isinstance(exc, click.exceptions.Abort):
            print("\ninterrupted; rerun the same command to resume where it stopped", file=sys.stderr)
            sys.exit(130)
        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(2)
        raise


if __name__ == "__main__":
    main()
