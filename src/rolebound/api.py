"""The Python API (also what the CLI calls).

    import rolebound
    res = rolebound.run("charm", model="bundled", limit=50)
    df = rolebound.load_run(res.run_dir)          # records as a pandas DataFrame
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, Sequence

from .errors import InputError, RoleboundError, RunStopped, did_you_mean
from .io import open_regular
from .models import create_backend, parse_spec
from .protocol import is_demo, overrides_of, repeat_seed, resolve
from .records import VERSION, Decoding, RunManifest
from .request import RunRequest, make_request
from .runner import Plan, RunResult, check_resumable, execute, finish, git_revision, now, open_session, signal_stop
from .store import MANIFEST, METRICS, RECORDS, RunDir, claim_run_folder, records_frame
from .suites import get_suite
from .loop import default_concurrency, stop_signals
from .suites.base import RunSettings


def default_out(suite: str, model: str, strategies: Sequence[str], scoring: str | None) -> Path:
    """Deterministic, so the same command resumes the same run."""
    backend, name = parse_spec(model)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{backend}-{Path(name).name if backend == 'hf' else name}").strip("-")
    strat = "+".join(strategies)
    return Path("runs") / f"{suite}__{slug}__{strat}" if not scoring else \
        Path("runs") / f"{suite}__{slug}__{strat}__{scoring}"


def run(request: RunRequest | str | None = None, /, **kw: Any) -> RunResult:
    """Run a suite and write the run directory; resumes if `out` holds the same run.

    `request` is a RunRequest (request.py: what the CLI and a YAML config build too), or the
    suite's name with the request's fields as keywords: `run("charm", model="fake:random",
    limit=10)`. `decoding` and `judge_decoding` hold what the caller sets; everything else comes
    from the suite's paper protocol, or from the demo settings on the bundled model
    (protocol.py). `judge="self"` judges with the model itself. `extractor` (BACKEND:NAME) reads
    the answers the rules leave as none, reported apart (scoring/model_extract.py)."""
    t0 = time.perf_counter()
    req = _as_request(request, kw)
    s = get_suite(req.suite)
    plan = _plan(s, req)
    dataset, items = _items(s, req, plan.settings)
    out = req.out or default_out(req.suite, req.model, plan.settings.strategies, plan.settings.scoring)
    claim_run_folder(out)       # a user's folder is never written into; checked again under the lock
    rd = RunDir(out)
    if req.overwrite and rd.exists():
        rd.read_manifest()      # --overwrite clears a run's folder only: said before a .lock is made there
    manifest = _manifest(s, req, plan, dataset, items)
    manifest.counts = {"invocations": 1}       # written at start: a killed first invocation still counts
    earlier: dict[str, int] = {}
    old_info: dict = {}        # a resumed run may never load the model: keep what the last one said
    new_run = False            # this invocation created the folder: an early stop leaves nothing

    def take_over() -> None:
        """Under the lock, before anything in the folder is touched: a running run is never
        cleared by --overwrite, and a different run is never resumed."""
        nonlocal new_run
        claim_run_folder(out)
        if not rd.exists():
            new_run = not (out / RECORDS).exists()
            return
        if req.overwrite:
            rd.read_manifest()          # --overwrite clears a run's folder only
            for name in (RECORDS, METRICS, MANIFEST, "errors.log"):
                rd.remove(name)
            return
        old = rd.read_manifest()
        check_resumable(old, manifest, out)
        manifest.started = old.started
        earlier.update(old.counts)
        # so a kill -9 of this invocation keeps the totals, and still counts as an invocation
        manifest.counts = {**old.counts, "invocations": _invocations(old.counts) + 1}
        old_info.update(old.model_info or {})

    jobs = len(items) * len(plan.settings.strategies) * req.repeats
    timing: dict[str, float] = {"start": time.time()}
    metrics, paths = ({}, [])
    with stop_signals() as sig, \
            open_session(rd, req.suite, plan.backend, plan.decoding, judge=plan.judge, use_cache=req.use_cache,
                         judge_decoding=manifest.judge_decoding, extractor=plan.extractor,
                         on_locked=take_over) as session:
        rd.write_manifest(manifest)
        stopped = execute(s, plan, dataset, items, session, sig=sig, progress=req.progress, timing=timing,
                          leave_nothing=lambda: new_run and not session.completed)
        c = session.counts
        manifest.counts = _add_counts(earlier, {
            "items": len(items), "jobs": jobs, "model_calls": c.calls, "cache_hits": c.cache_hits,
            "resumed": c.resumed, "failed_calls": c.errors, "failed_items": c.items_failed,
            "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens,
            "wall_s": round(time.time() - timing["start"])})
        manifest.model_info = plan.backend.info() or old_info    # a resumed run may never load the model
        manifest.timing = {k: round(v, 3) for k, v in timing.items()}   # epoch seconds, for benchmarks
        finish(rd, manifest, session, bool(stopped))
        if req.report:
            metrics, paths = _report_after(s, out, stopped)
        if stopped is None and sig.code is not None:     # a signal while the above was written
            stopped = signal_stop(sig.code)
        if stopped is not None:
            raise _stopped(stopped, out, session, jobs, paths)
    return RunResult(run_dir=out, manifest=manifest, counts=c, metrics=metrics, report_paths=paths,
                     errors=session.errors, wall_s=time.perf_counter() - t0)


def _as_request(request: RunRequest | str | None, kw: dict[str, Any]) -> RunRequest:
    if isinstance(request, RunRequest):
        if kw:
            raise TypeError("run(RunRequest) takes no other arguments; set them on the request")
        return request
    if request is not None:
        kw = {"suite": request, **kw}
    return make_request(kw)


def _plan(s, req: RunRequest) -> Plan:
    """Strategies, protocol, backends and judge of a request, checked against the suite."""
    strategies = list(req.strategies or s.default_strategies)
    unknown = [x for x in strategies if x not in s.strategies]
    if unknown:
        raise InputError(f"unknown strategy '{unknown[0]}' for suite {req.suite}"
                         f"{did_you_mean(unknown[0], s.strategies)}; available: " + ", ".join(s.strategies),
                         field="--strategy")
    backend_name, model_name = parse_spec(req.model)
    resolved = resolve(s.protocol, backend_name, overrides_of(req.decoding), overrides_of(req.judge_decoding),
                       req.protocol, model_name=model_name)
    decoding = resolved.decoding
    if req.repeats > 1 and decoding.temperature == 0 and not req.allow_greedy_repeats:
        raise InputError(f"--repeats {req.repeats} at temperature 0 gives {req.repeats} copies of one greedy "
                         "run; set --temperature above 0 (each repeat gets its own seed), or pass "
                         "--allow-greedy-repeats to repeat greedy decoding anyway", field="--repeats")
    settings = s.run_settings(strategies, dict(req.options), scoring=req.scoring, judge=req.judge,
                              repeats=req.repeats, limit=req.limit, seed=decoding.seed, protocol=resolved.mode)
    if resolved.mode == "paper":     # the manifest's protocol label names the options that leave the paper too
        resolved.departures += [d for d in s.option_departures(settings.options.given()) if d not in resolved.departures]
    bopts = req.backend_options.given()
    backend = create_backend(req.model, decoding, **bopts)
    settings.backend = backend.backend
    settings.demo = is_demo(backend_name, model_name)
    skipped = s.unavailable_strategies(backend, strategies) if not req.strategies else {}
    if skipped:     # the defaults this backend cannot run are left out, and the report says so
        settings.strategies = [x for x in strategies if x not in skipped]
    _scoring(s, req, settings, backend, resolved)
    plan = Plan(settings=settings, resolved=resolved, decoding=decoding, backend=backend,
                 concurrency=req.concurrency or default_concurrency(backend), skipped=skipped)
    jopts, xopts = req.judge_options.given(), req.extractor_options.given()
    if s.uses_judge:
        plan.judge, plan.self_judged = _judge(s, req.suite, req.model, req.judge, settings, backend, resolved,
                                              bopts, jopts)
    elif req.judge:
        raise InputError(f"suite {req.suite} uses no judge", field="--judge")
    elif jopts:
        raise InputError(f"suite {req.suite} uses no judge", field="--judge-opt")
    s.check(backend, settings, plan.judge)
    if xopts and not req.extractor:
        raise InputError("extractor options need --extractor BACKEND:NAME", field="--extractor-opt")
    if req.extractor:
        from functools import partial

        from .scoring.model_extract import extract_all

        plan.extractor = _extractor(s, req.suite, req.extractor, req.model, backend, plan.judge, bopts, xopts)
        plan.extract = partial(extract_all, s, spec=plan.extractor.spec, concurrency=plan.concurrency)
    return plan


def _scoring(s, req: RunRequest, settings: RunSettings, backend, resolved) -> None:
    paper = resolved.mode == "paper"
    if s.offers_scoring:
        settings.scoring = req.scoring or (s.protocol.scoring if paper and s.protocol.scoring
                                           else s.default_scoring(backend))
        if settings.scoring not in ("generate", "logprob"):
            raise InputError(f"scoring must be 'generate' or 'logprob', not '{settings.scoring}'",
                             field="--scoring")
        if paper and s.protocol.scoring and settings.scoring != s.protocol.scoring:
            resolved.departures.append(f"scoring {settings.scoring} instead of {s.protocol.scoring}")
    elif req.scoring:
        raise InputError(f"suite {req.suite} has no --scoring choice", field="--scoring")


def _items(s, req: RunRequest, settings: RunSettings):
    try:
        if req.data:    # hub.load_data: the suite's load, or an `hf:DIR` export's reader
            from .hub import load_data

            dataset = load_data(s, req.data, settings)
        else:
            dataset = s.load(req.data, settings)
        items = s.select(dataset.items, req.limit, settings)
    except (ValueError, TypeError) as exc:   # a --set value the suite could not use
        raise InputError(f"cannot load the {req.suite} data with these options: {exc}",
                         field="--set" if req.options else "--data") from None
    if not dataset.items and req.data:
        raise InputError(f"no items in {req.data}")
    if not items:
        raise InputError("the dataset has no items to run", file=dataset.source)
    return dataset, items


def _manifest(s, req: RunRequest, plan: Plan, dataset, items) -> RunManifest:
    judge, extractor, resolved = plan.judge, plan.extractor, plan.resolved
    return RunManifest(
        suite=req.suite, strategies=plan.settings.strategies, model=plan.backend.spec,
        backend=plan.backend.backend, adapter=getattr(plan.backend, "adapter", None), judge=judge.spec if judge is not None else None,
        scoring=plan.settings.scoring, extractor=extractor.spec if extractor is not None else None,
        decoding=plan.decoding, judge_decoding=resolved.judge_decoding if judge is not None else None,
        protocol={**resolved.manifest(), "self_judged": plan.self_judged, "dataset_items": len(dataset.items),
                  "seeds": [repeat_seed(plan.decoding.seed, r) for r in range(req.repeats)]},
        dataset=dataset.source, dataset_hash=dataset.hash, dataset_provenance=dataset.provenance,
        n_items=len(items), dataset_items=len(dataset.items),
        limit=req.limit, repeats=req.repeats, options=plan.settings.options.given(),
        prompt_templates=_template_hashes(s),
        endpoints=endpoints(model=plan.backend, judge=judge, extractor=extractor),
        skipped_strategies=plan.skipped or {},
        package_version=VERSION, git_revision=git_revision(), started=now())


def _report_after(suite, out: Path, stopped: RoleboundError | None) -> tuple[dict, list[Path]]:
    from .report import build

    try:
        return build(out, suite)
    except RoleboundError:
        raise
    except Exception:  # noqa: BLE001 - a partial run may not yet have what a metric needs
        if not stopped:
            raise
    return {}, []


def _lines(path: Path):
    with open_regular(path) as fh:      # a FIFO: InputError, not a hang
        yield from fh


# Summed over every invocation of a run (a resume adds its own); the rest describe the last one.
_SUMMED = ("model_calls", "cache_hits", "failed_calls", "prompt_tokens", "completion_tokens", "wall_s")


def _add_counts(earlier: dict[str, int], now_: dict[str, int]) -> dict[str, int]:
    out = dict(now_)
    for k in _SUMMED:
        out[k] = int(earlier.get(k, 0)) + now_[k]
    out["invocations"] = _invocations(earlier) + 1
    # wall_s sums only the invocations that timed themselves (manifests before 2026-12-02 did not)
    out["timed_invocations"] = int(earlier.get("timed_invocations", 0)) + 1
    return out


def _invocations(earlier: dict[str, int]) -> int:
    # manifests written before invocations were counted at start lack the key: one invocation then
    return int(earlier.get("invocations", 1 if earlier else 0))


def _stopped(exc: RoleboundError, out: Path, session, jobs: int, paths: list[Path]) -> RunStopped:
    report = f"; report: {paths[-1]}" if paths else ""
    code = getattr(exc, "exit_code", 0)
    what = {130: "interrupted", 143: "terminated"}.get(code) or f"stopped: {str(exc).rstrip('.')}"
    done = session.jobs_done
    # a job that ended on a failed call is not done: say how many succeeded
    ok = done - session.counts.items_failed
    tally = f"{ok} of {jobs} jobs done" + (f" ({done - ok} failed)" if done > ok else "")
    return RunStopped(f"{what}. {tally}, records kept in {out}{report}; "
                      "rerun the same command to resume", exit_code=code)


def _judge(s, suite, model, judge, settings, backend, resolved, bopts, judge_options=None):
    """The judge backend (None: the suite makes no judge calls) and whether it is the model itself.
    A real model needs --judge (a paper judged with another model); `--judge self` is the explicit
    choice to judge with the model under test. Demo backends judge themselves by default."""
    proto = s.protocol
    if judge_options and judge in (None, "self"):
        raise InputError("judge options (--judge-opt, --judge-base-url, --judge-api-key-env) need "
                         "--judge BACKEND:NAME naming the judge model", field="--judge-opt")
    # the model's own name on another endpoint is another judge
    self_judge = judge in (None, "self") or (judge == model and not judge_options)
    settings.judge = model if self_judge else judge
    settings.judge_requested = judge is not None
    if self_judge:
        judge_backend = backend
    else:
        jdec = resolved.judge_decoding or Decoding(max_tokens=resolved.decoding.max_tokens,
                                                   seed=resolved.decoding.seed)
        judge_backend = other_backend(settings.judge, jdec, bopts, judge_options, "--judge-opt")
    if not s.judge_enabled(settings, backend, judge_backend):
        settings.judge = None      # no judge calls: the manifest names no judge
        return None, False
    if judge is None and resolved.mode == "paper" and proto is not None and proto.judge_required:
        raise InputError(f"suite {suite} is judged by a model: give --judge BACKEND:NAME (the paper used "
                         f"a separate judge, {proto.source}), or --judge self to judge with {model} "
                         "itself (the report then says self-judged)", field="--judge")
    if self_judge and resolved.mode == "paper" and proto is not None and proto.judge_separate:
        resolved.departures.append("self-judged (the paper judged with another model)")
    return judge_backend, self_judge


def _extractor(s, suite, spec, model, backend, judge_backend, bopts, own=None):
    """The extractor backend: the model's or the judge's own when the spec names it (no second
    copy of a local model), else a new one sharing the run's backend options it knows."""
    from .suites.base import Suite
    from .scoring.model_extract import DECODING

    if type(s).model_extraction_candidates is Suite.model_extraction_candidates:
        raise InputError(f"suite {suite} has no answers for a model-based extractor to read", field="--extractor")
    try:
        if not own and spec.strip() in (model, backend.spec):
            return backend
        if not own and judge_backend is not None and spec.strip() == judge_backend.spec:
            return judge_backend
        return other_backend(spec, DECODING, bopts, own, "--extractor-opt")
    except InputError:
        raise
    except RoleboundError as exc:
        raise InputError(str(exc), field="--extractor") from None


