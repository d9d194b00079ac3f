"""Parallel layouts of a training job: enumeration, feasibility and a cheap step-time estimate.

The pure half of ``netcosim plan`` (docs/plan.md); the command simulates the most promising
layouts on a network engine. Nothing here builds a Schedule.

* ``enumerate_layouts``: every combination of TP, CP, PP, VP, EP, micro-batch size,
  recomputation (none | selective | full), distributed optimizer and sequence parallelism
  (only with TP > 1) that a Megatron-style framework accepts for the model, the GPU count and
  the global batch; DP = GPUs / (TP CP PP). Each rejected combination is counted under the
  first reason it fails (``REASONS``), among them not fitting in GPU memory (the same figures as
  ``compute.memory.memory_per_gpu``, computed with the pipeline walks cached).
* ``Estimator``: per layout, the compute model's time of one micro-batch on every pipeline
  stage (``compute.layers.LayerModel``, tensor parallelism priced inside the scale-up domain as
  the step generator does), the 1F1B pipeline with its bubble, and an alpha-beta estimate of the
  exposed communication in which every collective's connections are routed on the real fabric
  together with the same collective of every other group (``NetRates``): a connection gets the
  capacity of its busiest link divided by the connections sharing it, so ECMP collisions and
  cross-rail traffic through the spines count, but nothing else running at the same time does.

Candidate values: TP and CP divide the GPU count (TP up to the heads, CP up to ``MAX_CP``), PP
divides what is left (up to the layers), VP divides the layers per stage (only when PP divides
the layers, as Megatron-LM's interleaved schedule needs), EP divides the experts, the
micro-batch is a power of two up to ``MAX_MICRO_BATCH``. A value fixed by the scenario
(``[workload.parallel]``) replaces the candidates of its dimension.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from compute import pipeline
from compute.hardware import GPUSpec, get_gpu
from compute.layers import COMM_LOCAL, COMM_NET, COMPUTE, LayerModel, ep_rank_shares
from compute.memory import activation_bytes_per_layer, params_per_stage
from compute.model import TransformerConfig, get_model
from compute.parallel import (RECOMPUTE, ParallelConfig, layer_split, place, rank_grid,
                              too_few_layers, validate)
from topo.errors import InputError

# the dimensions the search chooses (dp follows from the GPU count)
SEARCHED = ("tp", "cp", "pp", "vp", "ep", "micro_batch", "recompute", "dist_opt", "sp")
LAYOUT_FIELDS = ("tp", "cp", "pp", "vp", "dp", "ep", "micro_batch", "recompute", "dist_opt", "sp")
MAX_CP = 16
MAX_MICRO_BATCH = 16
OBJECTIVES = ("step_time", "mfu", "tokens_per_s")

# published layouts simulated whenever they are feasible (so the table shows their rank)
REFERENCES = {
    "gpt3-175b": [("NeMo", dict(tp=4, cp=1, pp=8, vp=12, ep=1, micro_batch=1, sp=True,
                                dist_opt=True, recompute="selective"))],
}

# rejection reasons, in the order they are tested
REASONS = {
    "gpus": "tp x cp x pp does not divide the GPU count",
    "dp": "dp differs from GPUs / (tp x cp x pp)",
    "heads": "tp does not divide the heads, KV heads, FFN or expert FFN",
    "seq": "cp (x tp with SP) does not divide the sequence",
    "layers": "more pipeline positions than layers, besides the first and the last",
    "experts": "ep does not divide the experts or dp",
    "batch": "global batch not divisible by micro_batch x dp",
    "interleave": "interleaving needs pp > 1 and micro-batches a multiple of pp",
    "memory": "does not fit in GPU memory",
}


@dataclass(frozen=True)
class Layout:
    tp: int
    cp: int
    pp: int
    vp: int
    dp: int
    ep: int
    micro_batch: int
    recompute: str
    dist_opt: bool
    sp: bool

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in LAYOUT_FIELDS}

    @property
    def shape(self) -> tuple:
        """What decides the step's communication pattern and pipeline (not recompute, the
        optimizer sharding or SP)."""
        return (self.tp, self.cp, self.pp, self.ep, self.vp, self.micro_batch)

    def label(self) -> str:
        parts = [f"TP{self.tp}"]
        if self.cp > 1:
            parts.append(f"CP{self.cp}")
        parts.append(f"PP{self.pp}")
        if self.vp > 1:
            parts.append(f"VP{self.vp}")
        parts.append(f"DP{self.dp}")
        if self.ep > 1:
            parts.append(f"EP{self.ep}")
        parts.append(f"MBS{self.micro_batch}")
        if self.sp:
            parts.append("SP")
        parts.append({"none": "no-rc", "selective": "sel-rc", "full": "full-rc"}[self.recompute])
        if self.dist_opt:
            parts.append("DO")
        return " ".join(parts)


@dataclass
class Estimate:
    step_time_s: float
    compute_s: float  # one stage's busy time (compute + analytic TP), the slowest stage
    bubble_s: float
    exposed: dict  # kind -> seconds (tp: network TP only, local TP is in compute_s)
    optimizer_s: float
    mfu: float = 0.0
    tokens_per_s: float = 0.0


@dataclass
class Candidate:
    layout: Layout
    par: ParallelConfig  # validated, dp filled in
    memory_bytes: float
    reference: str = ""
    estimate: Estimate | None = None


@dataclass
class Enumeration:
    candidates: list  # feasible Candidates
    rejected: Counter  # reason key -> combinations
    total: int  # combinations looked at
    smallest: tuple | None = None  # (bytes, Layout) of the smallest that failed on memory only
    capacity_bytes: float = 0.0

    def reasons_text(self) -> str:
        return ", ".join(f"{n:,} {REASONS[k]}" for k, n in self.rejected.most_common())


# =========================================================================== enumeration
def divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(math.isqrt(n)) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _fixed_values(fixed: dict) -> dict:
    out = {}
    for k, v in fixed.items():
        if k in ("tp", "cp", "pp", "vp", "ep", "micro_batch", "dp"):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(f"parallel.{k} = {v!r}: expected a positive integer")
        elif k in ("dist_opt", "sp"):
            if not isinstance(v, bool):
                raise InputError(f"parallel.{k} = {v!r}: expected true or false")
        elif k == "recompute":
            if v not in RECOMPUTE:
                raise InputError(f"parallel.recompute = {v!r}: expected one of "
                                 f"{', '.join(RECOMPUTE)}")
        out[k] = v
    return out


def check_fixed(model: TransformerConfig, n_gpus: int, global_batch: int, fixed: dict) -> None:
    """A fixed value no layout can take (tp = 3 on 1,024 GPUs) is bad input: InputError naming
    the field."""
    m, f = model, fixed

    def bad(k, why):
        raise InputError(f"parallel.{k} = {f[k]!r}: {why}")

    for k in ("tp", "cp", "pp", "dp"):
        if k in f and n_gpus % f[k]:
            bad(k, f"does not divide the GPU count {n_gpus:,}")
    if "tp" in f:
        t = f["tp"]
        if m.heads % t:
            bad("tp", f"does not divide model.heads = {m.heads}")
        if m.g % t and t % m.g:
            bad("tp", f"incompatible with model.kv_heads = {m.g}")
        if m.f % t:
            bad("tp", f"does not divide the FFN size {m.f}")
        if m.experts and m.expert_f % t:
            bad("tp", f"does not divide the expert FFN size {m.expert_f}")
    if "cp" in f and m.seq % f["cp"]:
        bad("cp", f"does not divide model.seq = {m.seq}")
    if "pp" in f and f["pp"] > m.layers:
        bad("pp", f"more stages than model.layers = {m.layers}")
    if "vp" in f and f["vp"] > 1:
        if f.get("pp") == 1:
            bad("vp", "interleaving needs pp > 1")
        if too_few_layers(m.layers, f["vp"] * max(f.get("pp", 2), 2)):
            bad("vp", f"pp x vp - 2 exceeds model.layers = {m.layers}")
    if "ep" in f and f["ep"] > 1 and (not m.experts or m.experts % f["ep"]):
        bad("ep", f"does not divide model.experts = {m.experts}")
    if "micro_batch" in f and global_batch % f["micro_batch"]:
        bad("micro_batch", f"does not divide parallel.global_batch = {global_batch}")
    if "sp" in f and f["sp"] and f.get("tp") == 1:
        bad("sp", "sequence parallelism needs tp > 1")
    mp = 1
    for k in ("tp", "cp", "pp", "dp"):
        mp *= f.get(k, 1)
    if n_gpus % mp:
        given = " x ".join(f"{k} {f[k]}" for k in ("tp", "cp", "pp", "dp") if k in f)
        raise InputError(f"parallel: {given} = {mp} does not divide the GPU count {n_gpus:,}")


def enumerate_layouts(model, gpu, n_gpus: int, base: dict, fixed: dict | None = None,
                      references: bool = True) -> Enumeration:
    """Every layout of ``n_gpus`` GPUs for ``model`` on ``gpu`` (module docstring).

    ``base``: the other ParallelConfig fields (global_batch, precision, flash_attention, ...);
    ``fixed``: values of searched dimensions (and dp) that are not searched. Raises InputError
    for a fixed value no layout can take.
    """
    m = get_model(model)
    spec: GPUSpec = get_gpu(gpu)
    fixed = _fixed_values(dict(fixed or {}))
    base = {k: v for k, v in base.items() if k not in LAYOUT_FIELDS and k != "stage_layers"}
    try:
        proto = ParallelConfig.from_dict(base)  # types of the other fields, once
    except TypeError as e:
        raise InputError(f"parallel: {e}") from None
    gb = proto.global_batch
    check_fixed(m, n_gpus, gb, fixed)
    cap = spec.hbm_bytes
    ref_of = {}
    if references:
        for name, d in REFERENCES.get((m.name or "").lower(), []):
            ref_of[tuple(sorted(d.items()))] = name

    def values(k, default):
        return [fixed[k]] if k in fixed else default

    tps = values("tp", [d for d in divisors(n_gpus) if d <= m.heads])
    recs = values("recompute", list(RECOMPUTE))
    mbs_all = values("micro_batch", [b for b in (1, 2, 4, 8, 16) if b <= MAX_MICRO_BATCH])
    eps = values("ep", [d for d in divisors(m.experts) if d <= n_gpus] if m.experts else [1])
    rejected: Counter = Counter()
    total = 0
    cands = []
    smallest = None
    mem_cache = _MemoryCache(m, spec)
    for tp in tps:
        tp_ok = _tp_divides(m, tp)
        cps = values("cp", [d for d in divisors(n_gpus // tp if n_gpus % tp == 0 else 1)
                            if d <= MAX_CP])
        sps = values("sp", [False, True] if tp > 1 else [False])
        for cp in cps:
            rest = n_gpus // (tp * cp) if n_gpus % (tp * cp) == 0 else 0
            pps = values("pp", [d for d in divisors(rest) if d <= m.layers] if rest else [1])
            for pp in pps:
                mp = tp * cp * pp
                dp = n_gpus // mp if n_gpus % mp == 0 else 0
                if "vp" in fixed:
                    vps = [fixed["vp"]]
                elif pp > 1 and m.layers % pp == 0:
                    vps = [v for v in divisors(m.layers // pp)]
                else:
                    vps = [1]
                for vp, ep, mbs, sp, rec in _product(vps, eps, mbs_all, sps, recs):
                    dos = values("dist_opt", [False, True] if dp > 1 else [False])
                    for do in dos:
                        total += 1
                        reason = _structural(m, gb, n_gpus, tp, cp, pp, vp, dp, ep, mbs, sp,
                                             tp_ok, fixed)
                        if reason:
                            rejected[reason] += 1
                            continue
                        par = replace(proto, tp=tp, cp=cp, pp=pp, vp=vp, dp=dp, ep=ep,
                                      micro_batch=mbs, sp=sp, recompute=rec, dist_opt=do)
                        lay = Layout(tp, cp, pp, vp, dp, ep, mbs, rec, do, sp)
                        mem = mem_cache.total(par)
                        if mem > cap:
                            rejected["memory"] += 1
                            if smallest is None or mem < smallest[0]:
                                smallest = (mem, lay)
                            continue
                        key = tuple(sorted((k, v) for k, v in lay.as_dict().items()
                                           if k != "dp"))
                        cands.append(Candidate(lay, par, mem, ref_of.get(key, "")))
    if not total:
        raise InputError("parallel: no layout to look at")
    if not cands and not rejected.get("memory"):
        why = ", ".join(f"{REASONS[k]} ({n:,})" for k, n in rejected.most_common(2))
        given = ", ".join(f"{k} = {v!r}" for k, v in fixed.items())
        raise InputError(f"parallel: no layout of {n_gpus:,} GPUs" +
                         (f" with {given}" if given else "") + f" is accepted: {why}")
    return Enumeration(cands, rejected, total, smallest, cap)


def reference_reason(model, n_gpus: int, base: dict, fixed: dict, layout: dict) -> str:
    """Why a reference layout (``REFERENCES``) is not a candidate here: a ``REASONS`` text, a
    fixed value it contradicts, or "" when it passes the structural checks (then it failed on
    memory)."""
    m = get_model(model)
    for k, v in fixed.items():
        if k in layout and layout[k] != v:
            return f"fixed {k} = {v!r}"
    tp, cp, pp = layout["tp"], layout["cp"], layout["pp"]
    dp = n_gpus // (tp * cp * pp) if n_gpus % (tp * cp * pp) == 0 else 0
    gb = base.get("global_batch", 1)
    tp_ok = _tp_divides(m, tp)
    why = _structural(m, gb, n_gpus, tp, cp, pp, layout["vp"], dp, layout["ep"],
                      layout["micro_batch"], layout["sp"], tp_ok, fixed)
    return REASONS[why] if why else REASONS["memory"]


def _product(*lists):
    import itertools

    return itertools.product(*lists)


def _tp_divides(m: TransformerConfig, tp: int) -> bool:
    """TP splits the heads, the KV heads (or is a multiple of them), the FFN and the expert
    FFN: the checks of ``parallel.validate``. The expert FFN was missing here, so a MoE model
    with ``expert_ffn`` 1,024 and ``ffn`` 1,536 on 12 GPUs listed TP 3, 6 and 12 layouts as
    feasible (258 of 936) that the training workload then refused."""
    return not (m.heads % tp or (m.g % tp and tp % m.g) or m.f % tp
                or (m.experts and m.expert_f % tp))


def _structural(m, gb, n, tp, cp, pp, vp, dp, ep, mbs, sp, tp_ok, fixed) -> str:
    if not dp or tp * cp * pp * dp != n:
        return "gpus"
    if "dp" in fixed and fixed["dp"] != dp:
        return "dp"
    if not tp_ok:
        return "heads"
    if m.seq % cp or (sp and m.seq % (tp * cp)):
        return "seq"
    npos = pp * vp
    if too_few_layers(m.layers, npos):  # parallel.layer_split's rule
        return "layers"
    if ep > 1 and (not m.experts or m.experts % ep or dp % ep):
        return "experts"
    if gb % (mbs * dp):
        return "batch"
    if vp > 1 and (pp == 1 or (gb // (mbs * dp)) % pp):
        return "interleave"
    return ""


# =========================================================================== memory, fast
def order_arrays(p: int, m: int, v: int, stage: int):
    """``pipeline.order`` without the Python loop: (phase, chunk) arrays of a stage's units."""
    if v == 1:
        warm = min(p - stage - 1, m)
        steady = m - warm
        ph = np.concatenate([np.zeros(warm, np.int64), np.tile([0, 1], steady),
                             np.ones(warm, np.int64)])
        return ph, np.zeros(len(ph), np.int64)
    total = m * v
    warm = min((p - stage - 1) * 2 + (v - 1) * p, total)
    k = np.arange(total)
    fc, _ = pipeline._chunk_mb(k, p, v, False)
    bc, _ = pipeline._chunk_mb(k, p, v, True)
    steady = total - warm
    mid = np.empty(2 * steady, np.int64)
    mid[0::2] = fc[warm:]
    mid[1::2] = bc[:steady]
    ph = np.concatenate([np.zeros(warm, np.int64), np.tile([0, 1], steady),
                         np.ones(warm, np.int64)])
    ch = np.concatenate([fc[:warm], mid, bc[steady:]])
    return ph, ch


