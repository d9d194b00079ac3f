"""Link-failure sensitivity: how much slower does the workload run when links fail?

Two studies on one scenario, run as sweep points (same checks, parallelism, progress, resume):
- *random*: for each failure fraction, ``trials`` seeded random fault sets
  (``topo.faults.random_failures``: that fraction of the chosen layer's links, down or
  degraded, in both directions, at time 0 or mid-run); per fraction the slowdown distribution.
- *single*: every single link of the layer failed alone (or a seeded sample of them when there
  are more than ``max_single``), ranked by the slowdown it causes: the costliest links.

GPU faults (``--kind gpu_slow:F``, ``--kind hbm_degrade:F``; training workloads only): the same
two studies over the GPUs of the step instead of links: random sets of that fraction of the
GPUs slowed (their Tensor Core throughput, or their HBM bandwidth, at F), and every single GPU
slowed alone (a sample on large jobs), ranked in ``costliest_gpus.csv``. The faults go into
``[[workload.gpu_faults]]`` (docs/compute.md).

Slowdown = makespan with the faults / makespan of the fault-free run. A run in which some
transfer never finishes (its hosts cut apart) is *stranded*: counted per fraction, and kept out
of the slowdown percentiles, whose makespan would only cover the transfers that finished.
"""
from __future__ import annotations

import copy
import csv
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from topo.errors import InputError
from topo.faults import MIN_DEGRADE_FACTOR

FAULT_KINDS = ("down", "degrade")
GPU_KINDS = {"gpu_slow": "slow", "hbm_degrade": "hbm_degrade"}  # --kind -> gpu_faults kind
SUMMARY_NAME = "fault_summary.csv"
COSTLIEST_NAME = "costliest_links.csv"
COSTLIEST_GPUS_NAME = "costliest_gpus.csv"
TP_MODES_NAME = "baseline_tp_modes.json"
BASELINE_NAME = "baseline.json"
CASES_NAME = "study_summary.csv"
# the files a study writes beside its sweep table (checked before it runs)
OUTPUT_NAMES = (SUMMARY_NAME, COSTLIEST_NAME, COSTLIEST_GPUS_NAME, TP_MODES_NAME, BASELINE_NAME,
                CASES_NAME)
_SINGLE_STREAM = 2**31 - 1  # seed stream of the single-link sample, apart from the fractions
PARAMS = ("study", "fraction", "trial", "failed_links", "link", "u", "v", "layer")
GPU_PARAMS = ("study", "fraction", "trial", "failed_gpus", "gpu")


@dataclass
class FaultKind:
    kind: str
    factor: float = 0.25

    @property
    def gpu(self) -> bool:
        """A GPU fault (gpu_slow, hbm_degrade) rather than a link fault."""
        return self.kind in GPU_KINDS

    @classmethod
    def parse(cls, text: str, field: str = "--kind") -> "FaultKind":
        """``down``, ``degrade:F`` (F the remaining fraction of bandwidth, default 0.25),
        ``gpu_slow:F`` (a GPU at F of its FLOP/s) or ``hbm_degrade:F`` (a GPU at F of its
        HBM bandwidth; both default 0.5). ``field`` names it in errors (a study file's
        ``faults_study.kind =``)."""
        what = "down, degrade:FACTOR, gpu_slow:FACTOR or hbm_degrade:FACTOR"
        if not isinstance(text, str):
            raise InputError(f"{field} {text!r}: expected {what}")
        kind, _, f = text.partition(":")
        if kind == "down" and not f:
            return cls("down", 0.0)
        if kind in GPU_KINDS:
            if not f:
                return cls(kind, 0.5)
            try:
                factor = float(f)
            except ValueError:
                raise InputError(f"{field} {text!r}: {f!r} is not a number") from None
            if not 0 < factor < 1:
                raise InputError(f"{field} {text!r}: the remaining fraction must be in (0, 1)")
            return cls(kind, factor)
        if kind == "degrade":
            if not f:
                return cls("degrade", 0.25)
            try:
                factor = float(f)
            except ValueError:
                raise InputError(f"{field} {text!r}: {f!r} is not a number") from None
            if not 0 < factor < 1:
                raise InputError(f"{field} {text!r}: the remaining bandwidth fraction must be "
                                 f"in (0, 1)")
            if factor < MIN_DEGRADE_FACTOR:  # refused by every trial's faults otherwise
                raise InputError(f"{field} {text!r}: a degrade below {MIN_DEGRADE_FACTOR:g} of "
                                 f"the bandwidth carries next to nothing; use down")
            return cls("degrade", factor)
        raise InputError(f"{field} {text!r}: expected {what} (e.g. degrade:0.25, gpu_slow:0.5)")