# Run options about the model under test and its endpoint: a judge or extractor never inherits them.
_OWN = ("base_url", "tokenizer", "chat_template", "prefill", "think_tag", "endpoint")


def other_backend(spec: str, decoding, bopts: dict | None, own: dict | None, flag: str):
    """A judge's or extractor's backend: its own options (`own`, each one checked: a typo is an
    error naming `flag`) over the run's options that are not about the model's endpoint."""
    from .models import backend_class

    own = {k: v for k, v in (own or {}).items() if v is not None}
    names = backend_class(parse_spec(spec)[0]).option_names
    bad = sorted(set(own) - set(names))
    if bad:
        raise InputError(f"backend '{parse_spec(spec)[0]}' has no option '{bad[0]}'; its options: "
                         + (", ".join(sorted(names)) or "none"), field=flag)
    shared = {k: v for k, v in (bopts or {}).items() if k not in _OWN}
    if "base_url" in (bopts or {}) or "base_url" in own:
        shared.pop("api_key_env", None)     # the model's server's key is no key for another server
    return create_backend(spec, decoding, strict=False, **{**shared, **own})


def endpoints(**backends) -> dict[str, str]:
    """role -> base URL (no credentials) of each API backend; never a key."""
    out = {}
    for role, b in backends.items():
        url = getattr(b, "endpoint_url", None)
        if b is not None and callable(url):
            out[role] = url()
    return out