@lru_cache(maxsize=8192)
def _peaks(p: int, m: int, v: int, lay: tuple):
    """Activation peaks of every stage in units of one layer's activations: (X, pairs) where
    X[s] is the largest count of layer-micro-batches in flight on stage s (s >= 1) and
    ``pairs`` the distinct (layer-micro-batches, embedding outputs) in flight on stage 0 (its
    first chunk also holds the embedding output, priced separately)."""
    lay_a = np.asarray(lay, dtype=float)
    X = np.zeros(p)
    pairs = None
    for s in range(p):
        ph, ch = order_arrays(p, max(m, 1), v, s)
        sign = np.where(ph == pipeline.FWD, 1.0, -1.0)
        a = np.cumsum(sign * lay_a[ch * p + s])
        if s == 0:
            e = np.cumsum(sign * (ch == 0))
            pairs = np.unique(np.stack([a, e], axis=1), axis=0)
            X[0] = a.max()
        else:
            X[s] = a.max()
    return X, pairs


@lru_cache(maxsize=8192)
def _stage_params(m: TransformerConfig, pp: int, vp: int, tp: int, ep: int):
    par = ParallelConfig(tp=tp, pp=pp, vp=vp, ep=ep, dp=max(ep, 1))
    lay = layer_split(m, par)
    return lay, np.asarray(params_per_stage(m, par), dtype=float)