def parse_fractions(text, field: str = "--fraction") -> list[float]:
    """``0.01``, ``0.001,0.01,0.05``, ``0.001..0.05`` (6 values evenly spaced in log scale,
    both ends included), ``0.001..0.05 n8`` (8 values) or ``0.01..0.05 +0.01`` (linear).
    ``field`` names it in errors (a study file's ``faults_study.fraction =``)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        vals = [float(text)]
    elif isinstance(text, (list, tuple)):
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in text):
            raise InputError(f"{field} {text!r}: expected a list of fractions (numbers)")
        vals = [float(v) for v in text]
    elif isinstance(text, str) and ".." in text:
        m = re.match(r"^\s*([0-9.eE+-]+)\s*\.\.\s*([0-9.eE+-]+?)\s*(?:(n|\+)\s*([0-9.eE+-]+))?\s*$",
                     text)
        if not m:
            raise InputError(f"{field} {text!r}: expected a range such as 0.001..0.05, "
                             f"0.001..0.05 n8 or 0.01..0.05 +0.01")
        try:
            lo, hi = float(m.group(1)), float(m.group(2))
        except ValueError:
            raise InputError(f"{field} {text!r}: the ends must be numbers") from None
        _check_fraction(lo, text, field)
        _check_fraction(hi, text, field)
        if hi < lo:
            raise InputError(f"{field} {text!r}: the range is empty (end < start)")
        if m.group(3) == "+":
            try:
                step = float(m.group(4))
            except ValueError:
                raise InputError(f"{field} {text!r}: the step must be a number") from None
            if not step > 0:
                raise InputError(f"{field} {text!r}: the step must be > 0")
            count = math.floor((hi - lo) / step + 1e-9) + 1
            _check_count(count, text, field)
            vals = [float(f"{lo + i * step:.12g}") for i in range(count)]
        else:
            count = 6 if m.group(3) is None else _count(m.group(4), text, field)
            _check_count(count, text, field)
            vals = ([lo] if count == 1 or lo == hi else
                    [float(f"{v:.6g}") for v in np.geomspace(lo, hi, count)])
    elif isinstance(text, str):
        try:
            vals = [float(x) for x in text.split(",") if x.strip()]
        except ValueError:
            raise InputError(f"{field} {text!r}: expected numbers such as 0.01 or "
                             f"0.001,0.01,0.05, or a range 0.001..0.05") from None
    else:
        raise InputError(f"{field} {text!r}: expected a fraction or a range")
    if not vals:
        raise InputError(f"{field} {text!r}: no fraction given")
    for v in vals:
        _check_fraction(v, text, field)
    return sorted(set(vals))


def _count(t, text, field: str) -> int:
    try:
        n = int(t)
    except ValueError:
        raise InputError(f"{field} {text!r}: n{t} is not a whole number of values") from None
    if n < 1:
        raise InputError(f"{field} {text!r}: n{t} must be >= 1")
    return n


def _check_count(count: int, text, field: str) -> None:
    """A range's values are made one by one: refuse more than a study can run before making
    them ("0.01..0.5 +1e-12" is 490 billion)."""
    from netcosim.sweep.spec import MAX_POINTS

    if count > MAX_POINTS:
        raise InputError(f"{field} {text!r}: {count:,} values is more than a study can "
                         f"run ({MAX_POINTS:,} runs)")


def check_size(n_fractions: int, trials: int, from_cli: dict) -> None:
    """Fractions x trials runs, before any is drawn: at most MAX_POINTS, as for a sweep."""
    from netcosim.sweep.spec import MAX_POINTS

    if n_fractions * trials > MAX_POINTS:
        name = "--trials" if from_cli.get("trials") is not None else "faults_study.trials"
        raise InputError(f"{name} = {trials}: {n_fractions} fractions x {trials:,} trials is "
                         f"{n_fractions * trials:,} runs, more than a study can run "
                         f"({MAX_POINTS:,}); use fewer trials or fractions")


def _check_fraction(v, text, field: str) -> None:
    if not (isinstance(v, float) and math.isfinite(v) and 0 < v < 1):
        raise InputError(f"{field} {text!r}: {v!r} is outside (0, 1); a fault fraction is "
                         f"the share of the layer's links that fail")


# =========================================================================== points
def _trial_seed(seed: int, stream: int, trial: int) -> int:
    """Independent streams per (scenario seed, stream, trial); a fraction's stream is
    ``_fraction_stream`` of its value."""
    return int(np.random.SeedSequence([seed, stream, trial]).generate_state(1)[0])


def _fraction_stream(fraction: float) -> int:
    """A fraction's seed stream: the bits of its value, not its position among the study's
    fractions. Seeded by position, adding a smaller fraction (0.05 to a study of 0.3) moved
    every larger one and redrew all its fault sets, so the same fraction reported another
    median (1.4368 alone, 1.4226 beside 0.05; tests/test_metamorphic_studies.py) and --resume
    ran it all again."""
    return int(np.float64(fraction).view(np.uint64))


class StudyPoints:
    """A study's points, made on demand on every pass as a sweep's PointSet makes its own
    (``run_points`` passes over them to check, to run and to write the table). Each point's
    scenario table, the study's own plus its faults, is built only when a pass asks for it and
    dropped with the point; only the ids stay (a short string each). Held whole, every trial
    was a copy of the scenario: 8.6 KB a trial of one flow (a million trials, which a study
    may run: 9 GB in the parent), 4 MB a trial of 20,000 explicit flows (the default 6 x 100
    trials with 128 core links: 2.9 GB before the first run)."""

    def __init__(self, n: int, recipes):
        self._n, self._recipes = n, recipes  # recipes(): (params, build) of each point
        self._ids: list = [None] * n

    def __len__(self) -> int:
        return self._n

    def __iter__(self):
        for index, (params, build) in enumerate(self._recipes()):
            yield _TrialPoint(index, params, build, self._ids)


class _TrialPoint:
    """A point of a StudyPoints (the fields of netcosim.sweep.points.Point), its scenario
    table built when first asked for."""

    __slots__ = ("index", "params", "_build", "_data", "_ids")
    strandable = True  # a trial's faults may cut hosts apart: stranded runs, not bad input

    def __init__(self, index: int, params: dict, build, ids: list):
        self.index, self.params, self._build, self._data, self._ids = \
            index, params, build, None, ids

    @property
    def data(self) -> dict:
        if self._data is None:
            self._data = self._build()
        return self._data

    @property
    def id(self) -> str:
        from netcosim.sweep.points import point_id

        if self._ids[self.index] is None:
            self._ids[self.index] = point_id(self.data)
        return self._ids[self.index]

    @property
    def where(self) -> str:
        label = ", ".join(f"{k}={v}" for k, v in self.params.items())
        return f"fault trial {self.index} ({label})"


def study_points(scenario, topology, fractions, fkind: FaultKind, layer: str, trials: int,
                 at_us: float, single: bool = True, max_single: int = 256,
                 single_samples: int = 64, gpu_hosts=None,
                 recover_after_us: float | None = None) -> StudyPoints:
    """Sweep points of the random trials and of the single-link (or single-GPU) failures,
    made on demand (StudyPoints); bad options are refused here. ``recover_after_us``: the
    failed links come back (``up``) that long after they strike (a flap); None: they stay."""
    from topo.faults import random_failures

    if not isinstance(trials, int) or isinstance(trials, bool) or trials < 1:
        raise InputError(f"--trials {trials!r}: expected an integer >= 1")
    if fkind.gpu:
        return gpu_study_points(scenario, gpu_hosts, fractions, fkind, trials, at_us, single,
                                max_single, single_samples)
    cand = _candidates(topology, layer)
    if cand.size == 0:
        raise InputError(f"--layer {layer!r}: the fabric has no link in this layer")
    links = cand if single else cand[:0]
    if single and cand.size > max_single:
        rng = np.random.default_rng(_trial_seed(scenario.seed, _SINGLE_STREAM, 0))
        links = np.sort(rng.choice(cand, size=min(single_samples, cand.size), replace=False))
    links = links.tolist()

    def draw(frac, t) -> list:
        lf = random_failures(topology, fraction=frac, kind=fkind.kind, factor=fkind.factor,
                             layer=layer, at_us=at_us,
                             seed=_trial_seed(scenario.seed, _fraction_stream(frac), t))
        records = lf.to_records(topology)
        for rec in records:
            # the study's time as given: to_records gives it back from seconds
            # (--at-us 0.1 struck at 0.09999999999999999 us), a random trial struck an
            # instant before the single-link run of the same link and what meta says
            rec["at_us"] = at_us
        return records + _recoveries(records, at_us, recover_after_us)

    def one(li) -> list:
        u, v = int(topology.dlink_src[2 * li]), int(topology.dlink_dst[2 * li])
        rec = {"link": [u, v], "kind": fkind.kind, "at_us": at_us}
        if fkind.kind == "degrade":
            rec["factor"] = fkind.factor
        return [rec] + _recoveries([rec], at_us, recover_after_us)

    def build(records):
        return lambda: _with_faults(scenario, records())

    # a fraction fails as many links in every trial
    failed = {f: len(draw(f, 0)) // 2 for f in fractions}
    names = topology.layer_names

    def recipes():
        for frac in fractions:
            for t in range(trials):
                yield ({"study": "random", "fraction": frac, "trial": t,
                        "failed_links": failed[frac]}, build(lambda f=frac, t=t: draw(f, t)))
        for li in links:
            u, v = int(topology.dlink_src[2 * li]), int(topology.dlink_dst[2 * li])
            yield ({"study": "single", "link": li, "u": u, "v": v,
                    "layer": names[int(topology.link_layer[li])], "failed_links": 1},
                   build(lambda li=li: one(li)))

    return StudyPoints(len(fractions) * trials + len(links), recipes)


def _recoveries(records: list, at_us: float, after_us: float | None) -> list:
    """An ``up`` of every failed link ``after_us`` after it struck (none when None)."""
    if after_us is None:
        return []
    back = []
    for rec in records:
        up = {k: v for k, v in rec.items() if k != "factor"}
        up.update(kind="up", at_us=at_us + after_us)
        back.append(up)
    return back


def _with_faults(scenario, records: list) -> dict:
    data = copy.deepcopy(scenario.data)
    data["faults"] = list(copy.deepcopy(scenario.faults)) + records
    return data


def gpu_study_points(scenario, gpu_hosts, fractions, fkind: FaultKind, trials: int,
                     at_us: float, single: bool, max_single: int,
                     single_samples: int) -> StudyPoints:
    """Sweep points of GPU faults: per fraction, ``trials`` seeded random sets of that share
    of the step's GPUs (rounded, at least one); then every GPU alone (or a sample)."""
    if gpu_hosts is None or not len(gpu_hosts):
        raise InputError(f"--kind {fkind.kind}: GPU faults need a training workload "
                         f"([workload] kind = \"training\")")
    hosts = np.asarray(gpu_hosts, dtype=np.int64)
    kind = GPU_KINDS[fkind.kind]
    one = hosts if single else hosts[:0]
    if single and hosts.size > max_single:
        rng = np.random.default_rng(_trial_seed(scenario.seed, _SINGLE_STREAM, 0))
        one = np.sort(rng.choice(hosts, size=min(single_samples, hosts.size), replace=False))
    one = one.tolist()
    size = {f: max(1, int(round(f * hosts.size))) for f in fractions}

    def draw(frac, t):
        rng = np.random.default_rng(_trial_seed(scenario.seed, _fraction_stream(frac), t))
        return np.sort(rng.choice(hosts, size=size[frac], replace=False))

    def build(gpus):
        def data():
            d = copy.deepcopy(scenario.data)
            wl = d["workload"]
            wl["gpu_faults"] = list(copy.deepcopy(wl.get("gpu_faults", []))) + [
                {"gpus": [int(g) for g in gpus()], "kind": kind, "factor": fkind.factor,
                 "at_us": float(at_us)}]
            return d
        return data

    def recipes():
        for frac in fractions:
            for t in range(trials):
                yield ({"study": "random", "fraction": frac, "trial": t,
                        "failed_gpus": size[frac]}, build(lambda f=frac, t=t: draw(f, t)))
        for h in one:
            yield {"study": "single", "gpu": int(h), "failed_gpus": 1}, build(lambda h=h: [h])

    return StudyPoints(len(fractions) * trials + len(one), recipes)


