"""Running points: check them all, then run them in batches, journaling every row.

Used by ``netcosim sweep`` and by the fault study (whose trials are points too), so both get
the same validation, parallelism, progress bar, Ctrl-C handling and ``--resume``.

``points`` is a list or a ``PointSet`` (points made on demand): it is passed over three
times (check, run, table) and never held whole, so a million-point sweep starts checking at
once and holds its ids and the journal's index, not a million scenario tables. Batches are
made as the pool asks for them.
"""
from __future__ import annotations

import json
import time
import warnings
from pathlib import Path

from netcosim.sweep import table
from netcosim.sweep.execute import Backend, open_pool, progress_bar
from topo.errors import InputError

META_NAME = "sweep_meta.json"


class Outcome:
    """What a run of points left: ``rows`` (the table's rows in point order, read from the
    journal when first asked for), ``paths`` written, points ``ran`` now and ``skipped``
    (--resume), whether Ctrl-C ``interrupted`` it, ``wall_s`` and the meta ``info``."""

    def __init__(self, rows, paths, ran, skipped, interrupted=False, wall_s=0.0, info=None):
        self._rows, self.paths, self.ran, self.skipped = rows, paths, ran, skipped
        self.interrupted, self.wall_s, self.info = interrupted, wall_s, info or {}

    @property
    def rows(self) -> list:
        if not isinstance(self._rows, list):
            self._rows = list(self._rows)
        return self._rows

    @rows.setter
    def rows(self, rows) -> None:
        self._rows = rows

    def each_row(self):
        """The rows one at a time, without holding them all: a pass over the journal each
        time, unless ``rows`` was asked for (a fault study of a million trials)."""
        return self._rows


def run_points(points, out_dir, backend: Backend | None = None, resume: bool = False,
               params=(), meta: dict | None = None, desc: str = "sweep") -> Outcome:
    """Check every point not yet done, then run them; write the journal, table and meta.

    Raises InputError before anything runs (and before the output is touched) when a point
    fails its check. Ctrl-C stops the run; the table is still written with the finished rows
    and ``Outcome.interrupted`` is set.
    """
    from netcosim.sweep.worker import run_batch

    backend = backend or Backend()
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {str(out)!r}: exists and is not a directory")
    done = table.settled_points(out / table.JOURNAL) if resume else set()
    t0 = time.perf_counter()
    interrupted = False
    # points whose row is the journal's (--resume); not the repeats of a point listed twice
    # (two blocks may share points), which run once and were never "resumed"
    resumed = sum(p.id in done for p in points) if done else 0
    with open_pool(backend) as pool:
        t_check = time.perf_counter()
        n_todo, infeasible = _check(pool, points, done, backend)
        check_s = time.perf_counter() - t_check
        journal = table.Journal(out, resume=resume)
        try:
            if infeasible:
                journal.add(_infeasible_rows(points, done, infeasible))
            n_run = n_todo - len(infeasible)
            bs = backend.batch_size or pool.batch_size(n_run, per_worker=4, cap=32)
            batches = _batches(((p.index, pid, p.data, p.strandable)
                                for p, pid in _todo(points, done) if p.index not in infeasible),
                               bs)
            bar = progress_bar(n_run, backend.progress, desc)
            if resumed:
                bar.set_postfix_str(f"{resumed} resumed")
            results = pool.map(run_batch, batches)
            try:
                for rows in results:
                    journal.add(rows)
                    bar.update(len(rows))
            except KeyboardInterrupt:
                interrupted = True
            finally:
                _close(results)
                bar.close()
        finally:
            journal.close()
    rows = table.JournalRows(points, out / table.JOURNAL, journal.index)
    paths = table.write_table(out, rows, params)
    tally = rows.tally
    info = {"points": len(points), "finished": sum(tally.values()),
            "errors": tally.get("error", 0), "infeasible": tally.get("infeasible", 0),
            "params": list(params), "interrupted": interrupted,
            "workers": pool.workers, "backend": "dask" if backend.uses_dask else "joblib",
            "check_s": check_s, "wall_s": time.perf_counter() - t0,
            **(meta or {})}
    with open(out / META_NAME, "w", encoding="utf-8") as fh:
        json.dump(info, fh, indent=2, default=str)
        fh.write("\n")
    paths.append(out / META_NAME)
    return Outcome(rows, paths, ran=n_todo, skipped=resumed,
                   interrupted=interrupted, wall_s=time.perf_counter() - t0, info=info)