class _MemoryCache:
    """``memory_per_gpu(model, par, gpu).total_bytes`` with the pipeline walks cached (the
    same figures: tests/test_plan.py)."""

    def __init__(self, m: TransformerConfig, spec: GPUSpec):
        self.m, self.spec = m, spec

    def total(self, par: ParallelConfig) -> float:
        m = self.m
        lay, n_stage = _stage_params(m, par.pp, par.vp, par.tp, par.ep)
        per_layer = activation_bytes_per_layer(m, par)
        emb = m.seq / par.cp * par.micro_batch * m.hidden * 3 / (par.tp if par.sp else 1)
        X, pairs = _peaks(par.pp, par.micro_batches, par.vp, lay)
        act = X * per_layer
        act[0] = float((pairs[:, 0] * per_layer + pairs[:, 1] * emb).max())
        opt_div = par.dp if par.dist_opt else 1
        tot = (2.0 + par.grad_bytes + 12.0 / opt_div) * n_stage + act
        return float(tot.max())


# =========================================================================== network rates
class NetRates:
    """Per-connection rates of collectives on a fabric, every group of a kind at once.

    ``ring(groups)``: (rate B/s, latency s) of a ring over every row of ``groups`` (host ids),
    all rows together: each connection i -> i+1 is routed as the engines route it (connection
    keyed), a directed link's load is the connections crossing it, a connection's rate the
    smallest capacity / load on its path; the ring moves at its slowest connection.
    ``pairs(src, dst)``: the same for arbitrary connections. Without a topology, every
    connection gets ``default_Bps``.
    """

    def __init__(self, topology=None, routing=None, default_Bps: float = 50e9,
                 default_latency_s: float = 2e-6):
        self.topology, self.routing = topology, routing
        self.default = (default_Bps, default_latency_s)
        self._cache: dict = {}

    def pairs(self, src, dst) -> tuple[float, float]:
        src = np.asarray(src, dtype=np.int64).ravel()
        dst = np.asarray(dst, dtype=np.int64).ravel()
        keep = src != dst
        src, dst = src[keep], dst[keep]
        if not src.size:
            return math.inf, 0.0
        if self.topology is None or self.routing is None:
            return self.default
        from netcore.schedule import connection_keys

        key = (src.tobytes(), dst.tobytes())
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        # one path per distinct connection (ring connections repeat across nothing, but
        # all-to-all and pipeline sets may)
        t = self.topology
        p = self.routing.paths(src, dst, flow_id=connection_keys(src, dst))
        load = np.bincount(p.link, weights=p.weight, minlength=t.n_dlinks)
        cap = np.asarray(t.dlink_bw, dtype=float)
        lens = np.diff(p.ptr)
        with np.errstate(divide="ignore"):
            per_link = np.where(p.weight > 0, cap[p.link] / np.maximum(load[p.link], 1e-12)
                                * 1.0, np.inf)
        rate = np.full(len(src), np.inf)
        nz = lens > 0
        if nz.any():
            rate[nz] = np.minimum.reduceat(per_link, p.ptr[:-1][nz])
        out = (float(rate.min()), float(np.max(p.latency)) if len(p.latency) else 0.0)
        if len(self._cache) > 4096:
            self._cache.clear()
        self._cache[key] = out
        return out

    def ring(self, groups) -> tuple[float, float]:
        """(rate, latency) of ring collectives over every row of ``groups`` at once, the rate
        what the whole buffer moves at: where a row holds m > 1 GPUs of each of several
        two_tier nodes the step generator runs m rings, one per rail (collectives/rail.py),
        each with 1/m of the buffer, so the rate is m x their slowest connection's."""
        g = np.asarray(groups, dtype=np.int64)
        if g.ndim != 2 or g.shape[1] < 2:
            return math.inf, 0.0
        from compute.comm import per_node

        m = per_node(self.topology, g) if self.topology is not None else None
        if m is None:
            return self.pairs(g, np.roll(g, -1, axis=1))
        from collectives.rail import rail_layout

        rings = g[:, rail_layout(m, g.shape[1])]  # (k, m, n) hosts in ring order
        rate, lat = self.pairs(rings, np.roll(rings, -1, axis=2))
        return rate * m, lat

    def all_pairs(self, groups) -> tuple[float, float]:
        g = np.asarray(groups, dtype=np.int64)
        k, n = g.shape
        if n < 2:
            return math.inf, 0.0
        i, j = np.nonzero(~np.eye(n, dtype=bool))
        return self.pairs(g[:, i], g[:, j])

    def all_pairs_v(self, groups, share) -> tuple[float, float]:
        """(seconds per byte of each rank's buffer, latency) of all-to-all-v's over every row
        of ``groups`` at once in which rank i sends ``share[j]`` of its buffer to rank j (an
        expert dispatch; the combine sends ``share[i]``, the transpose): connections carry
        unequal bytes, so a link is loaded by the bytes crossing it, not by the connections,
        and the collective takes its busiest link's bytes over its capacity (the larger of the
        dispatch and the combine). Balanced shares give ``all_pairs``' time."""
        g = np.asarray(groups, dtype=np.int64)
        share = np.asarray(share, dtype=float)
        k, n = g.shape
        if n < 2:
            return 0.0, 0.0
        i, j = np.nonzero(~np.eye(n, dtype=bool))
        src, dst = g[:, i].ravel(), g[:, j].ravel()
        if self.topology is None or self.routing is None:
            # every connection at the default rate: the busiest rank's connections in turn
            rate, lat = self.default
            return float(share.max()) / rate, lat
        from netcore.schedule import connection_keys

        key = ("v", src.tobytes(), dst.tobytes(), share.tobytes())
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        t = self.topology
        p = self.routing.paths(src, dst, flow_id=connection_keys(src, dst))
        cap = np.asarray(t.dlink_bw, dtype=float)
        per_entry = np.diff(p.ptr)
        worst = 0.0
        for w in (np.tile(share[j], k), np.tile(share[i], k)):  # dispatch, combine
            load = np.bincount(p.link, weights=p.weight * np.repeat(w, per_entry),
                               minlength=t.n_dlinks)
            worst = max(worst, float((load / cap).max()))
        out = (worst, float(np.max(p.latency)) if len(p.latency) else 0.0)
        if len(self._cache) > 4096:
            self._cache.clear()
        self._cache[key] = out
        return out