def _candidates(topology, layer: str, at: str | None = None) -> np.ndarray:
    """The links of ``layer``; ``at`` names it in errors (default ``--layer 'core'``)."""
    from topo.topology import TopologyError

    at = at or f"--layer {layer!r}"
    if layer == "any":
        return np.arange(topology.n_links)
    try:
        lid = topology.layer_id(layer)
    except (TopologyError, InputError, KeyError, ValueError):
        raise InputError(f"{at}: this fabric's layers are "
                         f"{', '.join(topology.layer_names)} (or any)") from None
    return np.flatnonzero(topology.link_layer == lid)


# =========================================================================== the study
def run_fault_study(scenario, out_dir, fractions, kind="down", layer="any", trials=100,
                    at_us=None, at_fraction=None, single=True, max_single=256,
                    single_samples=64, backend=None, resume=False, title=None,
                    recover_after_us=None) -> dict:
    """Run the study, write its tables into ``out_dir``; returns {"baseline": summary,
    "summary": per-fraction rows, "costliest": ranked links, "outcome": sweep Outcome}."""
    from netcosim.runner import simulate_scenario
    from netcosim.sweep import table
    from netcosim.sweep.run import run_points

    fkind = kind if isinstance(kind, FaultKind) else FaultKind.parse(kind)
    fractions = parse_fractions(fractions)
    if recover_after_us is not None:
        if fkind.gpu:
            raise InputError(f"--recover-after-us {recover_after_us!r}: links come back, GPUs "
                             f"do not (--kind {fkind.kind})")
        flag, ok, what = _OPTION_CHECKS["recover_after_us"]  # (a caller of this function)
        if not ok(recover_after_us):
            raise InputError(f"{flag} {recover_after_us!r}: expected {what}")
    if at_us is not None and at_fraction is not None:
        raise InputError("--at-us and --at-fraction: give one of them, not both")
    prepared, result, base = simulate_scenario(scenario)  # also loads the engine's kernels
    base_us = float(base["makespan_us"])
    if not base_us > 0:
        raise InputError(f"{scenario.name}: the fault-free run takes no time; nothing to slow "
                         f"down")
    if at_fraction is not None:
        if not isinstance(at_fraction, (int, float)) or not 0 <= at_fraction < 1:
            raise InputError(f"--at-fraction {at_fraction!r}: expected a fraction of the "
                             f"fault-free makespan in [0, 1)")
        at = at_fraction * base_us
    elif at_us is not None:
        if not isinstance(at_us, (int, float)) or not math.isfinite(at_us) or at_us < 0:
            raise InputError(f"--at-us {at_us!r}: expected a time >= 0")
        at = float(at_us)
    else:
        at = 0.0
    points = study_points(scenario, prepared.topology, fractions, fkind, layer, trials, at,
                          single, max_single, single_samples,
                          gpu_hosts=prepared.schedule.meta.get("gpu_hosts"),
                          recover_after_us=recover_after_us)
    params = GPU_PARAMS if fkind.gpu else PARAMS
    timers = tcp_timers(scenario)
    meta = {"kind": "faults", "scenario": title or scenario.name, "baseline_makespan_us": base_us,
            "fault_kind": fkind.kind, "factor": fkind.factor,
            "layer": "gpus" if fkind.gpu else layer,
            "at_us": at, "recover_after_us": recover_after_us, "fractions": fractions,
            "trials": trials, "tcp_timers": timers}
    outcome = run_points(points, out_dir, backend, resume, params=params, meta=meta,
                         desc="faults")
    # the rows are passed over (read back from the journal each time), never held: a
    # million trials' rows with their scenario cells are gigabytes
    raw = outcome.each_row()
    ok_modes, tp_counts, unfolded_modes = set(), {}, set()
    for r in raw:
        tp_counts[r.get("tp_comm")] = tp_counts.get(r.get("tp_comm"), 0) + 1
        if r.get("status") == "ok":
            ok_modes.add(r.get("tp_comm"))
            if r.get("folded_replicas") == 0:
                unfolded_modes.add(r.get("tp_comm"))
    bases = mode_baselines(scenario, base, ok_modes)
    unfolded = unfolded_baselines(scenario, base, unfolded_modes)
    rows = _SlowdownRows(raw, bases, base_us, unfolded)
    outcome.rows = rows
    out = Path(out_dir)
    table.write_table(out, rows, params)
    unit = "failed_gpus" if fkind.gpu else "failed_links"
    summ = summarize(rows, fractions, unit)
    costly = costliest(rows, "gpu" if fkind.gpu else "link")
    _write(out / SUMMARY_NAME, summ, ("fraction", unit, "trials", "finished",
                                      "stranded_runs", "errors", "median", "p90", "p99",
                                      "worst", "mean"))
    if fkind.gpu:
        _write(out / COSTLIEST_GPUS_NAME, costly, ("rank", "gpu", "slowdown", "makespan_us",
                                                   "stranded"))
    else:
        _write(out / COSTLIEST_NAME, costly, ("rank", "link", "u", "v", "layer", "slowdown",
                                              "makespan_us", "stranded"))
    # the tables this study does not write, left by an earlier study in the same directory,
    # would read as this one's: `netcosim plot` drew a link study's costliest links under a
    # GPU study's title, and baseline_tp_modes.json named runs this study did not have
    stale = [COSTLIEST_NAME if fkind.gpu else COSTLIEST_GPUS_NAME, TP_MODES_NAME]
    with open(out / BASELINE_NAME, "w", encoding="utf-8") as fh:
        # the fault-free step with every replica simulated, where rows had that (by tp_comm)
        json.dump(dict(base, unfolded_makespan_us=unfolded) if unfolded else base, fh,
                  indent=2)
        fh.write("\n")
    other = {m: us for m, us in bases.items() if m != base.get("tp_comm")}
    tp_rows = {m: tp_counts.get(m, 0) for m in other}
    if other:
        stale.remove(TP_MODES_NAME)
        with open(out / TP_MODES_NAME, "w", encoding="utf-8") as fh:
            json.dump({"baseline_tp_comm": base.get("tp_comm"), "makespan_us": bases,
                       "rows": tp_rows}, fh, indent=2)
            fh.write("\n")
    for name in stale:
        (out / name).unlink(missing_ok=True)
    return {"baseline": base, "summary": summ, "costliest": costly, "outcome": outcome,
            "at_us": at, "recover_after_us": recover_after_us, "tcp_timers": timers,
            "tp_baselines": other, "tp_rows": tp_rows, "unfolded_baselines": unfolded}