def _todo(points, done: set):
    """(point, id) of every point to run: not in the journal (--resume), and the first of
    points whose scenarios are the same."""
    seen = set()
    for p in points:
        pid = p.id
        if pid in done or pid in seen:
            continue
        seen.add(pid)
        yield p, pid


def _batches(items, size: int):
    batch = []
    for it in items:
        batch.append(it)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _close(results) -> None:
    """Stop a pool's remaining tasks (a refused check, Ctrl-C) without joblib's warning that
    it cancelled them: the command's one line on stderr stays one line."""
    close = getattr(results, "close", None)
    if close is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            close()


class _Warmer:
    """Compiles/loads each engine's Numba kernels in this process the first time a point uses
    it, before any worker runs a point on it (workers that found a cold cache at once would
    all compile, and could write the cache files concurrently)."""

    def __init__(self):
        self.kinds = set()

    def __call__(self, data: dict) -> None:
        from netcore.api import EngineUnavailable
        from netcosim.runner import warm_engine

        eng = data.get("engine")
        kind = eng.get("kind", "flow") if isinstance(eng, dict) else "flow"
        if kind in self.kinds:
            return
        self.kinds.add(kind)
        try:
            warm_engine(kind)
        except (EngineUnavailable, InputError):
            pass  # the check names the missing engine against the points that use it


def _warm(points) -> None:
    """Warm the engines ``points`` use (netcosim.plan runs layouts through the pool too)."""
    warm = _Warmer()
    for p in points:
        warm(p.data)


def _check(pool, points, done: set, backend) -> tuple[int, dict]:
    """Check every point to run in the pool, batch by batch as the pool asks for them; refuse
    the sweep on the first bad one in point order, as soon as every batch before it has been
    checked. Returns (points to run, {index: message} of points whose training step does not
    fit in memory)."""
    from netcosim.sweep.worker import check_numbered

    warm = _Warmer()
    wheres: dict[int, dict] = {}  # batch -> {index: where} until the batch is checked
    n_todo = 0

    def numbered():
        nonlocal n_todo
        bs = pool.batch_size(len(points), per_worker=2, cap=200)
        for k, batch in enumerate(_batches(_todo(points, done), bs)):
            for p, _ in batch:
                warm(p.data)
            n_todo += len(batch)
            wheres[k] = {p.index: p.where for p, _ in batch}
            yield k, [(p.index, p.data, p.strandable) for p, _ in batch]

    bar = progress_bar(len(points) - len(done), backend.progress and len(points) > 50,
                       "checking")
    errors, infeasible, checked, n_checked = [], {}, set(), 0
    results = pool.map(check_numbered, numbered())
    try:
        for k, n, bad in results:  # arrive in any order
            checked.add(k)
            n_checked += n
            bar.update(n)
            for index, kind, msg in bad:
                if kind == "error":
                    errors.append((k, index, msg, wheres[k][index]))
                else:
                    infeasible[index] = msg
            if not any(e[0] == k for e in errors):
                del wheres[k]
            if errors and all(j in checked for j in range(min(errors)[0])):
                break  # the first failing point is known: no need to check the rest
    finally:
        _close(results)
        bar.close()
    if errors:
        _, _, msg, where = min(errors)
        more = f" ({len(errors)} of {n_checked} points checked fail)" if len(errors) > 1 else ""
        raise InputError(f"{where}: {msg}{more}")
    return n_todo, infeasible


def _infeasible_rows(points, done: set, infeasible: dict) -> list[dict]:
    rows = []
    for p, pid in _todo(points, done):
        if p.index in infeasible:
            rows.append({"point": p.index, "point_id": pid, "status": "infeasible",
                         "error": infeasible[p.index],
                         "scenario": json.dumps(p.data, sort_keys=True, separators=(",", ":"))})
    return rows