def ring_time(op: str, g: int, nbytes: float, rate: float, lat: float) -> float:
    """Seconds of a ring ``op`` over g ranks of ``nbytes`` (the full buffer) at ``rate`` per
    connection and ``lat`` per step."""
    if g < 2:
        return 0.0
    steps = 2 * (g - 1) if op == "all_reduce" else g - 1
    return steps * (nbytes / g / rate + lat)


# =========================================================================== the estimate
class Estimator:
    """Cheap step-time estimate of a layout (module docstring). ``topology``/``routing`` give
    the fabric; ``placement`` is packed (the training workload's default)."""

    def __init__(self, model, gpu, topology=None, routing=None, default_Bps: float = 50e9):
        self.m = get_model(model)
        self.spec0: GPUSpec = get_gpu(gpu)
        self.topology = topology
        self.net = NetRates(topology, routing, default_Bps)
        self._layers: dict = {}
        self._struct: dict = {}
        self._place: dict = {}
        self.spec = self.spec0
        self.has_scaleup = True
        if topology is not None:
            names = tuple(topology.layer_names)
            self.has_scaleup = "scaleup" in names
            if self.has_scaleup:
                su = topology.link_layer == names.index("scaleup")
                hl = su & ((topology.link_u < topology.n_hosts) |
                           (topology.link_v < topology.n_hosts))
                if hl.any():
                    fab = float(topology.link_bw[hl].min()) / 1e9
                    if fab < self.spec0.scaleup_GBps:
                        self.spec = replace(self.spec0, scaleup_GBps=fab)

    # ---------------------------------------------------------------- structure of a layout
    def _placement(self, par: ParallelConfig) -> tuple:
        """(host of every rank, rank grid, TP groups' hosts, whether TP is local) of (tp, cp,
        pp, dp, ep): no routing, cheap."""
        key = (par.tp, par.cp, par.pp, par.dp, par.ep)
        hit = self._place.get(key)
        if hit is not None:
            return hit
        n = par.n_gpus
        topo = self.topology
        n_hosts = topo.n_hosts if topo is not None else n
        hg = (np.asarray(topo.host_group) if topo is not None and topo.host_group is not None
              else np.zeros(n_hosts, np.int64))
        host = place(par, n_hosts, hg, "packed")
        grid = rank_grid(par)  # (pp, dp, cp, tp)
        T = par.tp
        tp_groups = host[grid.reshape(-1, T)]
        same = bool(np.all(hg[tp_groups] == hg[tp_groups[:, :1]]))
        dom = int(np.bincount(hg).max()) if hg.size else 1
        tp_local = (T > 1 and self.has_scaleup and same and
                    dom <= max(self.spec.scaleup_domain, T))
        self._place[key] = out = (host, grid, tp_groups, tp_local)
        return out

    def _structure(self, par: ParallelConfig) -> dict:
        """Placement-dependent facts of (tp, cp, pp, dp, ep): whether TP is local, and the
        rates of every collective kind, every group at once."""
        key = (par.tp, par.cp, par.pp, par.dp, par.ep)
        hit = self._struct.get(key)
        if hit is not None:
            return hit
        host, grid, tp_groups, tp_local = self._placement(par)
        T, C, P, D = par.tp, par.cp, par.pp, par.dp
        out = {"tp_local": tp_local}
        net = self.net
        out["dp"] = net.ring(host[grid.transpose(0, 2, 3, 1).reshape(-1, D)]) if D > 1 else None
        out["tp"] = net.ring(tp_groups) if (T > 1 and not tp_local) else None
        out["cp"] = net.ring(host[grid.transpose(0, 1, 3, 2).reshape(-1, C)]) if C > 1 else None
        if par.ep > 1:
            gg = grid.transpose(0, 2, 3, 1).reshape(-1, D // par.ep, par.ep).reshape(-1, par.ep)
            out["ep"] = net.all_pairs(host[gg])
            if self.m.experts and self.m.expert_imbalance is not None:
                out["ep_v"] = net.all_pairs_v(host[gg], ep_rank_shares(self.m, par.ep))
        else:
            out["ep"] = None
        if P > 1:
            # every stage sends to the next at once (steady state): stage s -> s + 1
            out["pp"] = net.pairs(host[grid[:-1]].ravel(), host[grid[1:]].ravel())
        else:
            out["pp"] = None
        self._struct[key] = out
        return out

    # ---------------------------------------------------------------- per-layer pricing
    def _layer_prices(self, par: ParallelConfig, st: dict) -> dict:
        key = (par.tp, par.cp, par.sp, par.micro_batch, par.recompute, par.ep, par.precision,
               par.flash_attention, st["tp_local"])
        hit = self._layers.get(key)
        if hit is not None:
            return hit
        # the step waits at every expert all-to-all for the most loaded EP rank: price that
        # rank's expert GEMMs (EP rank 0 was priced, the coldest of a shuffled Zipf or of
        # shares whose hot expert sits elsewhere: 2.3 % below the compute-only critical path)
        hot = self._hot_rank(par)
        lm = LayerModel(self.m, par, self.spec, st["tp_local"], hot)
        # dense first layers (DeepSeek-V3) are priced as dense layers, as the step generator
        # builds them (every layer was an expert layer: on one pipeline stage the lower bound
        # was 6-9 % above the compute-only critical path of a 5-layer model with 2 dense ones)
        fwd = lm.forward(True)
        bwd = lm.backward(fwd)
        fwd_d = lm.forward(False)
        bwd_d = lm.backward(fwd_d)
        head = lm.head()
        head_b = [it for it in lm.backward(head) if it.label != "recompute"]
        emb = lm.embedding()

        def price(items):
            busy = sum(it.seconds for it in items if it.kind in (COMPUTE, COMM_LOCAL))
            net = [(it.group, it.op, it.nbytes) for it in items if it.kind == COMM_NET]
            return busy, net

        out = {"layer": (price(fwd), price(bwd)), "dense": (price(fwd_d), price(bwd_d)),
               "head": price(head)[0] + price(head_b)[0],
               "head_net": price(head)[1] + price(head_b)[1],
               "emb": 3.0 * emb.seconds, "lm": lm}
        self._layers[key] = out
        return out

    def _hot_rank(self, par: ParallelConfig) -> int:
        """The EP rank whose experts receive the most tokens (0 when balanced)."""
        m = self.m
        if not m.experts or m.expert_imbalance is None or par.ep < 2:
            return 0
        return int(np.argmax(ep_rank_shares(m, par.ep)))

    def _net_seconds(self, items, par, st) -> dict:
        out: dict = {}
        for group, op, nbytes in items:
            rl = st.get(group)
            if rl is None:
                continue
            rate, lat = rl
            g = {"tp": par.tp, "cp": par.cp, "ep": par.ep}[group]
            if group == "ep" and st.get("ep_v") is not None:
                # an imbalanced all-to-all-v: its busiest link's bytes over the capacity (it
                # was priced as balanced, while the most loaded rank receives and sends back
                # its share of every peer's buffer: 3.4x too fast for 8 ranks at Zipf 1.2)
                spb, lat = st["ep_v"]
                t = nbytes * spb + lat
            elif group == "ep":
                # every rank sends nbytes/g to each of the g-1 others at once; ``rate`` is
                # per connection, with the g-1 connections sharing a link already counted
                t = nbytes / g / rate + lat
            else:
                # a CP all-gather moves the whole gathered buffer's (g-1)/g per rank
                t = ring_time(op, g, nbytes, rate, lat)
            out[group] = out.get(group, 0.0) + t
        return out

    def tp_local(self, par: ParallelConfig) -> bool:
        """Whether the layout's tensor parallelism stays inside a scale-up domain and is priced
        there (analytically), as the step generator's ``tp_comm = "auto"`` decides."""
        return self._placement(par)[3]

    def lower_bound(self, par: ParallelConfig) -> float:
        """The estimated step time with every network term left out (no routing): no
        layout's ``estimate(par).step_time_s`` is below it, since each network term only
        adds time (``estimate_top``)."""
        return self.estimate(par, network=False).step_time_s

    def estimate(self, par: ParallelConfig, network: bool = True) -> Estimate:
        m = self.m
        st = self._structure(par) if network else {"tp_local": self.tp_local(par)}
        pr = self._layer_prices(par, st)
        P, V, M = par.pp, par.vp, par.micro_batches
        lay = layer_split(m, par)
        # dense and expert layers of every position (the first dense_layers are dense)
        off = np.concatenate([[0], np.cumsum(lay)])
        n_dense = (np.clip(m.dense_layers - off[:-1], 0, lay) if m.experts
                   else np.asarray(lay))
        n_moe = np.asarray(lay) - n_dense
        kinds = []  # (layers per position, forward busy, backward busy, fwd net, bwd net)
        for n_k, key in ((n_moe, "layer"), (n_dense, "dense")):
            (f_busy, f_net), (b_busy, b_net) = pr[key]
            kinds.append((n_k, f_busy, b_busy, self._net_seconds(f_net, par, st),
                          self._net_seconds(b_net, par, st)))
        head_n = self._net_seconds(pr["head_net"], par, st)
        stage = np.zeros(P)
        b_pos = np.zeros(len(lay))  # backward of one micro-batch on every position
        for n_k, f_busy, b_busy, f_n, b_n in kinds:
            per_layer = f_busy + b_busy + sum(f_n.values()) + sum(b_n.values())
            np.add.at(stage, np.arange(len(lay)) % P, n_k * per_layer)
            b_pos += n_k * (b_busy + sum(b_n.values()))
        stage[0] += pr["emb"]
        stage[-1] += pr["head"] + sum(head_n.values())
        # point-to-point: the activation of one micro-batch, scatter/gather over TP
        act = par.micro_batch * (m.seq // par.cp) * m.hidden * 2 / par.tp
        t_send = 0.0
        if st.get("pp") is not None:
            rate, lat = st["pp"]
            t_send = act / rate + lat
        t_max = float(stage.max())
        bubble = (float(stage.sum()) - t_max) / V
        pipe = M * t_max + bubble + 2 * (P * V - 1) * t_send
        # data parallel: gradients reduced in buckets behind the last micro-batch's backward
        # the busiest stage's parameters (cached per tp, pp, vp, ep: the same figures as
        # memory.params_per_stage, which depends on nothing else here)
        n_local = float(_stage_params(m, par.pp, par.vp, par.tp, par.ep)[1].max())
        exposed = {}
        for n_k, _, _, f_n, b_n in kinds:
            for k in set(f_n) | set(b_n):
                exposed[k] = exposed.get(k, 0.0) + \
                    (f_n.get(k, 0.0) + b_n.get(k, 0.0)) * float(n_k.sum()) / P * M
        if t_send:
            exposed["pp"] = 2 * (P * V - 1) * t_send
        lm = pr["lm"]
        opt_params = n_local / (par.dp if par.dist_opt else 1)
        opt_s = lm.optimizer_seconds(opt_params)
        dp_s = ag_s = 0.0
        if st.get("dp") is not None:
            rate, lat = st["dp"]
            D = par.dp
            grads = n_local * par.grad_bytes
            nb = max(1, math.ceil(grads / (par.bucket_mb * 1e6)))
            op = "reduce_scatter" if par.dist_opt else "all_reduce"
            t_dp = nb * ring_time(op, D, grads / nb, rate, lat)
            # what the backward of the last micro-batch of every chunk hides
            b_stage = float(b_pos.max()) * V
            window = (b_stage / V) * (1 + (V - 1) * min(P, M))
            if not par.overlap_grad_reduce:
                window = 0.0
            dp_s = max(t_dp - window, t_dp / nb)
            exposed["dp"] = dp_s
            if par.dist_opt:
                ag_s = ring_time("all_gather", D, n_local * 2, rate, lat)
                exposed["dp_ag"] = ag_s
        step = pipe + dp_s + opt_s + ag_s
        tokens = par.global_batch * m.seq
        peak = self.spec0.peak_flops(par.precision) * par.n_gpus
        mfu = par.global_batch * m.model_flops_per_sequence() / (step * peak) if step > 0 else 0.0
        return Estimate(step, M * t_max, bubble, exposed, opt_s, mfu,
                        tokens / step if step > 0 else 0.0)


def objective_key(objective: str):
    """Sort key (smaller is better) of an objective over (step_time_s, mfu, tokens_per_s)."""
    if objective not in OBJECTIVES:
        raise InputError(f"objective = {objective!r}: expected one of {', '.join(OBJECTIVES)}")
    if objective == "step_time":
        return lambda step, mfu, tps: step
    if objective == "mfu":
        return lambda step, mfu, tps: -mfu
    return lambda step, mfu, tps: -tps


def choose(cands: list, n: int, objective: str = "step_time") -> list:
    """The candidates to simulate: the best-estimated layout of each shape (TP, CP, PP, EP,
    VP, micro-batch) in estimate order until ``n`` are chosen, then every feasible reference
    layout. ``cands`` must carry their estimates."""
    key = objective_key(objective)
    order = sorted(cands, key=lambda c: key(c.estimate.step_time_s, c.estimate.mfu,
                                            c.estimate.tokens_per_s))
    out, shapes = [], set()
    for c in order:
        if len(out) >= n:
            break
        if c.layout.shape in shapes:
            continue
        shapes.add(c.layout.shape)
        out.append(c)
    if len(out) < n:  # fewer shapes than n: fill with the next best of any shape
        chosen = {id(c) for c in out}
        out += [c for c in order if id(c) not in chosen][:n - len(out)]
    chosen = {id(c) for c in out}
    out += [c for c in order if c.reference and id(c) not in chosen]
    return out


def estimate_top(cands: list, est: Estimator, n: int, objective: str = "step_time") -> list:
    """Estimate just enough of ``cands`` for ``choose(cands, n, objective)``: the same choice
    as estimating every candidate, with most of the fabric routing skipped.

    Every candidate gets the cheap ``lower_bound`` (no routing); then, in lower-bound order,
    full estimates until the next lower bound exceeds the n-th best step time among the
    shapes estimated so far: no candidate left can then enter the choice (its estimate is at
    least its lower bound). References are estimated too (``choose`` adds them). Returns
    the estimated candidates in their original order; the others keep ``estimate = None``.
    At a fixed GPU count and global batch every objective orders layouts by step time.
    """
    objective_key(objective)  # a bad objective is refused here too
    lb = np.array([est.lower_bound(c.par) for c in cands])
    best: dict = {}  # shape -> best estimated step time
    for i in np.argsort(lb, kind="stable"):
        if len(best) >= n:
            bound = sorted(best.values())[n - 1]
            if lb[i] > bound * (1 + 1e-9):
                break
        c = cands[i]
        c.estimate = est.estimate(c.par)
        t = c.estimate.step_time_s
        if t < best.get(c.layout.shape, math.inf):
            best[c.layout.shape] = t
    for c in cands:
        if c.reference and c.estimate is None:
            c.estimate = est.estimate(c.par)
    return [c for c in cands if c.estimate is not None]


def validate_layout(model, par: ParallelConfig, n_gpus: int) -> ParallelConfig:
    """``compute.parallel.validate`` (the guard a simulated layout passes again)."""
    return validate(get_model(model), par, n_gpus)


__all__ = ["Candidate", "Enumeration", "Estimate", "Estimator", "LAYOUT_FIELDS", "Layout",
           "NetRates", "OBJECTIVES", "REASONS", "REFERENCES", "SEARCHED", "check_fixed",
           "choose", "divisors", "enumerate_layouts", "estimate_top", "objective_key",
           "ring_time"]