class _SlowdownRows:
    """A study's rows with ``baseline_us``, ``slowdown`` and ``stranded_run``, made afresh on
    each pass over ``rows`` (a list, or the journal's rows re-read on each pass)."""

    def __init__(self, rows, bases: dict, base_us: float, unfolded: dict | None = None):
        self._rows, self._bases, self._base_us = rows, bases, base_us
        self._unfolded = unfolded or {}

    def __iter__(self):
        for r in self._rows:
            r = dict(r)
            r["baseline_us"] = self._bases.get(r.get("tp_comm"), self._base_us)
            if r.get("folded_replicas") == 0 and r.get("tp_comm") in self._unfolded:
                r["baseline_us"] = self._unfolded[r.get("tp_comm")]
            r["slowdown"] = _slowdown(r, r["baseline_us"])
            r["stranded_run"] = bool(r.get("status") == "ok" and (r.get("stranded") or 0) > 0)
            yield r


def mode_baselines(scenario, base: dict, modes_used) -> dict:
    """Fault-free makespan (us) per tensor-parallel pricing mode the study's runs used
    (``modes_used``: the ``tp_comm`` of the runs that finished).

    A training step with ``tp_comm = "auto"`` prices tensor parallelism analytically inside a
    node (NCCL's bus efficiency and per-step cost) unless a fault strikes a scale-up link of a
    GPU it runs on; then its TP collectives run on the fabric, a different figure even before
    the fault strikes. A row so priced is compared with the fault-free step priced the same
    way, or a scale-up link failing after the step ended reported a 6% speedup (x0.9403 on
    two_tier 2 x 2 with TP 2)."""
    modes = {base.get("tp_comm"): float(base["makespan_us"])}
    wl = scenario.workload or {}
    if wl.get("kind") != "training" or wl.get("tp_comm", "auto") != "auto":
        return modes
    for m in sorted(set(modes_used) - set(modes), key=str):
        if m not in ("local", "network"):
            continue
        modes[m] = _fault_free_us(scenario, tp_comm=m)
    return modes


