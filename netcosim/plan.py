"""The layout search of ``netcosim plan`` and of sweeps with ``[workload] parallel = "best"``.

``plan_spec(scenario)`` reads what is fixed and what is searched; ``search(spec, ...)``
enumerates the layouts, drops those that do not divide the model or do not fit
(compute.layouts), ranks the rest by the cheap estimate, simulates the most promising ones on
the scenario's engine (netcosim.runner.simulate_scenario, in parallel through the sweep
backends) and ranks those by the objective. ``resolve_best(data)`` does it for one sweep
point. docs/plan.md is the user guide.
"""
from __future__ import annotations

import copy
import json
import math
import re
import time
from dataclasses import dataclass, field

from compute import layouts
from netcosim.sweep.table import _cell
from compute.parallel import ParallelConfig
from topo.errors import InputError, OverBudget

OPTION_KEYS = ("top", "objective")
DEFAULT_TOP = 8
KINDS = ("tp", "cp", "ep", "pp", "dp", "dp_ag")
_PAR_FIELDS = tuple(ParallelConfig.__dataclass_fields__)


@dataclass
class PlanSpec:
    data: dict  # the scenario table
    where: str  # where fixed values live: workload.parallel or workload.plan
    base: dict  # non-searched ParallelConfig fields (global_batch, precision, ...)
    fixed: dict  # searched dimensions given a value
    top: int = DEFAULT_TOP
    objective: str = "step_time"


@dataclass
class Row:
    cand: layouts.Candidate
    est_rank: int
    simulated: bool = False
    status: str = ""
    summary: dict = field(default_factory=dict)
    error: str = ""
    run_s: float = 0.0
    rank: int | None = None

    @property
    def step(self):
        return self.summary.get("step_time_s") if self.status == "ok" else None


@dataclass
class PlanResult:
    spec: PlanSpec
    enum: layouts.Enumeration
    rows: list  # simulated rows ranked first, then the rest by estimate
    best: Row | None
    n_gpus: int
    gpu_name: str
    wall_s: float = 0.0
    timings: dict = field(default_factory=dict)

    @property
    def simulated(self) -> list:
        return [r for r in self.rows if r.simulated]

    def best_data(self) -> dict:
        return layout_data(self.spec, self.best.cand)


