"""What a worker process does with a batch of points: check them, or run them into rows.

Batches amortise the per-task cost (pickling, scheduling, and on a fresh worker the imports
and the Numba cache load); the functions are plain module-level functions so joblib's loky
workers and Dask workers import and call them the same way.
"""
from __future__ import annotations

import json
import time

from topo.errors import InputError

# Summary keys that are not results: "scenario" is the name (the scenario column holds the
# full table), the others describe the run rather than measure it.
_SKIP = {"scenario"}
_checker = None  # one per worker process: parts shared between batches stay built


def check_batch(items: list) -> tuple[int, list]:
    """``items``: [(index, data, strandable)]. Returns (len(items), [(index, kind, message)]) for the bad
    ones, kind
    "error" (refuse the sweep) or "infeasible" (a training configuration that does not fit in
    memory: recorded as such, never run)."""
    from netcosim.sweep.points import Checker

    global _checker
    if _checker is None:
        _checker = Checker()
    bad = []
    for index, data, strandable in items:
        try:
            _checker.check(data, reachable=not strandable)
        except InputError as e:
            kind = "infeasible" if type(e).__name__ == "MemoryInfeasible" else "error"
            bad.append((index, kind, str(e)))
    return len(items), bad


def check_numbered(numbered: tuple) -> tuple[int, int, list]:
    """``check_batch`` of batch ``k`` = ``numbered[0]``: (k, n, bad), so the parent knows
    which batches are done (results arrive in any order)."""
    k, items = numbered
    return (k, *check_batch(items))


def run_batch(items: list) -> list[dict]:
    """``items``: [(index, point_id, data, strandable)]. One row per point: ``status`` "ok" with the
    summary's figures, or "error" with the message (the sweep goes on)."""
    return [run_one(i, pid, data, strandable) for i, pid, data, strandable in items]


def run_one(index: int, pid: str, data: dict, strandable: bool = False) -> dict:
    from netcosim.runner import simulate_scenario
    from netcosim.scenario import Scenario

    t0 = time.perf_counter()
    c0 = time.thread_time()
    row = {"point": index, "point_id": pid, "status": "ok", "error": ""}
    ran = data
    try:
        from netcosim import plan

        if plan.is_best(data):  # [workload] parallel = "best": the layout search runs here
            ran, summary = plan.resolve_best(data)
        else:
            sc = Scenario.from_dict(data, default_name="sweep")
            _, _, summary = simulate_scenario(sc, check_reachability=not strandable)
        for k, v in summary.items():
            if k in _SKIP or isinstance(v, (dict, list)):
                continue
            row[k] = v
        if isinstance(summary.get("exposed_comm_s"), dict):
            # a training step's exposed communication by kind, as a layout search's rows have
            # it (exposed_<kind>_s), so fixed and searched layouts share the columns
            for k, v in plan.exposed(summary).items():
                row.setdefault(f"exposed_{k}_s", v)
        if isinstance(summary.get("memory"), dict):  # memory per GPU: memory_total_GB, ...
            for k, v in summary["memory"].items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    row.setdefault(f"memory_{k}", v)
    except Exception as e:  # noqa: BLE001 - a run-time failure belongs in its row
        row["status"] = "infeasible" if type(e).__name__ == "MemoryInfeasible" else "error"
        row["error"] = _one_line(f"{e}" if isinstance(e, InputError)
                                 else f"{type(e).__name__}: {e}")
    row["run_s"] = time.perf_counter() - t0
    # CPU of the thread that ran the point: what the point cost, without the load of other
    # processes or of a Dask worker's own threads (the backend comparison in bench_sweep.py)
    row["cpu_s"] = time.thread_time() - c0
    # the scenario that ran (a layout search's best layout filled in): any row runs alone
    row["scenario"] = json.dumps(ran, sort_keys=True, separators=(",", ":"))
    return row


def _one_line(msg: str) -> str:
    return " ".join(part.strip() for part in str(msg).splitlines() if part.strip())