def unfolded_baselines(scenario, base: dict, modes) -> dict:
    """Fault-free makespan (us) with every replica simulated, per tensor-parallel pricing mode
    of the runs that had every replica simulated (``modes``), when the baseline folded some.

    With ``network_detail = "full"`` a link fault unfolds every replica, while the fault-free
    step folds them onto one representative, which waits for the slowest replica's pipeline
    sends at every micro-batch. Where routing leaves those sends uneven (ECMP collisions on
    spine links) the folded step is slower, and a study compared two models: GPT-3 175B on
    2,048 GPUs of two_tier with nodes_per_leaf = 16 reported a slowdown of x0.966 for spine
    links failing. Such rows are compared with the fault-free step simulated the same way."""
    if not base.get("folded_replicas"):
        return {}
    return {m: _fault_free_us(scenario, symmetry="none",
                              **({"tp_comm": m} if m in ("local", "network") and
                                 m != base.get("tp_comm") else {}))
            for m in sorted(set(modes), key=str)}


def _fault_free_us(scenario, **workload) -> float:
    """Makespan (us) of the study's scenario with these [workload] keys set, no faults added."""
    from netcosim.runner import simulate_scenario
    from netcosim.scenario import Scenario

    data = copy.deepcopy(scenario.data)
    data["workload"].update(workload)
    _, _, b = simulate_scenario(Scenario.from_dict(data, source=scenario.source,
                                                   default_name=scenario.name))
    return float(b["makespan_us"])