# =========================================================================== reading the spec
def _check_top(v, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise InputError(f"{where} = {v!r}: expected an integer >= 1")
    return v


def check_objective(v, where: str) -> str:
    if not isinstance(v, str) or v not in layouts.OBJECTIVES:
        raise InputError(f"{where} = {v!r}: expected one of {', '.join(layouts.OBJECTIVES)}")
    return v


def is_best(data: dict) -> bool:
    wl = data.get("workload") if isinstance(data, dict) else None
    return isinstance(wl, dict) and wl.get("parallel") == "best"


def plan_spec(scenario, top=None, objective=None) -> PlanSpec:
    """What the search may choose and what is fixed, from a training scenario: with a
    ``[workload.parallel]`` table every searched dimension it names is fixed; with ``parallel
    = "best"`` the ``[workload.plan]`` table holds them. ``[workload.plan]`` also holds
    ``top`` and ``objective`` (the command line wins)."""
    wl = scenario.workload
    if not isinstance(wl, dict):
        raise InputError("workload: missing; netcosim plan needs a [workload] table with "
                         "kind = \"training\"")
    if wl.get("kind") != "training":
        raise InputError(f"workload.kind = {wl.get('kind')!r}: netcosim plan needs kind = "
                         f"\"training\"")
    from netcosim.workload_kinds.training import check_options

    check_options(wl)
    plan = wl.get("plan", {})
    if not isinstance(plan, dict):
        raise InputError(f"workload.plan = {plan!r}: expected a table")
    par = wl.get("parallel", {})
    if par == "best":
        where, table = "workload.plan", {k: v for k, v in plan.items() if k not in OPTION_KEYS}
    elif isinstance(par, dict):
        where, table = "workload.parallel", dict(par)
        extra = [k for k in plan if k not in OPTION_KEYS]
        if extra:
            raise InputError(f"workload.plan.{extra[0]}: fixed values go in [workload.parallel] "
                             f"(or set parallel = \"best\"); [workload.plan] takes "
                             f"{', '.join(OPTION_KEYS)} here")
    else:
        raise InputError(f"workload.parallel = {par!r}: expected a table or \"best\"")
    for k in table:
        if k not in _PAR_FIELDS:
            raise InputError(f"{where}.{k}: unknown field (known: {', '.join(sorted(_PAR_FIELDS))})")
    if "stage_layers" in table:
        raise InputError(f"{where}.stage_layers: the plan chooses the pipeline split; remove "
                         f"it (or fix pp and vp and run the scenario with netcosim run)")
    if "global_batch" not in table:
        raise InputError(f"{where}.global_batch: missing (the plan needs the global batch)")
    fixed_keys = set(layouts.SEARCHED) | {"dp"}
    base = {k: v for k, v in table.items() if k not in fixed_keys}
    fixed = {k: v for k, v in table.items() if k in fixed_keys}
    opt_top = top if top is not None else plan.get("top", DEFAULT_TOP)
    opt_obj = objective if objective is not None else plan.get("objective", "step_time")
    top_where = "--top" if top is not None else "workload.plan.top"
    obj_where = "--objective" if objective is not None else "workload.plan.objective"
    return PlanSpec(scenario.data, where, base, fixed, _check_top(opt_top, top_where),
                    check_objective(opt_obj, obj_where))


def layout_data(spec: PlanSpec, cand: layouts.Candidate) -> dict:
    """The scenario table with ``cand``'s layout as its ``[workload.parallel]``."""
    data = copy.deepcopy(spec.data)
    wl = data["workload"]
    wl.pop("plan", None)
    wl["parallel"] = {**spec.base, **cand.layout.as_dict()}
    return data


# =========================================================================== the search
def candidates(spec: PlanSpec, topology, routing, prune: int | None = None,
               estimate: bool = True):
    """(Enumeration with estimates, Estimator) for the spec on a built fabric.

    ``prune = n``: estimate only what choosing the n layouts to simulate needs
    (``layouts.estimate_top``: the same choice, much of the routing skipped); the other
    candidates keep ``estimate = None``. Sweeps use it; ``netcosim plan`` estimates every
    layout for its plan.csv. ``estimate = False``: none is estimated."""
    from netcosim.workload_kinds.training import MemoryInfeasible

    wl = spec.data["workload"]
    for k in ("model", "gpu"):
        if k not in wl:
            raise InputError(f"workload.{k}: missing field")
    n_gpus = topology.n_hosts
    try:
        enum = layouts.enumerate_layouts(wl["model"], wl["gpu"], n_gpus, spec.base, spec.fixed)
    except InputError as e:
        msg = str(e)
        if msg.startswith("parallel."):
            msg = f"{spec.where}{msg[len('parallel'):]}"
        elif msg.startswith("parallel:"):
            msg = f"{spec.where}:{msg[len('parallel:'):]}"
        elif not msg.startswith("workload"):
            msg = f"workload.{msg}"
        raise InputError(msg) from None
    if not enum.candidates:
        mem, lay = enum.smallest
        from compute.hardware import get_gpu

        raise MemoryInfeasible(
            f"workload: no feasible layout of {n_gpus:,} GPUs: {enum.total:,} looked at "
            f"({enum.reasons_text()}); the smallest candidate ({lay.label()}) needs "
            f"{mem / 1e9:.1f} GB per GPU, the {get_gpu(wl['gpu']).name} has "
            f"{enum.capacity_bytes / 1e9:.1f} GB", {"total_GB": round(mem / 1e9, 3),
                                                    "capacity_GB": enum.capacity_bytes / 1e9})
    est = layouts.Estimator(wl["model"], wl["gpu"], topology, routing)
    if not estimate:
        return enum, est
    if prune is not None:
        layouts.estimate_top(enum.candidates, est, prune, spec.objective)
        return enum, est
    for c in enum.candidates:
        c.estimate = est.estimate(c.par)
    return enum, est


def search(spec: PlanSpec, scenario, backend=None, progress: bool = False,
           desc: str = "plan", prune: bool = False) -> PlanResult:
    """Enumerate, estimate, simulate the chosen layouts (``backend``: a sweep Backend; None
    runs them here), rank. ``prune``: estimate only what the choice needs (``candidates``);
    the result's rows then hold the estimated layouts only (est_rank among them)."""
    t0 = time.perf_counter()
    topology = scenario.build_topology()
    routing = scenario.build_routing(topology)
    t1 = time.perf_counter()
    enum, est = candidates(spec, topology, routing, spec.top if prune else None)
    t2 = time.perf_counter()
    key = layouts.objective_key(spec.objective)
    estimated = [c for c in enum.candidates if c.estimate is not None]
    order = sorted(estimated, key=lambda c: key(c.estimate.step_time_s, c.estimate.mfu,
                                                c.estimate.tokens_per_s))
    rows = [Row(c, i + 1) for i, c in enumerate(order)]
    by_id = {id(r.cand): r for r in rows}
    chosen = [by_id[id(c)] for c in layouts.choose(estimated, spec.top, spec.objective)]
    items = [(i, layout_data(spec, r.cand)) for i, r in enumerate(chosen)]
    results = run_layouts(items, backend, progress, desc)
    for (i, _), res in zip(items, results):
        r = chosen[i]
        r.simulated = True
        r.status, r.summary, r.error, r.run_s = (res["status"], res.get("summary", {}),
                                                 res.get("error", ""), res["run_s"])
    t3 = time.perf_counter()
    ok = [r for r in chosen if r.status == "ok"]
    ok.sort(key=lambda r: key(r.summary["step_time_s"], r.summary["mfu"],
                              r.summary["tokens_per_s"]))
    for i, r in enumerate(ok):
        r.rank = i + 1
    failed = [r for r in chosen if r.status != "ok"]
    rest = [r for r in rows if not r.simulated]
    wl = spec.data["workload"]
    from compute.hardware import get_gpu

    return PlanResult(spec, enum, ok + failed + rest, ok[0] if ok else None, topology.n_hosts,
                      get_gpu(wl["gpu"]).name, time.perf_counter() - t0,
                      {"fabric_s": t1 - t0, "enumerate_estimate_s": t2 - t1,
                       "simulate_s": t3 - t2})


def run_layouts(items: list, backend=None, progress: bool = False, desc: str = "plan") -> list:
    """Simulate [(index, scenario table)] -> results in the same order; through the sweep
    machinery's pool (joblib/loky or Dask) when ``backend`` is given."""
    from netcosim.sweep.execute import open_pool, progress_bar

    if backend is None:
        return [simulate_one(i, d) for i, d in items]
    from netcosim.sweep.run import _warm
    from netcosim.sweep.points import Point

    out = {}
    with open_pool(backend) as pool:
        if pool.workers > 1 or backend.uses_dask:
            _warm([Point(i, {}, d, "") for i, d in items])
        bar = progress_bar(len(items), progress, desc)
        try:
            for res in pool.map(simulate_batch, [[it] for it in items]):
                for r in res:
                    out[r["index"]] = r
                bar.update(len(res))
        finally:
            bar.close()
    return [out[i] for i, _ in items]


def simulate_batch(items: list) -> list:
    return [simulate_one(i, d) for i, d in items]


def simulate_one(index: int, data: dict) -> dict:
    """One layout run by the scenario's engine: its summary (as ``netcosim run`` writes it),
    or the error."""
    from netcosim.runner import simulate_scenario
    from netcosim.scenario import Scenario

    t0 = time.perf_counter()
    try:
        sc = Scenario.from_dict(data, default_name="plan")
        _, _, summary = simulate_scenario(sc)
        out = {"index": index, "status": "ok", "summary": summary}
    except Exception as e:  # noqa: BLE001 - a run-time failure belongs in its row
        # a memory guard's refusal is not a verdict on the layout: it depends on the memory
        # left beside whatever else runs (resolve_best)
        status = ("infeasible" if type(e).__name__ == "MemoryInfeasible" else
                  "over_budget" if isinstance(e, OverBudget) else "error")
        msg = f"{e}" if isinstance(e, InputError) else f"{type(e).__name__}: {e}"
        out = {"index": index, "status": status, "error": " ".join(msg.split())}
    out["run_s"] = time.perf_counter() - t0
    return out


# =========================================================================== sweeps
def checkable(data: dict) -> dict:
    """A sweep point with ``parallel = "best"`` as the scenario ``Checker`` can build (the
    search itself runs with the point): a feasible layout, cut down to one micro-batch per
    pipeline without interleaving so that the step it builds stays small. The check is about
    the fabric and the workload's settings (algorithms, in-network reduction, faults), which
    every layout shares; a full step of a mixture-of-experts layout on 1,024 GPUs can take
    more than 6 GB to build. The layout is the one of the least estimate without network terms
    (``Estimator.lower_bound``: no routing, so checking a 32,768-GPU point stays cheap) among
    those without tensor parallelism on the network when there are any (per-layer network
    collectives are what that bound leaves out)."""
    from netcosim.scenario import Scenario

    sc = Scenario.from_dict(data, default_name="sweep")
    spec = plan_spec(sc)
    topology = sc.build_topology()
    enum, est = candidates(spec, topology, sc.build_routing(topology), estimate=False)
    pool = [c for c in enum.candidates if c.layout.tp == 1 or est.tp_local(c.par)]
    best = min(pool or enum.candidates, key=lambda c: est.lower_bound(c.par))
    out = layout_data(spec, best)
    par = out["workload"]["parallel"]
    par["vp"] = 1
    par["global_batch"] = par["micro_batch"] * par["dp"]
    return out


def resolve_best(data: dict) -> tuple[dict, dict]:
    """Run the search for one sweep point (in this process): (the best layout's scenario
    table, the row's figures: its summary plus the layout and the search's counts)."""
    from netcosim.scenario import Scenario

    sc = Scenario.from_dict(data, default_name="sweep")
    res = search(plan_spec(sc), sc, backend=None, prune=True)
    if res.best is None:
        first = res.simulated[0] if res.simulated else None
        raise InputError("workload: every simulated layout failed"
                         + (f" (first: {first.error})" if first else ""))
    refused = [r for r in res.rows if r.status == "over_budget"]
    if refused:
        # the best of the rest would be this point's answer only while memory is short: two
        # workers of the co-design study reported another layout for a SHARP point than one
        # worker did (-1.7 % MFU), as an ordinary row
        r = refused[0]
        raise OverBudget(f"workload: the layout search could not simulate "
                         f"{r.cand.layout.label()} (estimated rank {r.est_rank}): {r.error}; "
                         f"its best layout is unknown until it runs (with fewer sweep workers: "
                         f"--resume --jobs 1)")
    row = dict(res.best.summary)
    row.update({f"exposed_{k}_s": v for k, v in exposed(res.best.summary).items()})
    row.update(layout_columns(res.best))
    row["plan_feasible"] = len(res.enum.candidates)
    row["plan_simulated"] = len(res.simulated)
    return res.best_data(), row


def layout_columns(r: Row) -> dict:
    out = {"layout": r.cand.layout.label()}
    out.update(r.cand.layout.as_dict())
    return out


# =========================================================================== outputs
def exposed(summary: dict) -> dict:
    e = summary.get("exposed_comm_s") or {}
    return {k: float(e.get(k, 0.0)) for k in KINDS}


def table_rows(res: PlanResult) -> list[dict]:
    """plan.csv: every simulated layout ranked, then the others by estimate."""
    out = []
    for r in res.rows:
        c, e = r.cand, r.cand.estimate
        row = {"rank": r.rank if r.rank is not None else "", "est_rank": r.est_rank,
               "layout": c.layout.label(), "reference": c.reference}
        row.update(c.layout.as_dict())
        row["memory_GB"] = round(c.memory_bytes / 1e9, 3)
        row["est_step_time_s"] = e.step_time_s
        row["est_mfu"] = e.mfu
        row["est_tokens_per_s"] = e.tokens_per_s
        for k in KINDS:
            row[f"est_exposed_{k}_s"] = e.exposed.get(k, 0.0)
        row["est_bubble_s"] = e.bubble_s
        row["simulated"] = r.simulated
        row["status"] = r.status
        s = r.summary if r.status == "ok" else {}
        for k in ("step_time_s", "mfu", "tokens_per_s"):
            row[k] = s.get(k, "")
        ex = exposed(s) if s else {}
        for k in KINDS:
            row[f"exposed_{k}_s"] = ex.get(k, "")
        row["exposed_total_s"] = s.get("exposed_comm_total_s", "")
        row["idle_s"] = s.get("idle_s_per_gpu", "")
        row["error"] = r.error
        row["run_s"] = r.run_s if r.simulated else ""
        out.append(row)
    return out


def write_csv(path, rows: list[dict]) -> None:
    import csv

    cols = list(rows[0]) if rows else ["rank"]
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(cols)
        for r in rows:
            w.writerow([_cell(r.get(c)) for c in cols])  # the sweep table's cell text


def format_table(res: PlanResult, limit: int | None = None) -> str:
    sim = res.simulated
    kinds = [k for k in KINDS if any(exposed(r.summary).get(k, 0) > 0 for r in sim
                                     if r.status == "ok")]
    head = (f"{'rank':>4}  {'layout':<44} {'est s':>7} {'step s':>8} {'MFU':>6} {'mem GB':>7}"
            + "".join(f" {k + ' s':>8}" for k in kinds))
    lines = [head]
    for r in sim[:limit] if limit else sim:
        name = r.cand.layout.label() + (f" [{r.cand.reference}]" if r.cand.reference else "")
        if r.status == "ok":
            s = r.summary
            ex = exposed(s)
            lines.append(f"{r.rank:>4}  {name:<44} {r.cand.estimate.step_time_s:>7.3f} "
                         f"{s['step_time_s']:>8.3f} {100 * s['mfu']:>5.1f}% "
                         f"{r.cand.memory_bytes / 1e9:>7.1f}"
                         + "".join(f" {ex[k]:>8.3f}" for k in kinds))
        else:
            lines.append(f"{'-':>4}  {name:<44} {r.cand.estimate.step_time_s:>7.3f} "
                         f"{r.status}: {r.error[:60]}")
    return "\n".join(lines)


def reference_lines(res: PlanResult) -> list[str]:
    out = []
    names = sorted({name for name, _ in layouts.REFERENCES.get(
        str(_model_name(res.spec)).lower(), [])})
    for name in names:
        rows = [r for r in res.rows if r.cand.reference == name]
        if not rows:
            d = dict(layouts.REFERENCES[str(_model_name(res.spec)).lower()])[name]
            why = layouts.reference_reason(res.spec.data["workload"]["model"], res.n_gpus,
                                           res.spec.base, res.spec.fixed, d)
            out.append(f"reference {name}: not a feasible layout here ({why})")
            continue
        r = rows[0]
        n = len(res.enum.candidates)
        if r.rank is not None:
            gap = ""
            if res.best is not None and res.best is not r:
                gap = (f"; the best is {100 * (1 - res.best.step / r.step):.1f}% faster "
                       f"({res.best.step:.3f} s vs {r.step:.3f} s)")
            out.append(f"reference {name} ({r.cand.layout.label()}): rank {r.rank} of "
                       f"{len(res.simulated)} simulated, estimate rank {r.est_rank:,} of {n:,}"
                       f"{gap}")
        else:
            out.append(f"reference {name} ({r.cand.layout.label()}): {r.status or 'not simulated'}"
                       f", estimate rank {r.est_rank:,} of {n:,}")
    return out


def _model_name(spec: PlanSpec):
    from compute.model import get_model

    return get_model(spec.data["workload"]["model"]).name


# =========================================================================== best.toml
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(k) -> str:
    k = str(k)
    return k if _BARE_KEY.match(k) else json.dumps(k)


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def to_toml(data: dict, header: str = "") -> str:
    """A scenario table as TOML text (tomllib reads it back equal)."""
    lines = [f"# {line}" for line in header.splitlines()] if header else []

    def table(d: dict, path: list):
        subs, arrays = [], []
        body = []
        for k, v in d.items():
            if isinstance(v, dict):
                subs.append((k, v))
            elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
                arrays.append((k, v))
            else:
                body.append(f"{_key(k)} = {_value(v)}")
        if path and (body or not (subs or arrays)):
            lines.append("")
            lines.append("[" + ".".join(_key(p) for p in path) + "]")
        lines.extend(body)
        for k, v in subs:
            table(v, path + [k])
        for k, v in arrays:
            for item in v:
                lines.append("")
                lines.append("[[" + ".".join(_key(p) for p in path + [k]) + "]]")
                for kk, vv in item.items():
                    lines.append(f"{_key(kk)} = {_value(vv)}")

    table(data, [])
    return "\n".join(lines).lstrip("\n") + "\n"
