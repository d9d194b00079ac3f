"""Where batches of points run: local processes (joblib/loky) or a Dask cluster, one code path.

Both go through ``joblib.Parallel``: Dask is joblib's "dask" backend inside a
``parallel_config``, so checking, running, progress and Ctrl-C behave the same whichever is
used. ``jobs=1`` runs in this process (joblib's sequential backend), which tests use.
"""
from __future__ import annotations

import math
import os
import sys
import warnings
from contextlib import contextmanager
from dataclasses import dataclass

from topo.errors import InputError


class WorkerLost(RuntimeError):
    """A worker process died under a point (the kernel's out-of-memory killer, most often).
    The CLI reports it in one line with exit 1: the input was valid, the run failed."""


# Settings of the workers of a local Dask cluster (--dask-local).
# * Dask's nanny starts workers with MALLOC_TRIM_THRESHOLD_=65536 (to hand freed memory back
#   to the OS quickly). Setting it also turns off glibc's adaptive mmap threshold, so every
#   numpy buffer above 64 KiB is mapped and unmapped afresh: the same points took 20-30% more
#   CPU (thread CPU time of 40 points, 4 rounds each: 3.2-4.0 s without, 4.0-5.1 s with; in
#   a worker thread or the main thread alike). Sweep workers run short points and keep
#   little memory, so glibc's default is right for them.
# * The workers' own housekeeping competes with the points for the GIL and, on a small
#   machine, for the cores: the statistical profiler samples every thread's stack every
#   10 ms by default and the system and memory monitors poll several times a second. A
#   sweep needs none of them.
def _sweep_worker_config() -> dict:
    import dask

    environ = dict(dask.config.get("distributed.nanny.pre-spawn-environ", {}) or {})
    environ.pop("MALLOC_TRIM_THRESHOLD_", None)
    return {
        "distributed.nanny.pre-spawn-environ": environ,
        "distributed.worker.profile.enabled": False,
        "distributed.admin.system-monitor.interval": "10s",
        "distributed.admin.system-monitor.gil.enabled": False,
        "distributed.worker.memory.monitor-interval": "2s",
        "distributed.admin.tick.interval": "1s",
    }


@dataclass
class Backend:
    jobs: int | None = None  # local worker processes; None = one per core
    scheduler: str | None = None  # tcp://host:port of a running Dask scheduler
    dask_local: int | None = None  # start a local Dask cluster of this many workers
    batch_size: int | None = None  # points per task; None = chosen from the sweep size
    progress: bool = True

    def __post_init__(self):
        if self.scheduler is not None and self.dask_local is not None:
            raise InputError("--scheduler and --dask-local: give one of them, not both")
        for name in ("jobs", "dask_local", "batch_size"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                raise InputError(f"--{name.replace('_', '-')} = {v!r}: expected an integer >= 1")
        if self.scheduler is not None and not isinstance(self.scheduler, str):
            raise InputError(f"--scheduler = {self.scheduler!r}: expected an address such as "
                             f"tcp://host:8786")

    @property
    def uses_dask(self) -> bool:
        return self.scheduler is not None or self.dask_local is not None


class Pool:
    """An open backend: ``map(fn, batches)`` yields results as batches finish."""

    def __init__(self, workers: int, joblib_backend: str, n_jobs: int):
        self.workers = workers
        self._backend = joblib_backend
        self._n_jobs = n_jobs

    def map(self, fn, batches):
        """``batches`` may be a generator: it is consumed as workers free up (joblib's
        pre-dispatch), so a million points are never all batched at once."""
        from joblib import Parallel, delayed

        results = Parallel(n_jobs=self._n_jobs, backend=self._backend,
                           return_as="generator_unordered")(delayed(fn)(b) for b in batches)
        return self._reporting_lost_workers(results)

    def _reporting_lost_workers(self, results):
        from concurrent.futures import BrokenExecutor

        try:
            yield from results
        except BrokenExecutor as e:
            raise WorkerLost(
                f"a worker process was killed while it ran ({type(e).__name__}); most often "
                f"the system ran out of memory with {self.workers} points in memory at once: "
                f"run again with fewer workers (--jobs 1 holds one point at a time), and "
                f"--resume to keep the points already finished") from None

    def batch_size(self, n_items: int, per_worker: int, cap: int) -> int:
        """Enough batches to keep every worker busy (``per_worker`` each) and the progress bar
        moving, few enough that per-task overhead stays small."""
        return max(1, min(cap, math.ceil(n_items / (self.workers * per_worker))))


@contextmanager
def open_pool(backend: Backend):
    if not backend.uses_dask:
        n = backend.jobs or os.cpu_count() or 1
        if n == 1:
            yield Pool(n, "sequential", n)
            return
        # the memory guard of every local worker plans on its share of the machine
        # (netcosim.memory_guard.WORKERS_ENV); workers inherit it when they start
        from netcosim.memory_guard import WORKERS_ENV

        # loky restarts a worker whose memory grew by more than a few hundred MB over a task
        # (its leak check) and warns on the console each time; a training point of a large
        # cluster grows that much legitimately and the restart loses nothing (a worker that
        # dies under a point is reported by Pool._reporting_lost_workers): noise
        warnings.filterwarnings("ignore", message="A worker stopped while some jobs",
                                category=UserWarning)
        before = os.environ.get(WORKERS_ENV)
        os.environ[WORKERS_ENV] = str(n)
        try:
            yield Pool(n, "loky", n)
        finally:
            if before is None:
                os.environ.pop(WORKERS_ENV, None)
            else:
                os.environ[WORKERS_ENV] = before
        return
    try:
        import joblib
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise InputError("--scheduler/--dask-local need Dask: pip install "
                         "'dask[distributed]'") from None
    cluster = None
    try:
        if backend.dask_local is not None:
            import dask

            with dask.config.set(_sweep_worker_config()):
                cluster = LocalCluster(n_workers=backend.dask_local, threads_per_worker=1,
                                       processes=True, dashboard_address=None)
            client = Client(cluster)
        else:
            try:
                client = Client(backend.scheduler, timeout="20s")
            except (OSError, TimeoutError, ValueError) as e:
                raise InputError(f"--scheduler {backend.scheduler!r}: cannot connect ({e})") \
                    from None
        with client:
            info = client.scheduler_info()
            workers = sum(w.get("nthreads", 1) for w in info.get("workers", {}).values()) or 1
            with joblib.parallel_config(backend="dask"):
                yield Pool(workers, None, -1)
    finally:
        if cluster is not None:
            cluster.close()


def progress_bar(total: int, enabled: bool, desc: str):
    """Points done, rate and time left on stderr (tqdm)."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="pt", file=sys.stderr, disable=not enabled,
                dynamic_ncols=True, smoothing=0.1)