def tcp_timers(scenario) -> dict | None:
    """The TCP timers a study runs with (packet engine, tcp or dctcp; flow engine, tcp), else
    None: with loss, or a link cut off with nothing else to take, the retransmission timers
    rather than the fabric can decide the slowdown, so a study says which ones it used
    (engine.tcp_timers and the values the engine uses)."""
    opts = scenario.engine_options()
    if scenario.engine_kind == "packet" and opts["transport"] in ("tcp", "dctcp"):
        from netcore.packet.options import TIMER_KEYS
    elif scenario.engine_kind == "flow" and opts["transport"] == "tcp":
        from netcore.flow.options import TIMER_KEYS
    else:
        return None
    return {"preset": opts["tcp_timers"], **{k: opts[k] for k in TIMER_KEYS}}


def _slowdown(r: dict, base_us: float):
    if r.get("status") != "ok" or (r.get("stranded") or 0) > 0:
        return None
    m = r.get("makespan_us")
    return None if m is None else float(m) / base_us


def summarize(rows, fractions, unit: str = "failed_links") -> list[dict]:
    """Per fraction: the slowdown distribution of the runs that finished, and counts
    (``unit``: failed_links or failed_gpus). One pass over ``rows``, keeping numbers only."""
    seen = {f: {"units": [], "slowdowns": [], "stranded": 0, "errors": 0} for f in fractions}
    for r in rows:
        g = seen.get(r.get("fraction")) if r.get("study") == "random" else None
        if g is None:
            continue
        g["units"].append(r.get(unit, 0))
        if r.get("slowdown") is not None:
            g["slowdowns"].append(r["slowdown"])
        g["stranded"] += bool(r.get("stranded_run"))
        g["errors"] += r.get("status") not in ("ok",)
    out = []
    for f in fractions:
        g = seen[f]
        if not g["units"]:
            continue
        s = np.array(g["slowdowns"], dtype=float)
        row = {"fraction": f, unit: int(np.median(g["units"])),
               "trials": len(g["units"]), "finished": int(s.size),
               "stranded_runs": g["stranded"], "errors": g["errors"]}
        if s.size:
            row.update(median=float(np.median(s)), p90=float(np.percentile(s, 90)),
                       p99=float(np.percentile(s, 99)), worst=float(s.max()), mean=float(s.mean()))
        out.append(row)
    return out


