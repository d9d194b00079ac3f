"""Running a list of points: check them all, then run them in batches, journaling every row.

Used by ``netcosim sweep`` and by the fault study (whose trials are points too), so both get
the same validation, parallelism, progress bar, Ctrl-C handling and ``--resume``.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from netcosim.sweep import table
from netcosim.sweep.execute import Backend, open_pool, progress_bar
from topo.errors import InputError

META_NAME = "sweep_meta.json"


@dataclass
class Outcome:
    rows: list  # table rows of the finished points, in point order
    paths: list  # files written
    ran: int  # points run now
    skipped: int  # points found in the journal (--resume)
    interrupted: bool = False
    wall_s: float = 0.0
    info: dict = field(default_factory=dict)


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
    done = table.read_journal(out / table.JOURNAL) if resume else {}
    todo, seen = [], set()
    for p in points:
        if p.id not in done and p.id not in seen:
            seen.add(p.id)
            todo.append(p)
    t0 = time.perf_counter()
    interrupted = False
    with open_pool(backend) as pool:
        _warm(todo)
        t_check = time.perf_counter()
        infeasible = _check(pool, todo, backend)
        check_s = time.perf_counter() - t_check
        journal = table.Journal(out, resume=resume)
        try:
            journal.add(_infeasible_rows(todo, infeasible))
            runnable = [p for p in todo if p.index not in infeasible]
            bs = backend.batch_size or pool.batch_size(len(runnable), per_worker=4, cap=32)
            batches = [[(p.index, p.id, p.data, p.strandable) for p in runnable[i:i + bs]]
                       for i in range(0, len(runnable), bs)]
            bar = progress_bar(len(runnable), backend.progress, desc)
            if done:
                bar.set_postfix_str(f"{len(points) - len(todo)} resumed")
            try:
                for rows in pool.map(run_batch, batches):
                    journal.add(rows)
                    bar.update(len(rows))
            except KeyboardInterrupt:
                interrupted = True
            finally:
                bar.close()
        finally:
            journal.close()
    rows = table.build_rows(points, journal.done)
    paths = table.write_table(out, rows, params)
    info = {"points": len(points), "finished": len(rows),
            "errors": sum(r.get("status") == "error" for r in rows),
            "infeasible": sum(r.get("status") == "infeasible" for r in rows),
            "params": list(params), "interrupted": interrupted,
            "workers": pool.workers, "backend": "dask" if backend.uses_dask else "joblib",
            "check_s": check_s, "wall_s": time.perf_counter() - t0,
            **(meta or {})}
    with open(out / META_NAME, "w", encoding="utf-8") as fh:
        json.dump(info, fh, indent=2, default=str)
        fh.write("\n")
    paths.append(out / META_NAME)
    return Outcome(rows, paths, ran=len(todo), skipped=len(points) - len(todo),
                   interrupted=interrupted, wall_s=time.perf_counter() - t0, info=info)


def _warm(points) -> None:
    """Compile/load each engine's Numba kernels here before any worker starts on them."""
    from netcore.api import EngineUnavailable
    from netcosim.runner import warm_engine

    kinds = sorted({(p.data.get("engine") or {}).get("kind", "flow") for p in points})
    for kind in kinds:
        try:
            warm_engine(kind)
        except (EngineUnavailable, InputError):
            pass  # the check names the missing engine against the points that use it


def _check(pool, todo, backend) -> dict:
    """Check every point in the pool; refuse the sweep on the first bad one (by point
    order). Returns {index: message} of points whose training step does not fit in memory."""
    from netcosim.sweep.worker import check_batch

    if not todo:
        return {}
    bs = pool.batch_size(len(todo), per_worker=2, cap=200)
    items = [(p.index, p.data, p.strandable) for p in todo]
    batches = [items[i:i + bs] for i in range(0, len(items), bs)]
    bad = []
    bar = progress_bar(len(todo), backend.progress and len(todo) > 50, "checking")
    try:
        for n_checked, res in pool.map(check_batch, batches):  # arrive in any order
            bad.extend(res)
            bar.update(n_checked)
    finally:
        bar.close()
    errors = sorted((i, msg) for i, kind, msg in bad if kind == "error")
    if errors:
        by_index = {p.index: p for p in todo}
        i, msg = errors[0]
        more = f" ({len(errors)} of {len(todo)} points fail)" if len(errors) > 1 else ""
        raise InputError(f"{by_index[i].where}: {msg}{more}")
    return {i: msg for i, kind, msg in bad if kind == "infeasible"}


def _infeasible_rows(todo, infeasible: dict) -> list[dict]:
    rows = []
    for p in todo:
        if p.index in infeasible:
            rows.append({"point": p.index, "point_id": p.id, "status": "infeasible",
                         "error": infeasible[p.index],
                         "scenario": json.dumps(p.data, sort_keys=True, separators=(",", ":"))})
    return rows
