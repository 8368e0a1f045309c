"""How many CPU threads the local engines use, so that several processes share one machine.

Why (issue 17; ../shared/notes/offline-models.md): torch at 2 threads on 2 busy cores collapses.
OpenMP threads meet at a barrier after every operation, and busy-wait there; when one of them is
descheduled the other spins, and two such processes fight for the same cores (two runs together
took 18.5x one run alone). So:
- OMP_WAIT_POLICY=PASSIVE: waiting threads sleep. libgomp reads it once, when torch loads it,
  which is why `rolebound/__init__` sets it before anything imports torch.
- intra-op threads: the cores this process may use, less the cores other processes keep busy,
  shared with other rolebound engines on the machine (a registry of pids in the cache folder).
  Chosen once, when the engine starts, and kept for the run: in bf16 the thread count moves
  log-probs slightly (measured: up to 0.24 nats, 2 of 16 greedy texts changed between 1 and 2
  threads), so one run's answers all come from one count, the one its manifest records.
  ROLEBOUND_THREADS=adaptive re-checks every few seconds between batches instead.
- inter-op threads: 1 (the runner already batches; a second pool only competes).
Overrides, strongest first: `--threads N` (backend option), ROLEBOUND_THREADS, OMP_NUM_THREADS.
"""

from __future__ import annotations

import atexit
import math
import os
import sys
import threading
import time
from pathlib import Path

RECHECK_S = 5.0          # ROLEBOUND_THREADS=adaptive: how often the choice is looked at again
ACTIVE_S = 30.0          # a registered engine that has not run a batch for this long is idle
MIN_SAMPLE_S = 0.2       # shortest window for the CPU-load sample
MAX_THREADS = 512        # llama.cpp's own limit (GGML_MAX_N_THREADS); 100,000 crashed the engine


_IN_TIME: list[bool] = []