def costliest(rows, what: str = "link") -> list[dict]:
    """Single-link (``what`` = "gpu": single-GPU) failures, costliest first: stranding runs
    first, then by slowdown."""
    # the figures of each single run, not its row (a row holds its whole scenario)
    keep = ("gpu", "link", "u", "v", "layer", "slowdown", "makespan_us", "stranded")
    single = [{k: r.get(k) for k in keep} for r in rows
              if r.get("study") == "single" and r.get("status") == "ok"]

    def key(r):
        strands = (r.get("stranded") or 0) > 0
        return (0 if strands else 1, -(r.get("slowdown") or 0.0), r.get(what, 0))

    out = []
    if what == "gpu":
        for rank, r in enumerate(sorted(single, key=key), 1):
            out.append({"rank": rank, "gpu": r.get("gpu"), "slowdown": r.get("slowdown"),
                        "makespan_us": r.get("makespan_us"), "stranded": r.get("stranded") or 0})
        return out
    for rank, r in enumerate(sorted(single, key=key), 1):
        out.append({"rank": rank, "link": r.get("link"), "u": r.get("u"), "v": r.get("v"),
                    "layer": r.get("layer"), "slowdown": r.get("slowdown"),
                    "makespan_us": r.get("makespan_us"), "stranded": r.get("stranded") or 0})
    return out


def _write(path: Path, rows, cols) -> None:
    from netcosim.sweep.table import _cell

    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(cols)
        for r in rows:
            w.writerow([_cell(r.get(c)) for c in cols])


def _check_drawable(prepared, fkind: FaultKind, layer: str, case: str, named: dict) -> None:
    """A study's links (its layer has some) or GPUs (a training step's) exist in the case's
    scenario; errors name the option as given and the case."""
    of = f" (case {case!r})" if case else ""
    if fkind.gpu:
        hosts = prepared.schedule.meta.get("gpu_hosts")
        if hosts is None or not len(hosts):
            raise InputError(f"{named['kind']} {fkind.kind}{of}: GPU faults need a training "
                             f"workload ([workload] kind = \"training\")")
        return
    at = f"{named['layer']} {layer!r}{of}"
    if _candidates(prepared.topology, layer, at).size == 0:
        raise InputError(f"{at}: the fabric has no link in this layer")


# =========================================================================== study files
STUDY_KEYS = ("fraction", "kind", "layer", "trials", "at_us", "at_fraction",
              "recover_after_us", "single", "max_single", "single_samples", "case")
DEFAULTS = {"fraction": "0.001..0.05", "kind": "down", "layer": "any", "trials": 100,
            "at_us": None, "at_fraction": None, "recover_after_us": None, "single": True,
            "max_single": 256, "single_samples": 64}


def split_study(data: dict, source=None):
    """A scenario table with an optional ``[faults_study]`` table -> (scenario table, options,
    cases). Options are the CLI's (fraction, kind -- a string or a list --, layer, trials,
    at_us, at_fraction, recover_after_us, single, max_single, single_samples);
    ``[[faults_study.case]]`` tables are a ``label`` plus dotted scenario settings (a table
    value replaces the whole table), each run as its own study."""
    from netcosim.sweep.spec import _bundle

    raw = data.get("faults_study", {})
    base = {k: v for k, v in data.items() if k != "faults_study"}
    if not isinstance(raw, dict):
        raise InputError(f"faults_study = {raw!r}: expected a table")
    for k in raw:
        if k not in STUDY_KEYS:
            raise InputError(f"faults_study.{k}: unknown key (allowed: {', '.join(STUDY_KEYS)})")
    opts = {k: v for k, v in raw.items() if k != "case"}
    cases = [("", [])]
    if "case" in raw:
        c = raw["case"]
        if not isinstance(c, list) or not c or not all(isinstance(x, dict) for x in c):
            raise InputError("faults_study.case: expected [[faults_study.case]] tables")
        for i, t in enumerate(c):  # a case's label names its output directory
            if "label" not in t:
                raise InputError(f"faults_study.case[{i}].label: missing (each case needs a "
                                 f"label; it names the case's output directory)")
        axis = _bundle("case", c, "faults_study.case", "case")
        cases = list(zip(map(str, axis.values), axis.settings))
    return base, opts, cases


# option -> (command-line flag, check, what it expects)
_OPTION_CHECKS = {
    "trials": ("--trials", lambda v: _is_int(v) and v >= 1, "an integer >= 1"),
    "max_single": ("--max-single", lambda v: _is_int(v) and v >= 0, "an integer >= 0"),
    "single_samples": ("--single-samples", lambda v: _is_int(v) and v >= 1, "an integer >= 1"),
    "single": (None, lambda v: isinstance(v, bool), "true or false"),
    "layer": ("--layer", lambda v: isinstance(v, str) and bool(v), "a layer name or any"),
    "at_us": ("--at-us", lambda v: v is None or (_is_num(v) and v >= 0), "a time >= 0"),
    "at_fraction": ("--at-fraction", lambda v: v is None or (_is_num(v) and 0 <= v < 1),
                    "a fraction of the fault-free makespan in [0, 1)"),
    "recover_after_us": ("--recover-after-us", lambda v: v is None or (_is_num(v) and v > 0),
                         "a duration > 0 (microseconds)"),
}


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def check_options(opts: dict, from_cli: dict) -> None:
    """Every study option, named as the user gave it (``--single-samples`` or
    ``faults_study.single_samples``), before anything runs."""
    for key, (flag, ok, what) in _OPTION_CHECKS.items():
        v = opts[key]
        if not ok(v):
            name = flag if flag and from_cli.get(key) is not None else f"faults_study.{key}"
            raise InputError(f"{name} = {v!r}: expected {what}")
    if opts["at_us"] is not None and opts["at_fraction"] is not None:
        raise InputError(f"faults_study: at_us = {opts['at_us']!r} and at_fraction = "
                         f"{opts['at_fraction']!r}: give one of them, not both")