def _template_hashes(suite) -> dict[str, str]:
    import hashlib

    return {k: hashlib.sha256(v.encode("utf-8")).hexdigest()[:16] for k, v in suite.prompt_templates().items()}


def build_report(run_dir: str | Path) -> tuple[dict, list[Path]]:
    """Recompute metrics.json and the report files from records.jsonl alone (refused while
    another process writes the run): report.build, or judgecheck.run.build for a judge-check run."""
    from .report import build

    rd = RunDir(run_dir)
    manifest = rd.read_manifest()       # not a run folder: say so before making a .lock in it
    if rd.records_path.exists() and not any(line.strip() for line in _lines(rd.records_path)):
        raise InputError(f"no records in {run_dir} (records.jsonl is empty); run it again to make some")
    rd.lock()
    try:
        if getattr(manifest, "kind", None) == "judge-check":
            from .judgecheck.run import build as build_judge_check

            return build_judge_check(run_dir)
        return build(run_dir, get_suite(manifest.suite))
    finally:
        rd.unlock()


def load_run(run_dir: str | Path):
    """Records of a run as a DataFrame (last record per call, meta fields as columns)."""
    return records_frame(run_dir)


def load_manifest(run_dir: str | Path) -> RunManifest:
    return RunDir(run_dir).read_manifest()


__all__ = ["run", "build_report", "load_run", "load_manifest", "RoleboundError"]