def set_wait_policy() -> bool:
    """OMP_WAIT_POLICY=PASSIVE unless the user chose one; also starts the first load sample.
    True if torch was not loaded yet (in time for libgomp to see it)."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if not _IN_TIME:
        _IN_TIME.append("torch" not in sys.modules)
    policy()
    return _IN_TIME[0]


# ------------------------------------------------------------------------------------------------
def available_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _cpus() -> set[int] | None:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def read_cpu_times(cpus: set[int] | None = None, text: str | None = None) -> tuple[float, float] | None:
    """(busy, total) seconds summed over `cpus` (all when None) from /proc/stat."""
    try:
        text = text if text is not None else Path("/proc/stat").read_text()
    except OSError:
        return None
    tick = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0
    busy = total = 0
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu":
            continue
        try:
            n = int(name[3:])
        except ValueError:
            continue
        if cpus is not None and n not in cpus:
            continue
        vals = [int(v) for v in rest.split()[:8]]
        idle = vals[3] + (vals[4] if len(vals) > 4 else 0)      # idle + iowait
        busy += sum(vals) - idle
        total += sum(vals)
    return (busy / tick, total / tick) if total else None


class LoadSample:
    """CPU that *other* processes used since the last look: machine busy time on our cores
    minus our own process time, over the wall time between two snapshots."""

    def __init__(self):
        self.cpus = _cpus()
        self._snap = self._take()

    def _take(self):
        return read_cpu_times(self.cpus), time.process_time(), time.monotonic()

    def others(self, min_window: float = MIN_SAMPLE_S) -> float | None:
        """Cores kept busy by other processes (0.0 .. cores), None if /proc/stat is unreadable."""
        (cpu0, own0, t0) = self._snap
        wait = min_window - (time.monotonic() - t0)
        if wait > 0:
            time.sleep(wait)
        snap = self._take()
        self._snap = snap
        (cpu1, own1, t1) = snap
        if cpu0 is None or cpu1 is None or t1 <= t0:
            return None
        return others_busy(cpu1[0] - cpu0[0], own1 - own0, t1 - t0)


def others_busy(machine_busy_s: float, own_cpu_s: float, wall_s: float) -> float:
    """Average cores other processes kept busy over a window (never below 0)."""
    return max(0.0, (machine_busy_s - own_cpu_s) / wall_s) if wall_s > 0 else 0.0


def choose_threads(cores: int, others: float | None, peers: int) -> tuple[int, str]:
    """The automatic intra-op thread count and why.

    cores: CPUs this process may run on; others: cores kept busy by other processes (None:
    unknown); peers: other live rolebound engines on this machine.
    """
    cores = max(1, int(cores))
    if cores == 1:
        return 1, "1 core available"
    n, why = cores, [f"{cores} cores available"]
    if others is not None and others >= 0.5:
        free = max(1, cores - math.floor(others + 0.5))
        if free < n:
            n = free
        why.append(f"{others:.1f} busy with other processes")
    if peers > 0:
        share = max(1, cores // (peers + 1))
        if share < n:
            n = share
        why.append(f"{peers} other rolebound engine{'s' if peers > 1 else ''} running")
    if n == cores:
        why.append("machine otherwise idle" if others is not None else "load unknown")
    return n, ", ".join(why)


def parse_threads(value, source: str) -> int:
    """A thread count from an option or environment variable; one clear line if it is not one."""
    from .errors import InputError

    try:
        n = int(str(value).strip())
    except (TypeError, ValueError):
        n = 0
    if not 1 <= n <= MAX_THREADS:
        raise InputError(f"{source} must be a whole number from 1 to {MAX_THREADS}, not '{value}'", field=source)
    return n


def resolve_override(option=None, env=None) -> tuple[int | None, str]:
    """(forced thread count or None for automatic, its source): --threads > ROLEBOUND_THREADS >
    OMP_NUM_THREADS > automatic ("auto", or "adaptive" from ROLEBOUND_THREADS=adaptive)."""
    env = os.environ if env is None else env
    if option is not None:
        return parse_threads(option, "--threads"), "--threads"
    mode = "auto"
    for var in ("ROLEBOUND_THREADS", "OMP_NUM_THREADS"):
        raw = str(env.get(var) or "").strip().lower()
        if var == "ROLEBOUND_THREADS" and raw in ("auto", "adaptive"):
            mode = raw
            continue
        if raw:
            return parse_threads(raw, var), var
    return None, mode


# ------------------------------------------------------------------------------------------------
class Registry:
    """One small file per live rolebound engine process, under <cache>/engines/.

    A file is named by its pid and holds that process's start time, so a recycled pid is not
    counted; files of dead processes are removed by whoever sees them. An engine touches its file
    while it works; one idle for ACTIVE_S (a notebook that finished) is not counted."""

    def __init__(self, folder: Path | None = None):
        if folder is None:
            from .store import cache_dir

            folder = cache_dir() / "engines"
        self.folder = Path(folder)
        self.mine: Path | None = None

    @staticmethod
    def _start_time(pid: int) -> str | None:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        return stat.rpartition(")")[2].split()[19]     # field 22: start time in ticks

    def register(self) -> None:
        if self.mine is not None:
            return
        pid = os.getpid()
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            path = self.folder / f"{pid}"
            tmp = self.folder / f".{pid}.tmp"
            tmp.write_text(self._start_time(pid) or "?")
            os.replace(tmp, path)
        except OSError:
            return          # a read-only cache only costs the peer count
        self.mine = path
        atexit.register(self.unregister)

    def touch(self) -> None:
        if self.mine is not None:
            try:
                os.utime(self.mine)
            except OSError:
                pass

    def unregister(self) -> None:
        if self.mine is not None:
            try:
                self.mine.unlink()
            except OSError:
                pass
            self.mine = None

    def peers(self) -> int:
        """Live, recently active registered processes other than this one."""
        me, n, now = os.getpid(), 0, time.time()
        try:
            entries = list(self.folder.iterdir())
        except OSError:
            return 0
        for f in entries:
            if not f.name.isdigit() or int(f.name) == me:
                continue
            try:
                want, age = f.read_text().strip(), now - f.stat().st_mtime
            except OSError:
                continue
            got = self._start_time(int(f.name))
            if got is not None and (want == "?" or want == got):
                n += age <= ACTIVE_S
            else:
                try:
                    f.unlink()
                except OSError:
                    pass
        return n


# ------------------------------------------------------------------------------------------------
class ThreadPolicy:
    """The process-wide automatic choice. `apply()` sets torch's threads in the calling thread
    (OpenMP keeps the count per thread, and the engines run in worker threads). The choice is made
    once; in the "adaptive" mode it is looked at again at most every RECHECK_S seconds."""

    def __init__(self):
        self._lock = threading.Lock()
        self._local = threading.local()
        self.auto: int | None = None
        self.auto_why = ""
        self.checked = 0.0
        self.last: dict = {}
        self.changes: list[dict] = []
        self.registry: Registry | None = None
        self.touched = 0.0
        self.sample = LoadSample()         # from import time: startup is the first window
        self._interop_done = False

    def register(self) -> None:
        """Count this process as a rolebound engine (peers then share the cores with it)."""
        with self._lock:
            if self.registry is None:
                self.registry = Registry()
            self.registry.register()

    def current(self, forced: int | None = None, source: str = "auto") -> tuple[int, str]:
        with self._lock:
            if self.registry is not None and time.monotonic() - self.touched >= RECHECK_S:
                self.registry.touch()           # "still working" for the other engines
                self.touched = time.monotonic()
            if forced is not None:
                n, why = int(forced), f"{source}={forced}"
            else:
                again = source == "adaptive" and time.monotonic() - self.checked >= RECHECK_S
                if self.auto is None or again:
                    peers = self.registry.peers() if self.registry is not None else 0
                    self.auto, self.auto_why = choose_threads(available_cores(), self.sample.others(), peers)
                    self.checked = time.monotonic()
                n, why = self.auto, self.auto_why
            if self.last.get("threads") != n:
                self.changes.append({"t": round(time.time(), 1), "threads": n, "why": why})
                del self.changes[:-20]
            self.last = {"threads": n, "source": source, "why": why}
            return n, why

    def apply(self, forced: int | None = None, source: str = "auto") -> int:
        """Set torch's intra-op threads for the calling thread (and inter-op threads to 1, once)."""
        import torch

        n, _ = self.current(forced, source)
        if not self._interop_done:
            self._interop_done = True
            try:
                torch.set_num_interop_threads(1)
            except RuntimeError:
                pass        # inter-op work already started (torch allows setting it once)
        if getattr(self._local, "n", None) != n:
            torch.set_num_threads(n)
            self._local.n = n
        return n

    def info(self) -> dict:
        """For the manifest: the count in use, where it came from and why."""
        out = {**self.last, "cores": available_cores(),
               "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
               "wait_policy_in_time": _IN_TIME[0] if _IN_TIME else None}
        if "torch" in sys.modules:
            out["interop_threads"] = sys.modules["torch"].get_num_interop_threads()
        if len(self.changes) > 1:
            out["changes"] = list(self.changes)
        return out


_POLICY: ThreadPolicy | None = None
_POLICY_LOCK = threading.Lock()


def policy() -> ThreadPolicy:
    global _POLICY
    with _POLICY_LOCK:
        if _POLICY is None:
            _POLICY = ThreadPolicy()
        return _POLICY