def run_study(data: dict, options: dict, out_dir, backend=None, resume=False, source=None,
              name: str | None = None) -> list[dict]:
    """Every (case, kind) of a study file as its own fault study in ``out_dir/<case>-<kind>``
    (straight into ``out_dir`` when there is one of each); returns one result dict each, with
    ``case`` and ``kind`` added. ``options`` (from the CLI) override the file's."""
    from netcosim.outputs import safe_dir_name
    from netcosim.scenario import Scenario, apply_override

    base, file_opts, cases = split_study(data, source)
    opts = {**DEFAULTS, **file_opts, **{k: v for k, v in options.items() if v is not None}}
    check_options(opts, options)
    kinds = opts["kind"] if isinstance(opts["kind"], list) else [opts["kind"]]
    if not kinds:
        raise InputError("faults_study.kind = []: no fault kind")
    # errors name each option where it was given: a study file's faults_study.fraction was
    # reported as a --fraction the command line never had
    named = {k: (flag if options.get(k) is not None else f"faults_study.{k} =")
             for k, flag in (("kind", "--kind"), ("fraction", "--fraction"),
                             ("layer", "--layer"))}
    fkinds = {}
    for i, k in enumerate(kinds):  # refuse a bad kind before any run
        at = named["kind"] if not isinstance(opts["kind"], list) else f"faults_study.kind[{i}] ="
        fkinds[k] = FaultKind.parse(k, at)
    check_size(len(parse_fractions(opts["fraction"], named["fraction"])), opts["trials"],
               options)
    out = Path(out_dir)
    results, jobs = [], []
    for i, (label, settings) in enumerate(cases):
        d = copy.deepcopy(base)
        for path, value in settings:
            try:
                apply_override(d, path, copy.deepcopy(value), ".".join(map(str, path)))
            except InputError as e:  # a case's setting, not a --set of the command line
                raise InputError(str(e).replace("--set ", f"faults_study.case[{i}]: ", 1)) \
                    from None
        sc = Scenario.from_dict(d, source=source, default_name=name or "faults")
        for k in kinds:
            sub = out if len(cases) == 1 and len(kinds) == 1 else \
                out / safe_dir_name(f"{label}-{k}" if label else k)
            for other, ok, _, osub in jobs:  # one directory per study, never shared
                if osub == sub:
                    raise InputError(f"faults_study.case: labels {other!r} ({ok}) and "
                                     f"{label!r} ({k}) both give the directory "
                                     f"{sub.name!r}; use labels that differ in letters, digits, "
                                     f"'.', '_' or '-'")
            jobs.append((label, k, sc, sub))
    prepared = {}
    for _, _, sc, _ in jobs:  # every case checked before the first study runs
        if id(sc) not in prepared:
            prepared[id(sc)] = sc.prepare()
    for label, k, sc, _ in jobs:
        # what each study draws from, in each case's fabric: a layer that a later case's
        # fabric lacks stopped the command after the earlier cases' studies had run and
        # written their directories
        _check_drawable(prepared[id(sc)], fkinds[k], opts["layer"], label, named)
    for label, k, sc, sub in jobs:
        res = run_fault_study(sc, sub, opts["fraction"], kind=k, layer=opts["layer"],
                              trials=opts["trials"], at_us=opts["at_us"],
                              at_fraction=opts["at_fraction"],
                              recover_after_us=opts["recover_after_us"], single=opts["single"],
                              max_single=opts["max_single"],
                              single_samples=opts["single_samples"], backend=backend,
                              resume=resume, title=f"{sc.name}, {label}" if label else None)
        res.update(case=label, kind=k, dir=sub)
        results.append(res)
        if res["outcome"].interrupted:
            break
    if len(jobs) > 1:
        rows = [{"case": r["case"], "kind": r["kind"], "dir": r["dir"].name,
                 "baseline_us": r["baseline"]["makespan_us"], **s}
                for r in results for s in r["summary"]]
        gpus = any("failed_gpus" in r for r in rows)
        _write(out / CASES_NAME, rows, ("case", "kind", "dir", "baseline_us", "fraction",
                                        "failed_links") + (("failed_gpus",) if gpus else ()) + (
                                        "trials", "finished", "stranded_runs",
                                        "errors", "median", "p90", "p99", "worst", "mean"))
        with open(out / "sweep_meta.json", "w", encoding="utf-8") as fh:
            json.dump({"kind": "fault_cases", "name": name or base.get("name", ""),
                       "layer": opts["layer"], "dirs": [r["dir"].name for r in results]},
                      fh, indent=2)
            fh.write("\n")
    return results
