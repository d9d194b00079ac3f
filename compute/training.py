"""Training-step generator: a model and a parallel configuration become one Schedule.

Every simulated GPU has a compute stream, expressed as a dependency chain of nodes in 1F1B
order (``compute.pipeline``); communication runs beside it as transfers (pipeline send/recv,
data-parallel buckets, context/expert collectives, and tensor-parallel collectives when they go
onto the network) that depend on the chain node producing the data and that the consuming chain
node depends on. Tensor-parallel collectives inside a scale-up domain are priced analytically
(``layers.ring_seconds``) as a blocking step of the stream, as Megatron-LM runs them.

Symmetry (``symmetry="auto"``, fabric and faults symmetric): the compute chains of one data-
parallel replica (one expert group with EP) are simulated; with analytic tensor parallelism, one
GPU per tensor-parallel group carries the chain. All network traffic of every GPU is still
generated (pipeline and data-parallel transfers of the other replicas depend on the
representative's chain), so the fabric sees the full load. ``meta["symmetry"]`` says what was done.

Node side data (``Schedule.extra``): ``rank`` (global rank the node belongs to; for transfers the
sender), ``ckind`` (layers.CKIND), ``stream`` (0 compute, 1 communication), ``flops`` (per node),
``mult`` (how many GPUs the node stands for), ``tp_s`` (seconds of analytic tensor-parallel
communication inside a node).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from compute import comm, pair_classes, pipeline
from compute.hardware import GPUSpec, get_gpu
from compute.layers import (CKIND, CKIND_NAMES, COMM_LOCAL, COMM_NET, COMPUTE, Item, LayerModel,
                            ep_rank_shares)
from compute.model import get_model
from compute.parallel import ParallelConfig, layer_split, place, rank_grid, validate
from collectives.streams import stream_of
from netcore.members import SetBuilder
from netcore.schedule import BYTES_SHORT, DELAY, TRANSFER, Schedule, connection_keys
from netcore.schedule import COMPUTE as K_COMPUTE
from topo.errors import InputError, is_finite
from topo.arrays import union1d, unique

GRANULARITIES = ("op", "segment", "coarse")


# ====================================================================== node accumulation
class _Acc:
    """Columnar node store; Python work per batch of nodes, never per node."""
    COLS = ("kind", "src", "dst", "size", "duration", "tag", "label", "rank", "ckind", "stream",
            "flops", "mult", "tp_s", "mset", "steps", "short")

    def __init__(self):
        self.cols = {k: [] for k in self.COLS}
        self.ech, self.epa = [], []
        self.labels: list[str] = []
        self.n = 0
        self.sets = SetBuilder()  # member sets of aggregated transfers (network_detail auto)

    def lab(self, name: str) -> int:
        if name not in self.labels:
            self.labels.append(name)
        return self.labels.index(name)

    DEFAULTS = {"dst": -1, "tag": -1, "size": 0, "duration": 0.0, "flops": 0.0, "mult": 1.0,
                "tp_s": 0.0, "stream": 0, "mset": -1, "steps": 1, "short": 0}

    def add(self, k: int, **c) -> np.ndarray:
        # called once per stamped stream (hundreds of thousands of times in a large MoE
        # step): a scalar column is filled with np.full, which costs a fraction of
        # broadcast_to + copy
        for name in self.COLS:
            v = c.get(name, self.DEFAULTS.get(name))
            if v is None:
                raise KeyError(name)
            a = np.asarray(v)
            if a.shape == (k,):
                self.cols[name].append(a)
            elif a.ndim == 0:
                self.cols[name].append(np.full(k, a))
            else:
                self.cols[name].append(np.broadcast_to(a, (k,)).copy())
        ids = np.arange(self.n, self.n + k, dtype=np.int64)
        self.n += k
        return ids

    def edges(self, child, parent):
        child, parent = np.broadcast_arrays(np.asarray(child, np.int64), np.asarray(parent, np.int64))
        ok = parent.ravel() >= 0
        self.ech.append(child.ravel()[ok])
        self.epa.append(parent.ravel()[ok])

    def build(self, meta: dict) -> Schedule:
        col = {k: np.concatenate(v) if v else np.zeros(0) for k, v in self.cols.items()}
        ch = np.concatenate(self.ech) if self.ech else np.zeros(0, np.int64)
        pa = np.concatenate(self.epa) if self.epa else np.zeros(0, np.int64)
        # drop duplicate edges, then CSR by child
        key = unique(ch * self.n + pa)
        ch, pa = key // max(self.n, 1), key % max(self.n, 1)
        ptr = np.zeros(self.n + 1, dtype=np.int64)
        np.add.at(ptr, ch + 1, 1)
        np.cumsum(ptr, out=ptr)
        extra = {"rank": col["rank"].astype(np.int64), "ckind": col["ckind"].astype(np.int8),
                 "stream": col["stream"].astype(np.int8), "flops": col["flops"].astype(np.float64),
                 "mult": col["mult"].astype(np.float64), "tp_s": col["tp_s"].astype(np.float64)}
        if len(col["short"]) and col["short"].any():  # streams whose members carry unequal bytes
            extra[BYTES_SHORT] = col["short"].astype(np.int64)
        # every transfer of a step is collective traffic on a persistent connection: routing
        # hashes the connection (netcore.schedule.connection_keys), in both detail levels
        conn = np.where(col["kind"] == TRANSFER, connection_keys(col["src"], col["dst"]), -1)
        return Schedule(kind=col["kind"], src=col["src"], dst=col["dst"], size=col["size"],
                        duration=col["duration"], start=np.zeros(self.n), dep_ptr=ptr, dep_idx=pa,
                        tag=col["tag"], label=col["label"], labels=self.labels or ["compute"],
                        extra=extra, meta=meta, mset=col["mset"], steps=col["steps"],
                        sets=self.sets.build() if len(self.sets) else None, conn=conn)


def _distinct_incidences(nodes: np.ndarray, cls: np.ndarray, pos: np.ndarray):
    """The (class, endpoint position) incidences of a block of class nodes, one per (class,
    chain node) where every row of ``nodes`` (rows, positions) holds equal chain nodes wherever
    its first row does; all of them otherwise. In the scalable form the endpoints of a run of
    copies share a few chain nodes: on 65,536 GPUs the MoE step's class edges were 97 M, 46 of
    every 47 repeats (the schedule keeps each edge once, after sorting them all)."""
    _, first, inv = np.unique(nodes[0], return_index=True, return_inverse=True)
    rep = first[inv]  # first position of each position's chain node on the first row
    if not (nodes == nodes[:, rep]).all():
        return cls, pos
    P = np.int64(nodes.shape[1])
    key = unique(cls * P + rep[pos])
    return key // P, key % P


# ====================================================================== unit templates
class _Template:
    """Chain items of one unit (forward or backward of one model chunk), as arrays."""

    def __init__(self, items: list[Item], acc: _Acc):
        self.n = len(items)
        self.kind = np.array([it.kind for it in items], dtype=np.int8)
        self.seconds = np.array([it.seconds for it in items])
        self.flops = np.array([it.flops for it in items])
        self.tp_s = np.array([it.tp_s for it in items])
        self.label = np.array([acc.lab("comm:" + it.group + ":" + it.op if it.kind != COMPUTE
                                       else "compute:" + it.label) for it in items], np.int16)
        self.ckind = np.array([CKIND[it.group] if it.kind != COMPUTE else 0 for it in items], np.int8)
        self.layer_end = np.array([it.layer_end for it in items], dtype=np.int64)
        self.items = items


def _merge(items: list[Item], granularity: str, keep_layers: bool) -> list[Item]:
    """Fuse neighbouring items into one node: ``segment`` fuses compute ops between two
    communication points, ``coarse`` also fuses analytic tensor-parallel steps (their seconds
    stay visible in ``tp_s``). Network collectives and (when kept) layer ends stay boundaries."""
    if granularity == "op":
        return items
    fusable = (COMPUTE,) if granularity == "segment" else (COMPUTE, COMM_LOCAL)
    out: list[Item] = []
    for it in items:
        prev = out[-1] if out else None
        if (prev is not None and it.kind in fusable and prev.kind in fusable
                and not (keep_layers and prev.layer_end >= 0)):
            kind = COMPUTE if COMPUTE in (prev.kind, it.kind) else COMM_LOCAL
            labels = {x.label for x in (prev, it) if x.kind == COMPUTE}
            label = labels.pop() if len(labels) == 1 else ("bwd" if "bwd" in labels else "fwd")
            out[-1] = Item(kind, prev.seconds + it.seconds, prev.flops + it.flops,
                           label if kind == COMPUTE else "tp", group="tp" if kind == COMM_LOCAL else "",
                           op=prev.op or it.op, layer_end=it.layer_end, tp_s=prev.tp_s + it.tp_s)
        else:
            out.append(it)
    return out


# ====================================================================== faults
def fault_args(topology, faults) -> dict:
    """``build_step``'s keyword arguments for the link faults ``faults`` (LinkFaults or None):
    that there are faults, the hosts at a link with a fault event, and whether a scale-up link
    has one -- what it needs to keep analytic tensor parallelism and symmetry where faults do
    not reach. Empty without faults."""
    if faults is None or not len(faults):
        return {}
    d = np.asarray(faults.dlink, dtype=np.int64)
    ends = np.concatenate([topology.dlink_src[d], topology.dlink_dst[d]]).astype(np.int64)
    layers = tuple(topology.layer_names)
    # directed links 2i and 2i + 1 are physical link i
    su = np.zeros(len(d), dtype=bool)
    if "scaleup" in layers:
        su = topology.link_layer[d // 2] == layers.index("scaleup")
    # the hosts at the faulted scale-up links (-1 for a scale-up link between switches, which
    # any group's tensor-parallel traffic may cross)
    a, b = topology.dlink_src[d[su]].astype(np.int64), topology.dlink_dst[d[su]].astype(np.int64)
    n = topology.n_hosts
    su_hosts = np.where(a < n, a, np.where(b < n, b, -1))
    return {"faults": True, "fault_hosts": unique(ends[ends < topology.n_hosts]),
            "fault_scaleup": bool(su.any()), "fault_scaleup_hosts": unique(su_hosts)}


def _size(nbytes):
    """A collective's payload: an integer size, or an all-to-all-v's bytes matrix (rows)."""
    return nbytes if isinstance(nbytes, tuple) else int(nbytes)


# ====================================================================== slowed GPUs
GPU_FAULT_KEYS = ("gpus", "kind", "factor", "at_us")
GPU_FAULT_KINDS = ("slow", "hbm_degrade")


def parse_gpu_faults(records, where: str = "gpu_faults") -> list[dict]:
    """Check ``gpu_faults`` records: ``gpus`` (host ids of the GPUs), ``kind`` (``slow``: the
    GPU's Tensor Core throughput at ``factor`` of its peak, a straggler; ``hbm_degrade``: its
    HBM bandwidth at ``factor``), ``factor`` in (0, 1], ``at_us`` >= 0 (default 0). Returns
    normalised records; InputError names the field."""
    if records is None:
        return []
    if not isinstance(records, list):
        raise InputError(f"{where} = {records!r}: expected an array of tables "
                         f"([[{where}]] with gpus, kind, factor)")
    out = []
    for i, rec in enumerate(records):
        at = f"{where}[{i}]"
        if not isinstance(rec, dict):
            raise InputError(f"{at} = {rec!r}: expected a table with gpus, kind, factor")
        for k in rec:
            if k not in GPU_FAULT_KEYS:
                raise InputError(f"{at}.{k}: unknown key (allowed: {', '.join(GPU_FAULT_KEYS)})")
        for k in ("gpus", "kind", "factor"):
            if k not in rec:
                raise InputError(f"{at}.{k}: missing")
        g = rec["gpus"]
        if isinstance(g, int) and not isinstance(g, bool):
            g = [g]
        if not isinstance(g, list) or not g:
            raise InputError(f"{at}.gpus = {g!r}: expected a non-empty array of host ids")
        first = {}
        for j, h in enumerate(g):
            if isinstance(h, bool) or not isinstance(h, int) or h < 0:
                raise InputError(f"{at}.gpus[{j}] = {h!r}: expected a host id (an integer >= 0)")
            if first.setdefault(h, j) != j:  # listed twice, its factor would apply twice
                raise InputError(f"{at}.gpus[{j}] = {h}: host {h} is listed twice "
                                 f"(first at gpus[{first[h]}])")
        kind = rec["kind"]
        if kind not in GPU_FAULT_KINDS:
            raise InputError(f"{at}.kind = {kind!r}: expected one of {', '.join(GPU_FAULT_KINDS)}")
        f = rec["factor"]
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f <= 1:
            raise InputError(f"{at}.factor = {f!r}: expected the remaining fraction, in (0, 1]")
        t = rec.get("at_us", 0.0)
        if isinstance(t, bool) or not isinstance(t, (int, float)) \
                or not is_finite(t) or t < 0:
            raise InputError(f"{at}.at_us = {t!r}: expected a time >= 0 (microseconds)")
        out.append({"gpus": [int(h) for h in g], "kind": kind, "factor": float(f),
                    "at_us": float(t), "where": at})
    return out


def _gpu_timelines(records, host, n_hosts) -> dict:
    """rank -> [(time s, compute factor, HBM factor), ...] from time 0, cumulative (two faults
    on one GPU multiply)."""
    if not records:
        return {}
    recs = parse_gpu_faults(records) if not all("where" in r for r in records) else records
    rank_of = np.full(n_hosts, -1, np.int64)
    rank_of[host] = np.arange(len(host))
    ev: dict = {}
    for rec in recs:
        for j, h in enumerate(rec["gpus"]):
            if h >= n_hosts or rank_of[h] < 0:
                raise InputError(f"{rec['where']}.gpus[{j}] = {h}: host {h} runs no rank of this "
                                 f"step (hosts 0..{n_hosts - 1}; {len(host)} ranks placed)")
            ev.setdefault(int(rank_of[h]), []).append(
                (rec["at_us"] * 1e-6, rec["kind"], rec["factor"]))
    out = {}
    for r, es in ev.items():
        times = sorted({0.0} | {t for t, _, _ in es})
        out[r] = [(t, float(np.prod([f for tt, k, f in es if k == "slow" and tt <= t])),
                   float(np.prod([f for tt, k, f in es if k == "hbm_degrade" and tt <= t])))
                  for t in times]
    return out


HEALTHY = (0, ())  # GPU class: EP index 0, no slowed member


def _pace(pairs) -> tuple:
    """The (compute factor, HBM factor) pairs that set the pace of a group of GPUs: its
    members' own pairs, without the healthy one and without any pair another member is at
    least as slow as in both factors (a slower spec never prices a kernel shorter), sorted;
    () is full speed. A member's compute and HBM factors act together on its kernels: the
    worst compute factor of one member and the worst HBM factor of another are not combined
    (that priced a group of one straggler and one degraded HBM as one GPU with both)."""
    ps = set(pairs) - {(1.0, 1.0)}
    return tuple(sorted(p for p in ps
                        if not any(q != p and q[0] <= p[0] and q[1] <= p[1] for q in ps)))


def _group_timelines(tls) -> list:
    """The pace of a group of GPUs (``_pace``) at every time its members' factors change."""
    times = sorted({t for tl in tls for t, _, _ in tl})

    def at(tl, t):
        cur = (1.0, 1.0)
        for tt, cf, hf in tl:
            if tt <= t:
                cur = (cf, hf)
        return cur

    out = []
    for t in times:
        pace = _pace(at(tl, t) for tl in tls)
        if not out or out[-1][1] != pace:
            out.append((t, pace))
    return out


def _slowest_member(runs: list, cuts=frozenset()) -> list:
    """One chain of items for a tensor-parallel group whose members price the same items
    (``runs``, one list per member, same structure) each with its own spec. The members meet
    at every TP collective, so between two of them the group waits for its slowest member:
    every run of items between two TP collectives is taken whole from the member that needs
    longest for it (kernel by kernel maxima, or the worst compute factor of one member with
    the worst HBM factor of another, would charge a straggler's GEMMs and a degraded HBM's
    bandwidth-bound kernels of one run to one GPU). A CP or EP collective stays inside a run:
    each member runs it with its own peers (GPUs of other TP groups), not with the group. TP
    items are every member's (a slowed GPU keeps its scale-up figures). ``cuts``: indices
    where a run is cut although no TP collective is there (a unit that waits for a pipeline
    receive)."""
    ref = runs[0]
    if len(runs) == 1:
        return ref
    assert all(len(r) == len(ref) for r in runs), "a member changes the chain"
    out: list[Item] = []
    i = 0
    while i < len(ref):
        if ref[i].group == "tp":
            out.append(ref[i])
            i += 1
            continue
        j = i + 1
        while j < len(ref) and ref[j].group != "tp" and j not in cuts:
            j += 1
        k = max(range(len(runs)), key=lambda x: sum(it.seconds for it in runs[x][i:j]))
        out += runs[k][i:j]
        i = j
    return out


def _slowed(spec: GPUSpec, cf: float, hf: float) -> GPUSpec:
    """The spec of a GPU at ``cf`` of its Tensor Core peaks and ``hf`` of its HBM bandwidth."""
    return replace(spec, peak_tflops_fp16=spec.peak_tflops_fp16 * cf,
                   peak_tflops_bf16=spec.peak_tflops_bf16 * cf,
                   peak_tflops_fp8=spec.peak_tflops_fp8 * cf, hbm_GBps=spec.hbm_GBps * hf)


# ====================================================================== the generator
def _with_switches(hosts, groups, sw):
    """Endpoints and ranks of a stamped template: the group's hosts, then (in-network
    collectives) its switches, whose nodes belong to no rank (-1)."""
    if sw is None:
        return hosts, groups
    return (np.concatenate([hosts, sw], axis=1),
            np.concatenate([groups, np.full(sw.shape, -1, dtype=groups.dtype)], axis=1))


def _whole_runs(rows: np.ndarray, fold: int) -> bool:
    """Whether ``rows`` (ascending) are whole runs of ``fold`` consecutive rows, each starting
    at a multiple of ``fold``: the copies of one collective at one time, which a subset of the
    rows (an in-network collective's groups of one tree shape) keeps together only then."""
    if fold <= 1 or len(rows) % fold:
        return False
    r = np.asarray(rows).reshape(-1, fold)
    return bool((r[:, 0] % fold == 0).all() and (np.diff(r, axis=1) == 1).all())


def _distinct_copies(a: np.ndarray) -> np.ndarray:
    """``a`` (instances, copies, g) of chain node ids, sorted along the copies, with each node
    kept once per instance and rank and its repeats set to -1 (which no edge takes)."""
    a = np.sort(a, axis=1)
    a[:, 1:, :][a[:, 1:, :] == a[:, :-1, :]] = -1
    return a


def build_step(model, parallel, gpu, topology=None, *, n_hosts: int | None = None,
               host_group=None, placement="packed", tp_comm: str = "auto",
               symmetry: str = "auto", granularity: str = "segment", faults: bool = False,
               algorithm: str | dict | None = None, network_detail: str = "full",
               fault_hosts=None, fault_scaleup: bool | None = None,
               fault_scaleup_hosts=None, gpu_faults=None) -> Schedule:
    """One training step as a Schedule (see the module docstring).

    ``model``: TransformerConfig, preset name or table; ``parallel``: ParallelConfig or table;
    ``gpu``: GPU name, table or GPUSpec; ``topology`` (or ``n_hosts``/``host_group``) gives the
    hosts ranks are placed on. ``tp_comm``: auto | local | network; ``symmetry``: auto | none;
    ``granularity``: op | segment | coarse; ``faults``: whether the fabric has faults (symmetry
    and analytic tensor parallelism are then off under auto); ``algorithm``: collective
    algorithm for network collectives, one name or ``{op: name}`` (``comm.algorithms``;
    default ring, direct for all-to-all). ``network_detail``: ``full`` generates every
    point-to-point transfer; ``auto`` the scalable form (docs/scale.md): a ring collective as one
    stream over all its groups, an all-to-all one transfer per class of pairs over all groups
    (compute/pair_classes.py), any other collective one transfer per template step over all
    groups, a pipeline send as one transfer over every replica that makes it.
    ``fault_hosts`` (hosts at a link with a fault event) and ``fault_scaleup`` (a fault on a
    scale-up link) say where the faults are: tensor parallelism stays analytic unless a
    scale-up link has a fault (``fault_scaleup_hosts``, the hosts at the faulted scale-up
    links, -1 for one between switches: only a fault at a host that runs a rank, or between
    switches, counts), and under ``auto`` only the data-parallel replicas holding a
    faulted host (whole expert groups) are simulated on their own, the rest stay folded onto a
    representative (faults elsewhere are handled by the engine, netcore/flow/fault_split.py).
    Without them, ``faults`` turns symmetry and analytic tensor parallelism off, as before.
    ``gpu_faults``: slowed GPUs (``parse_gpu_faults``); the replica (expert group) holding one
    is simulated on its own, the others stay folded.
    """
    m = get_model(model)
    par = parallel if isinstance(parallel, ParallelConfig) else ParallelConfig.from_dict(dict(parallel))
    spec: GPUSpec = get_gpu(gpu)
    if topology is not None:
        n_hosts, host_group = topology.n_hosts, topology.host_group
    if not isinstance(granularity, str) or granularity not in GRANULARITIES:
        raise InputError(f"granularity = {granularity!r}: expected one of {', '.join(GRANULARITIES)}")
    if not isinstance(tp_comm, str) or tp_comm not in ("auto", "local", "network"):
        raise InputError(f"tp_comm = {tp_comm!r}: expected auto, local or network")
    if not isinstance(symmetry, str) or symmetry not in ("auto", "none"):
        raise InputError(f"symmetry = {symmetry!r}: expected auto or none")
    if not isinstance(network_detail, str) or network_detail not in ("auto", "full"):
        raise InputError(f"network_detail = {network_detail!r}: expected auto or full")
    agg = network_detail == "auto"
    # all-to-all pairs fall into classes only where hosts have groups (compute/pair_classes.py)
    grouped = topology is not None and pair_classes.has_groups(topology.host_group)
    algos = comm.algorithms(algorithm)  # checked before anything is built
    n_gpus = None
    if n_hosts is None:
        par = validate(m, par)
        n_hosts = par.n_gpus
    else:
        n_gpus = par.n_gpus if par.dp else n_hosts
        par = validate(m, par, n_gpus)
    if not getattr(spec, f"peak_tflops_{par.precision}") > 0:  # a precision the GPU lacks
        raise InputError(f"parallel.precision = {par.precision!r}: GPU {spec.name} has no "
                         f"{par.precision} Tensor Core peak (peak_tflops_{par.precision} = "
                         f"{getattr(spec, f'peak_tflops_{par.precision}')})")
    host = place(par, n_hosts, host_group, placement)
    grid = rank_grid(par)  # (pp, dp, cp, tp)
    P, D, C, T = par.pp, par.dp, par.cp, par.tp
    V, M = par.vp, par.micro_batches

    # ---- tensor-parallel pricing and symmetry decisions
    hg = np.zeros(n_hosts, np.int64) if host_group is None else np.asarray(host_group)
    tp_groups = host[grid.reshape(-1, T)]
    same_domain = bool(np.all(hg[tp_groups] == hg[tp_groups[:, :1]]))
    dom_size = int(np.bincount(hg).max())
    # a fabric description without a "scaleup" layer has no NVLink-class domain to price in
    has_scaleup = topology is None or "scaleup" in tuple(topology.layer_names)
    fabric_su = None  # GB/s per direction of the fabric's slowest GPU scale-up link
    if topology is not None and has_scaleup:
        # the GPU cannot beat its own scale-up ports, nor the links the fabric gives it
        su = topology.link_layer == topology.layer_names.index("scaleup")
        hl = su & ((topology.link_u < topology.n_hosts) | (topology.link_v < topology.n_hosts))
        if hl.any():
            fab = fabric_su = float(topology.link_bw[hl].min()) / 1e9
            if fab < spec.scaleup_GBps:
                from dataclasses import replace as _r
                spec = _r(spec, scaleup_GBps=fab)
    located = faults and fault_hosts is not None and fault_scaleup is not None
    tp_fault = bool(fault_scaleup) if located else faults
    if tp_fault and located and fault_scaleup_hosts is not None:
        # a scale-up link of a host that runs no rank carries no traffic of this step: a
        # fault there must not turn tensor parallelism onto the network for the whole job
        # (two_tier 4 x 2, a job on nodes 0-1, a scale-up link of node 2 down changed the
        # step by -5.3 %, 3.796 -> 3.596 ms, as local TP became network TP)
        suh = np.asarray(fault_scaleup_hosts, dtype=np.int64)
        tp_fault = bool((suh < 0).any() or np.isin(suh, host).any())
    if tp_comm == "auto":
        tp_local = (T > 1 and has_scaleup and same_domain and
                    dom_size <= max(spec.scaleup_domain, T) and not tp_fault)
    else:
        tp_local = tp_comm == "local" and T > 1
    pp_i, dp_i, cp_i, tp_i = np.unravel_index(np.arange(par.n_gpus), grid.shape)
    # ---- slowed GPUs (gpu_faults): per rank, (time, compute factor, HBM factor) steps
    timeline = _gpu_timelines(gpu_faults, host, n_hosts)
    faulty = np.array(sorted(timeline), dtype=np.int64)
    # data-parallel indices simulated: one replica per expert group (the first expert group
    # without a slowed GPU or a GPU at a faulted link) stands for the others; an expert group
    # holding such a GPU is simulated on its own (all its stages), so the fault breaks the
    # symmetry only there. Link faults fold this way under network_detail auto when their
    # place is known; otherwise they unfold every replica (the reference form).
    ep = par.ep
    n_grp = D // ep
    link_fold = located and agg and symmetry == "auto"
    sym = symmetry == "auto" and (not faults or link_fold)
    bad_grp = unique(dp_i[faulty] // ep) if faulty.size else np.zeros(0, np.int64)
    gpu_grp, link_grp = bad_grp, np.zeros(0, np.int64)  # groups with a slowed GPU / a link fault
    if link_fold:
        rank_of = np.full(n_hosts, -1, dtype=np.int64)
        rank_of[host] = np.arange(par.n_gpus)
        hit = rank_of[np.asarray(fault_hosts, dtype=np.int64)]
        link_grp = unique(dp_i[hit[hit >= 0]] // ep)
        bad_grp = union1d(bad_grp, link_grp)
    good = np.setdiff1d(np.arange(n_grp), bad_grp)
    if sym and good.size:
        rep_dp = good[0] * ep + np.arange(D) % ep
        for gi in bad_grp:
            rep_dp[gi * ep:(gi + 1) * ep] = np.arange(gi * ep, (gi + 1) * ep)
    else:
        sym = False
        rep_dp = np.arange(D)
    d_sim = unique(rep_dp)
    t_sim = np.arange(1 if (tp_local and sym) else T)
    simulated = np.zeros(par.n_gpus, bool)
    simulated[grid[:, d_sim][:, :, :, t_sim].ravel()] = True
    # representative of every rank: same (pp, cp), dp folded into its expert group's replica,
    # tp folded onto 0 when one GPU carries the tensor-parallel group
    rep = grid[pp_i, rep_dp[dp_i], cp_i, tp_i if len(t_sim) == T else 0]
    mult_rank = np.bincount(rep, minlength=par.n_gpus).astype(float)
    # with analytic (local) tensor parallelism a tensor-parallel group runs at the pace of its
    # slowest member (it synchronises on its collectives every layer): every member's chain,
    # or the one GPU carrying the group's chain, gets the group's pace (``_group_timelines``:
    # each member with its own compute and HBM factors, the slowest one between two
    # collectives, as network TP gives it); network tensor parallelism synchronises through
    # its transfers, so only the slowed GPU's own chain changes
    by_group: dict = {}
    for r in faulty.tolist():
        by_group.setdefault(r // T if tp_local else r, []).append(timeline[r])
    steps_of, pace_of = {}, {}
    for key, tls in by_group.items():
        merged = _group_timelines(tls)
        for r in (range(key * T, key * T + T) if tp_local else (key,)):
            pace_of[r] = merged
            if simulated[r]:
                steps_of[r] = merged

    # timing key of every rank (compute/pair_classes.py): ranks with one key run identical
    # chains and reach a collective together. An expert imbalance keys ranks by the load of
    # their place in the expert group (equal loads price their layers alike: Zipf 0 gives one
    # key); every rank of an expert group simulated on its own for a fault at one of its hosts
    # and, with faults not located, every rank gets its own key
    imbalanced = bool(m.experts) and m.expert_imbalance is not None and ep > 1
    tkey = np.zeros(par.n_gpus, np.int64)
    if imbalanced:
        load_key = np.unique(ep_rank_shares(m, ep), return_inverse=True)[1]
        tkey = load_key.astype(np.int64)[dp_i % ep]
    # a rank of an expert group that holds only slowed GPUs (no link fault there) is keyed by
    # its load and the pace its chain is priced at (``pace_of``): such ranks still run
    # identical chains and meet at the same collectives. Keying each of them apart gave a step
    # with every GPU slowed alike a form other than the same GPU as a what-if spec (+0.38 %
    # on a Zipf 1.2 MoE, EP 2, PP 2: 2.6030 against 2.5932 ms; full form 2.5881)
    unlocated = bool(faults and not link_fold)
    grp = dp_i // ep
    own = np.isin(grp, bad_grp) | unlocated
    paced = np.isin(grp, gpu_grp) & ~np.isin(grp, link_grp) & (not unlocated)
    tkey[own & ~paced] = ep + np.flatnonzero(own & ~paced)
    if paced.any():
        pace_id = np.zeros(par.n_gpus, np.int64)  # 0: full speed
        distinct: dict = {}
        for r, tl in pace_of.items():
            pace_id[r] = distinct.setdefault(tuple(tl), len(distinct) + 1)
        ranks = np.flatnonzero(paced)
        pair = tkey[ranks] * (len(distinct) + 1) + pace_id[ranks]
        tkey[ranks] = ep + par.n_gpus + np.unique(pair, return_inverse=True)[1]

    acc = _Acc()
    lay = layer_split(m, par)  # transformer layers of every pipeline position
    off = np.concatenate([[0], np.cumsum(lay)])  # first layer of every position
    npos = P * V

    # ---- GPU classes: (EP index, pace); the pace (``_pace``) is the (compute factor, HBM
    # factor) pairs of the slowed GPUs whose chain it prices (several: the members of a local
    # TP group). Every class prices the layers with its own specs and expert load, with the
    # same chain structure
    lms: dict = {}

    def lm_of(e, cf=1.0, hf=1.0):
        """Layer model of one GPU at EP index ``e`` and factors (cf, hf)."""
        key = (e, cf, hf)
        if key not in lms:
            sp = spec if cf == 1 and hf == 1 else _slowed(spec, cf, hf)
            lm_ = LayerModel(m, par, sp, tp_local, e)
            fwd = {moe: lm_.forward(moe) for moe in {False, bool(m.experts)}}
            lms[key] = (lm_, fwd, {k: lm_.backward(v) for k, v in fwd.items()})
        return lms[key]

    def members(cls):
        """The layer models of a class's GPUs (one healthy GPU when it has no slowed one)."""
        e, pace = cls
        return [lm_of(e, cf, hf) for cf, hf in (pace or ((1.0, 1.0),))]

    def opt_params(s):
        """Parameters the optimizer of a GPU of stage s steps (its shard with dist_opt)."""
        n_local = (sum(m.layers_params(off[ck * P + s], off[ck * P + s + 1], ep)
                       for ck in range(V)) + m.embedding_params
                   * ((s == 0) + (s == P - 1 and (P > 1 or not m.tied_embeddings)))) / T
        return n_local / D if par.dist_opt else n_local

    lm = lm_of(0)[0]

    ops_cache: dict = {}

    def unit_ops(phase, first, last, Lc, n_dense, e=0, cf=1.0, hf=1.0):
        """One unit's items kernel by kernel on one GPU (EP index e, factors cf, hf)."""
        key = (phase, first, last, Lc, n_dense, e, cf, hf)
        if key not in ops_cache:
            ops_cache[key] = _unit_ops(phase, first, last, Lc, n_dense, lm_of(e, cf, hf))
        return ops_cache[key]

    def _unit_ops(phase, first, last, Lc, n_dense, lm_triple):
        lm, fwd_layer, bwd_layer = lm_triple
        moe = bool(m.experts)
        items: list[Item] = []
        if phase == pipeline.FWD:
            if first:
                items.append(lm.embedding())
            for li in range(Lc):
                items += fwd_layer[moe and li >= n_dense]
            if last:
                items += lm.head()
        else:
            if last:
                hb = lm.backward(lm.head())
                items += [it for it in hb if it.label != "recompute"]
            for li in range(Lc):
                lay = list(bwd_layer[moe and Lc - 1 - li >= n_dense])
                j = max(i for i, it in enumerate(lay) if it.kind == COMPUTE)
                lay[j] = replace(lay[j], layer_end=Lc - 1 - li)
                items += lay
            if first:
                e = lm.embedding()
                items.append(Item(COMPUTE, 2 * e.seconds, 0.0, "bwd"))
        return items

    def unit_args(phase, pos):
        """unit_ops' (phase, first, last, layers, dense layers) of a unit at position pos."""
        n_dense = int(np.clip(m.dense_layers - off[pos], 0, lay[pos])) if m.experts else 0
        return (phase, pos == 0, pos == npos - 1, lay[pos], n_dense)

    tpl_cache: dict = {}

    def template(phase, pos, keep, cls=HEALTHY):
        """Template of one unit of a class of at most one slowed GPU."""
        (e, pace), args = cls, unit_args(phase, pos)
        key = (args, keep, cls)
        if key not in tpl_cache:
            assert len(pace) <= 1, "a class of several GPUs is priced chain by chain"
            tpl_cache[key] = _Template(_merge(unit_ops(*args, e, *(pace or ((1.0, 1.0),))[0]),
                                              granularity, keep), acc)
        return tpl_cache[key]

    chain_cache: dict = {}

    def chain_of(s, cls):
        """(unit templates of stage s's chain in its 1F1B order, optimizer seconds) for class
        ``cls``. A class of several slowed GPUs (the members of a local TP group, each with its
        own factors) runs at its slowest member's pace run by run (``_slowest_member``), as
        network TP, where every member has its own chain, prices it: the members meet at every
        TP collective; a run goes on from one unit into the next unless that unit waits for a
        pipeline receive (each member's comes from its own peer; cutting there measured
        closer to network TP than going on), and from the last unit into the optimizer step
        (each member steps once its own backward and data-parallel reduction are done)."""
        if (s, cls) in chain_cache:
            return chain_cache[(s, cls)]
        ph, ch, mb = orders[s]
        keys = [(int(a), int(c) * P + s, bool(a == pipeline.BWD and j == M - 1))
                for a, c, j in zip(ph, ch, mb)]
        e, pace = cls
        n_opt = opt_params(s)
        if len(pace) <= 1:
            out = ([template(a, pos, keep, cls) for a, pos, keep in keys],
                   lm_of(e, *(pace or ((1.0, 1.0),))[0])[0].optimizer_seconds(n_opt))
        else:
            args = [unit_args(a, pos) for a, pos, _ in keys]
            # the optimizer step rides at the end of every member's chain as one more item
            runs = [[it for u in args for it in unit_ops(*u, e, cf, hf)]
                    + [Item(COMPUTE, lm_of(e, cf, hf)[0].optimizer_seconds(n_opt))]
                    for cf, hf in pace]
            start = np.concatenate([[0], np.cumsum([len(unit_ops(*u, e, *pace[0]))
                                                    for u in args])])
            received = [(a == pipeline.FWD and pos > 0) or (a == pipeline.BWD and pos < npos - 1)
                        for a, pos, _ in keys]
            comb = _slowest_member(runs, cuts={int(start[i]) for i in range(1, len(keys))
                                               if received[i]})
            out = ([_Template(_merge(comb[start[i]:start[i + 1]], granularity, keys[i][2]), acc)
                    for i in range(len(keys))], comb[-1].seconds)
        chain_cache[(s, cls)] = out
        return out

    def cls_of(r, at=0):
        """Class of simulated rank r from time index ``at`` of its steps on."""
        e = int(dp_i[r] % ep) if imbalanced else 0
        st = steps_of.get(int(r))
        return (e, st[at][1] if st else ())

    # ---- per-stage chains
    orders = [pipeline.order(P, M, V, s) for s in range(P)]
    unit_of = np.full((P, 2, V, M), -1, dtype=np.int64)  # (stage, phase, chunk, mb) -> unit idx
    chains = []
    chain_base = np.full(par.n_gpus, -1, dtype=np.int64)
    later = []  # (time s, rank, per-node seconds from then on, optimizer seconds)
    for s in range(P):
        ph, ch, mb = orders[s]
        unit_of[s, ph, ch, mb] = np.arange(len(ph))
        ranks = grid[s][d_sim][:, :, t_sim].ravel()  # simulated ranks of this stage
        R = len(ranks)
        rcls = [cls_of(r) for r in ranks.tolist()]
        classes = sorted(set(rcls) | {HEALTHY})
        per_cls = {}
        for k in classes:
            tpls = chain_of(s, k)[0]
            per_cls[k] = (tpls, {f: np.concatenate([getattr(t, f) for t in tpls])
                                 for f in ("seconds", "flops", "tp_s")})
        tpls = per_cls[HEALTHY][0]
        lens = np.array([t.n for t in tpls], dtype=np.int64)
        start = np.concatenate([[0], np.cumsum(lens)])
        cat = lambda f: np.concatenate([getattr(t, f) for t in tpls])  # noqa: E731
        kind, lab, ck, lend = (cat(f) for f in ("kind", "label", "ckind", "layer_end"))
        for k in classes:  # every class must have the reference structure
            assert len(per_cls[k][1]["seconds"]) == len(kind), "class changes the chain"
        items = [it for t in tpls for it in t.items]
        Q = len(kind)
        base = acc.n
        nkind = np.where(kind == COMPUTE, K_COMPUTE, DELAY).astype(np.int8)
        unit_idx = np.repeat(np.arange(len(ph)), lens)
        ci = np.array([classes.index(k) for k in rcls], dtype=np.int64)
        col = {f: np.stack([per_cls[k][1][f] for k in classes])[ci].ravel()
               for f in ("seconds", "flops", "tp_s")}
        ids = acc.add(R * Q, kind=np.tile(nkind, R), src=np.repeat(host[ranks], Q),
                      duration=col["seconds"], tag=np.tile(mb[unit_idx], R),
                      label=np.tile(lab, R), rank=np.repeat(ranks, Q), ckind=np.tile(ck, R),
                      stream=np.tile((kind != COMPUTE).astype(np.int8), R),
                      flops=col["flops"], mult=np.repeat(mult_rank[ranks], Q),
                      tp_s=col["tp_s"])
        chain_base[ranks] = base + np.arange(R) * Q
        ids2 = ids.reshape(R, Q)
        acc.edges(ids2[:, 1:], ids2[:, :-1])
        chains.append(dict(Q=Q, start=start, lens=lens, kind=kind, layer_end=lend, items=items,
                           ph=ph, ch=ch, mb=mb))
        for r in ranks.tolist():  # slowdowns that start after time 0
            for a in range(1, len(steps_of.get(r, ()))):
                tp, opt_later = chain_of(s, cls_of(r, a))
                later.append((steps_of[r][a][0], r, np.concatenate([t.seconds for t in tp]),
                              opt_later))

    def node(ranks, q):
        """Chain node of the representative of ``ranks`` at chain position ``q``."""
        return chain_base[rep[ranks]] + q

    # ---- collectives stamped onto groups (network communication inside units)
    def algo(op):
        return algos.get(op, algos.get("all_to_all")) if op == "all_to_all_v" else algos.get(op)

    def rail_m(op, groups, tpl=None, sw=None):
        """GPUs of each two_tier node every group holds, where its ring runs one per rail
        (collectives/rail.py, as NCCL lays its ring channels through every NIC: one ring in
        rank order would leave each node through one NIC), else None."""
        if tpl is None and sw is None and comm.runs_rail_rings(op, algo(op)):
            return comm.per_node(topology, host[groups])
        return None

    def streams_of(op, nbytes, g, m, tpl=None, sw=None):
        """The streams (collectives.streams) a ring-like collective over g ranks, ``m`` of them
        per node (``rail_m``), is in the scalable form: one per rail ring, or one; None where
        it has none (not ``agg``, in-network, trees, all-to-alls)."""
        if not agg or sw is not None or (tpl is None and comm.in_network(algos.get(op))):
            return None
        if m is not None:
            rs = comm.rail_streams(op, g, _size(nbytes), algo(op), m)
            if rs is not None:
                return rs
        st = None if tpl is not None else comm.stream(op, g, _size(nbytes), algo(op))
        if st is None:
            tpl = comm.template(op, g, _size(nbytes), algo(op)) if tpl is None else tpl
            st = stream_of(tpl) if tpl.n else None
        if st is not None and op == "all_to_all_v" and st.short > 0:
            # the all-to-all-v of an imbalanced expert group of 2 has one connection per rank,
            # so it had a stream form, but its two connections carry different shares and a
            # stream's members all move its busiest one's bytes (BYTES_SHORT only keeps the
            # total right): the light direction's links carried the heavy one's bytes (two_tier
            # 4 x 2, TP 2 x EP 2, Zipf 4: 1.904 GB on the links against 1.798 GB in the full
            # form; on an oversubscribed leaf_spine a step 1.0 % long, 0.4 % now). Pair
            # classes keyed by bytes move each pair's own bytes.
            return None
        return None if st is None else [st]

    def stamp(op, nbytes, groups, ready, done, ckind, tag=-1, lab=None, tpl=None, sw=None,
              fold=1):
        """Run ``op`` on every row of ``groups`` (global ranks, shape (k, g)); its first transfers
        wait for ``ready`` nodes (k, g) and ``done`` nodes (k, g) wait for the transfers.
        In-network collectives (``tpl``, ``sw``: comm.innet_templates) address switch j of
        row i as template endpoint g + j, i.e. ``sw[i, j]``. ``fold``: rows come in runs of
        ``fold`` copies of one collective at one time (the groups of one chain position);
        under ``agg`` a collective with no stream form runs once per run, every template
        transfer a member set over the run's copies."""
        k, g = groups.shape
        if tpl is None and comm.in_network(algos.get(op)):
            for rows, t_, sw_ in comm.innet_templates(op, int(nbytes), algos[op], host[groups],
                                                      topology):
                stamp(op, nbytes, groups[rows], ready[rows], done[rows], ckind, tag, lab, t_, sw_,
                      fold if _whole_runs(rows, fold) else 1)
            return
        m = rail_m(op, groups, tpl, sw)
        sts = streams_of(op, nbytes, g, m, tpl, sw)
        if sts is not None:
            for st in sts:
                stamp_streams(op, st, groups, ready, done, ckind, tag, lab)
            return
        if tpl is None:
            tpl = comm.template(op, g, _size(nbytes), algo(op), per_node=m)
        if tpl.n == 0:
            acc.edges(done, ready)
            return
        if agg and sw is None and k % fold == 0 and grouped and \
                pair_classes.independent_transfers(tpl):
            stamp_classes(op, tpl, groups, ready, done, ckind, tag, lab, fold)
            return
        if agg and fold > 1 and k % fold == 0:
            stamp_folded(op, tpl, groups, ready, done, ckind, tag, lab, fold, sw)
            return
        hosts, granks = _with_switches(host[groups], groups, sw)
        ids = add_instances(op, tpl, hosts, granks, ckind, tag, lab)
        wire(tpl, ids, ready[:, None, :], done[:, None, :])

    def add_instances(op, tpl, hosts, granks, ckind, tag, lab, mset=-1):
        """The nodes of one template instance per row of ``hosts``/``granks`` (the endpoints
        and ranks it runs on); ``mset``: member set per node, or -1. Returns the node of each
        instance's template node 0, shape (instances, 1)."""
        k, n = hosts.shape[0], tpl.n
        base = acc.n
        inst = np.repeat(np.arange(k), n)
        loc = np.tile(np.arange(n), k)
        tsrc, tdst = tpl.src[loc], tpl.dst[loc]
        acc.add(k * n, kind=np.tile(tpl.kind, k), src=hosts[inst, tsrc],
                dst=np.where(tdst >= 0, hosts[inst, np.maximum(tdst, 0)], -1),
                size=np.tile(tpl.size, k), duration=np.tile(tpl.duration, k), tag=tag,
                label=acc.lab(lab or f"comm:{CKIND_NAMES[ckind]}:{op}"),
                rank=granks[inst, tsrc], ckind=ckind, stream=1, mult=1.0, mset=mset)
        return base + np.arange(k)[:, None] * n

    def wire(tpl, ids, ready, done):
        """Edges of stamped template instances: ``ids`` (inst, 1) holds the node of each
        instance's template node 0; ``ready`` and ``done`` (inst, copies, g) the chain nodes of
        the copies an instance stands for. Inside an instance the template's own dependencies;
        its roots wait for every copy's ready node at their endpoints, and every copy's done
        node at a rank waits for the sinks that touch that rank (all sinks if none does)."""
        g = ready.shape[2]
        cnt = np.diff(tpl.dep_ptr)
        owner = np.repeat(np.arange(tpl.n), cnt)
        acc.edges(ids + owner[None, :], ids + tpl.dep_idx[None, :])
        # the copies of folded replicas name their representative's chain nodes: one edge
        # per distinct node of an instance, not one per copy. Every copy's edges to every
        # root and sink were listed and only deduplicated at build: the 1.8T MoE on 32,768
        # FullFlat GPUs (EP 16 all-to-alls over 256 copies) listed about 10^9 and was killed
        # at 24 GB before any memory check ran
        ready, done = _distinct_copies(ready), _distinct_copies(done)
        roots = np.flatnonzero(cnt == 0)
        for end in (tpl.src, np.where(tpl.dst >= 0, tpl.dst, tpl.src)):
            r_ = roots[end[roots] < g]  # a switch endpoint has no ready node of its own
            par = ready[:, :, end[r_]]  # (inst, copies, roots)
            i, _, j = np.nonzero(par >= 0)
            acc.edges(ids[i, 0] + r_[j], par[par >= 0])
        cptr, _ = tpl.children()
        sinks = np.flatnonzero(np.diff(cptr) == 0)
        for lr in range(g):
            touch = sinks[(tpl.dst[sinks] == lr) | (tpl.src[sinks] == lr)]
            if touch.size == 0:
                touch = sinks
            ch = done[:, :, lr]  # (inst, copies)
            i = np.nonzero(ch >= 0)[0]
            acc.edges(np.repeat(ch[ch >= 0], len(touch)),
                      (ids[i, 0][:, None] + touch[None, :]).ravel())

    def stamp_folded(op, tpl, groups, ready, done, ckind, tag, lab, fold, sw=None):
        """``stamp`` of a collective with no stream form (all-to-all, in-network trees) in the
        scalable form: one instance per run of ``fold`` rows, each template transfer a member
        set over the run's copies (the expert all-to-alls of every tensor rank at one chain
        position, on their own rails; the SHARP all-reduces of a stage's data-parallel groups,
        each copy through its own switches ``sw``). The copies move in lock step; a copy that
        routing leaves slower than the others is split off by the flow engine
        (netcore/flow/uneven_split.py). An instance waits for the distinct ready nodes of its
        copies, and their done nodes wait for it."""
        k, g = groups.shape
        inst, n = k // fold, tpl.n
        ends, granks = _with_switches(host[groups], groups, sw)
        hosts = ends.reshape(inst, fold, ends.shape[1])
        # a member set depends only on its template endpoints: one per distinct (src, dst) pair
        # (an in-network template repeats its pairs once per chunk, 256 chunks at most)
        tr = np.flatnonzero(tpl.kind == TRANSFER)
        W = hosts.shape[2]
        pair, inv = np.unique(tpl.src[tr] * W + np.maximum(tpl.dst[tr], 0), return_inverse=True)

        def sets_of(h):  # (fold, endpoints) of one run -> member set id per template node
            ids = np.full(n, -1, dtype=np.int64)
            per = np.array([acc.sets.add(h[:, p // W], h[:, p % W]) for p in pair.tolist()],
                           dtype=np.int64)
            ids[tr] = per[inv.ravel()]
            return ids

        same = (hosts == hosts[:1]).all()  # every chain position runs on the same groups
        mset = np.tile(sets_of(hosts[0]), inst) if same else \
            np.concatenate([sets_of(hosts[i]) for i in range(inst)])
        # each instance is named by its first copy
        ids = add_instances(op, tpl, hosts[:, 0], granks.reshape(inst, fold, -1)[:, 0], ckind,
                            tag, lab, mset)
        wire(tpl, ids, ready.reshape(inst, fold, g), done.reshape(inst, fold, g))

    def stamp_classes(op, tpl, groups, ready, done, ckind, tag, lab, fold):
        """``stamp`` of an all-to-all (independent transfers) in the scalable form: one node per
        class of pairs (compute/pair_classes.py) for each run of ``fold`` copies, a member set
        over the class's pairs of every copy. A class node waits for the ready nodes of its
        members' ends, and the done node of each end waits for every class node touching it."""
        k, g = groups.shape
        inst = k // fold
        hosts = host[groups].reshape(inst, fold, g)
        granks = groups.reshape(inst, fold, g)
        rdy, dn = ready.reshape(inst, fold * g), done.reshape(inst, fold * g)
        same = (hosts == hosts[:1]).all()  # every chain position runs on the same groups
        for i in ([0] if same else range(inst)):
            rows = slice(None) if same else slice(i, i + 1)
            reps = inst if same else 1
            pc = pair_classes.classes(tpl, hosts[i], topology, tkey[granks[i]])
            sid = np.array([acc.sets.add(pc.src[a:b], pc.dst[a:b])
                            for a, b in zip(pc.ptr[:-1], pc.ptr[1:])], dtype=np.int64)
            first = pc.ptr[:-1]
            ids = acc.add(reps * pc.n, kind=TRANSFER, src=np.tile(pc.src[first], reps),
                          dst=np.tile(pc.dst[first], reps), size=np.tile(pc.size, reps),
                          tag=tag, label=acc.lab(lab or f"comm:{CKIND_NAMES[ckind]}:{op}"),
                          rank=np.tile(granks[i, pc.copy, tpl.src[pc.pair]], reps),
                          ckind=ckind, stream=1, mset=np.tile(sid, reps)).reshape(reps, pc.n)
            c, p = _distinct_incidences(rdy[rows], pc.end_cls, pc.end_pos)
            acc.edges(ids[:, c], rdy[rows][:, p])
            c, p = _distinct_incidences(dn[rows], pc.end_cls, pc.end_pos)
            acc.edges(dn[rows][:, p], ids[:, c])

    def stamp_streams(op, st, groups, ready, done, ckind, tag, lab, copies=None, copy_of=None):
        """``stamp`` of a ring-like collective in the scalable form: per row of ``groups``, one
        transfer standing for every connection of that group (collectives.streams), after a
        step-latency delay if it has one. It waits for the row's ready nodes, and the row's done
        nodes wait for it. With ``copies`` (a list of (n, g) group arrays) row r stands for the
        connections of every group in ``copies[copy_of[r]]``: copies that start and end on the
        same chain nodes. All rows are added at once: a large MoE step stamps hundreds of
        thousands of streams."""
        k = groups.shape[0]
        hosts = host[groups]
        if copies is None:  # every row stands for its own group
            copies, copy_of = [groups[r:r + 1] for r in range(k)], np.arange(k)
        sets = np.array([acc.sets.add(host[c][:, st.src], host[c][:, st.dst]) for c in copies],
                        dtype=np.int64)
        sid = sets[copy_of]
        short = st.short * np.array([len(c) for c in copies], dtype=np.int64)[copy_of]
        first = hosts[:, st.src[0]]
        after = ready
        if st.delay_s > 0:
            d = acc.add(k, kind=DELAY, src=first, duration=st.delay_s, tag=tag,
                        label=acc.lab("step_latency"), rank=groups[:, st.src[0]], ckind=ckind,
                        stream=1)
            acc.edges(d[:, None], ready)
            after = d[:, None]
        node = acc.add(k, kind=TRANSFER, src=first, dst=hosts[:, st.dst[0]], size=st.nbytes,
                       tag=tag, label=acc.lab(lab or f"comm:{CKIND_NAMES[ckind]}:{op}"),
                       rank=groups[:, st.src[0]], ckind=ckind, stream=1, mset=sid,
                       steps=st.steps, short=short)
        acc.edges(node[:, None], after)
        acc.edges(done, node[:, None])

    def stamp_copies(op, st, groups, qs, ckind):
        """The ring-like collective ``op`` at chain positions ``qs`` on every row of ``groups``
        (the tensor-, context- or expert-parallel groups of one stage, every replica's) in the
        scalable form. Groups whose ranks fold onto the same representative chains start and
        end on the same chain nodes: one stream over all their connections per position (a
        copy that routing leaves slower than the others is split off by the flow engine,
        netcore/flow/uneven_split.py). A replica simulated on its own keeps its own stream."""
        _, first, inv = np.unique(rep[groups], axis=0, return_index=True, return_inverse=True)
        inv = inv.ravel()
        copies = [groups[inv == c] for c in range(len(first))]
        lead = groups[first]  # (classes, g): each class named by its first group
        R = np.tile(lead, (len(qs), 1))
        qq = np.repeat(qs, len(first))[:, None]
        stamp_streams(op, st, R, node(R, qq - 1), node(R, qq), ckind, -1, None, copies,
                      np.tile(np.arange(len(first)), len(qs)))

    def stamp_dp(op, nbytes, groups, ready, done, ckind, tag=-1, lab=None):
        """``stamp`` of a stage's data-parallel collective on all its groups (one per
        (cp, tp) rank; ``ready``/``done`` shaped like ``groups``). Rings keep a stream per
        group (streams_of: a copy on another rail hashes to other paths, and held in lock step
        the copies would wait for one another). A collective with no stream form (trees,
        halving-doubling, in-network) runs once per set of groups that start and end on the
        same chain nodes, each template transfer a member set over the set's copies: the
        tensor ranks of a replica folded onto one chain (before, a double binary tree
        all-reduce of GPT-3 175B on 8,192 GPUs stamped its 128-rank trees once per tensor
        rank, 42.9 M transfers, and was killed at 24 GB). In-network collectives fold every
        group of the stage, each copy through its own switches."""
        if comm.in_network(algo(op)):
            stamp(op, nbytes, groups, ready, done, ckind, tag, lab, fold=len(groups))
            return
        if agg and streams_of(op, nbytes, groups.shape[1], rail_m(op, groups)) is None:
            _, inv = np.unique(ready, axis=0, return_inverse=True)
            inv = inv.ravel()
            for cl in range(int(inv.max()) + 1):
                rows = np.flatnonzero(inv == cl)
                stamp(op, nbytes, groups[rows], ready[rows], done[rows], ckind, tag, lab,
                      fold=len(rows))
            return
        stamp(op, nbytes, groups, ready, done, ckind, tag, lab)

    d_all = np.arange(D)
    for s in range(P):
        c = chains[s]
        net_q = np.flatnonzero(c["kind"] == COMM_NET)
        if net_q.size == 0:
            continue
        by_key: dict = {}
        for q in net_q:
            it = c["items"][q]
            # an all-to-all-v carries its bytes matrix in place of one size
            by_key.setdefault((it.group, it.op, it.matrix or it.nbytes), []).append(q)
        for (group, op, nbytes), qs in by_key.items():
            qs = np.asarray(qs)
            # every replica's groups, folded ones too: their collectives wait for their
            # representative's chain nodes (``node``) and it waits for them, as for the
            # data-parallel rings, so the fabric carries the whole step's load (before, only
            # the simulated replicas' TP, CP and EP collectives were generated)
            g4 = grid[s]  # (dp, cp, tp)
            if group == "tp":
                groups = g4.reshape(-1, T)
            elif group == "cp":
                groups = g4.transpose(0, 2, 1).reshape(-1, C)
            else:  # ep: consecutive data-parallel ranks
                groups = g4.transpose(1, 2, 0).reshape(C * T, D // par.ep, par.ep) \
                    .reshape(-1, par.ep)
            sts = streams_of(op, nbytes, groups.shape[1], rail_m(op, groups))
            if sts is not None:
                for st in sts:
                    stamp_copies(op, st, groups, qs, CKIND[group])
                continue
            kq = len(qs)
            G = np.repeat(groups[None], kq, axis=0).reshape(-1, groups.shape[1])
            qq = np.repeat(qs, len(groups))[:, None]
            stamp(op, nbytes, G, node(G, qq - 1), node(G, qq), CKIND[group], fold=len(groups))

    def pp_sends_aggregated(s, sel, s2, q_send, q_recv, recv, mb):
        """One pipeline send per unit, standing for that send of every replica (and tensor
        rank): members are all (sender, receiver) GPU pairs between the two stages. It waits
        for the distinct chain nodes that produce the data and the simulated receivers wait
        for it, as the per-GPU form does."""
        coords = np.unravel_index(recv, grid.shape)  # (pp, dp, cp, tp) of each receiver
        live = simulated[rep[recv]] & np.isin(coords[1], d_sim)
        for s_other in unique(s2):
            k = np.flatnonzero(s2 == s_other)
            send = grid[s_other, coords[1], coords[2], coords[3]]
            # one aggregated send per producing chain: replicas folded onto one chain move
            # together, a replica simulated on its own keeps its own sends
            prod = chain_base[rep[send]]
            for p in unique(prod):
                mem = np.flatnonzero(prod == p)
                sid = acc.sets.add(host[send[mem]], host[recv[mem]])
                ids = acc.add(len(k), kind=TRANSFER, src=host[send[mem[0]]],
                              dst=host[recv[mem[0]]], size=act_bytes, tag=mb[sel[k]],
                              label=pp_lab, rank=send[mem[0]], ckind=CKIND["pp"], stream=1,
                              mset=sid)
                acc.edges(ids, p + q_send[k])
                rl = recv[mem][live[mem]]
                consumers = unique(chain_base[rep[rl]])
                acc.edges(consumers[None, :] + q_recv[k][:, None], ids[:, None])

    # ---- pipeline send/recv between positions
    act_bytes = par.micro_batch * (m.seq // C) * m.hidden * lm.dt // T  # scatter/gather over TP
    d_tx = d_all if sym else d_sim
    pp_lab = acc.lab("comm:pp:send_recv")
    for s in range(P):
        c = chains[s]
        ph, ch, mb = c["ph"], c["ch"], c["mb"]
        pos = ch * P + s
        for phase, other in ((pipeline.FWD, pos - 1), (pipeline.BWD, pos + 1)):
            sel = np.flatnonzero((ph == phase) & (other >= 0) & (other < npos))
            if sel.size == 0:
                continue
            s2, c2 = other[sel] % P, other[sel] // P
            u2 = unit_of[s2, phase, c2, mb[sel]]
            q_send = np.array([chains[a]["start"][b] + chains[a]["lens"][b] - 1
                               for a, b in zip(s2, u2)], dtype=np.int64)
            q_recv = c["start"][sel]
            # receivers: every (dp, cp, tp) GPU of stage s; sender: same coordinates on stage s2
            sub = grid[s][d_tx]  # (dp, cp, tp)
            recv = sub.reshape(-1)
            nrx = len(recv)
            if agg:
                pp_sends_aggregated(s, sel, s2, q_send, q_recv, recv, mb)
                continue
            rx = np.tile(recv, len(sel))
            dd, cc, tt = (np.tile(x.reshape(-1), len(sel)) for x in np.meshgrid(
                d_tx, np.arange(C), np.arange(T), indexing="ij"))
            send = grid[np.repeat(s2, nrx), dd, cc, tt]
            ids = acc.add(len(rx), kind=TRANSFER, src=host[send], dst=host[rx], size=act_bytes,
                          tag=np.repeat(mb[sel], nrx), label=pp_lab, rank=send, ckind=CKIND["pp"],
                          stream=1)
            acc.edges(ids, node(send, np.repeat(q_send, nrx)))
            live = simulated[rep[rx]] & np.isin(dp_i[rx], d_sim)
            acc.edges(node(rx[live], np.repeat(q_recv, nrx)[live]), ids[live])

    # ---- data-parallel gradient buckets, optimizer, parameter gather
    bucket_bytes = par.bucket_mb * 1e6
    # gradient bytes of one layer on one GPU (its own experts with EP; a dense first layer
    # of DeepSeek-V3 has none)
    grad_of = {moe: m.layer_params_of(moe, ep) / T * par.grad_bytes for moe in (False, True)}
    emb_grad = m.embedding_params / T * par.grad_bytes
    step_end = {}
    opt_node = {}
    for s in range(P):
        c = chains[s]
        ranks = grid[s][d_sim][:, :, t_sim].ravel()
        buckets = []  # (chain position where the bucket's gradients are complete, bytes)
        for ck in range(V):
            u = unit_of[s, pipeline.BWD, ck, M - 1]  # the last micro-batch's backward
            pos = ck * P + s
            lo, hi = c["start"][u], c["start"][u] + c["lens"][u]
            qs = lo + np.flatnonzero(c["layer_end"][lo:hi] >= 0)  # layer ends, backward order
            # the output layer's (tied) embedding gradient is ready first on the last position,
            # the input embedding's last on the first position
            acc_b = emb_grad if (pos == npos - 1 and (npos > 1 or not m.tied_embeddings)) else 0.0
            last_q = hi - 1
            for q in qs:
                acc_b += grad_of[m.is_moe_layer(int(off[pos] + c["layer_end"][q]))]
                if acc_b >= bucket_bytes:
                    buckets.append((int(q), acc_b))
                    acc_b = 0.0
            if pos == 0:
                acc_b += emb_grad
            if acc_b > 0:
                buckets.append((int(last_q), acc_b))
        buckets.sort()
        if not par.overlap_grad_reduce:
            buckets = [(c["Q"] - 1, sum(b for _, b in buckets))]
        # DP groups of this stage: one per (cp, tp), all replicas
        groups = grid[s].transpose(1, 2, 0).reshape(-1, D)  # (cp*tp, dp)
        prev_done = None
        for bi, (q, nbytes) in enumerate(buckets):
            ready = acc.add(len(ranks), kind=DELAY, src=host[ranks], rank=ranks, ckind=CKIND["sync"],
                            stream=1, label=acc.lab("sync"), tag=bi)
            acc.edges(ready, chain_base[ranks] + q)
            if prev_done is not None:
                acc.edges(ready, prev_done)
            done = acc.add(len(ranks), kind=DELAY, src=host[ranks], rank=ranks, ckind=CKIND["sync"],
                           stream=1, label=acc.lab("sync"), tag=bi)
            rix = np.full(par.n_gpus, -1, np.int64)
            rix[ranks] = np.arange(len(ranks))
            op = "reduce_scatter" if par.dist_opt else "all_reduce"
            stamp_dp(op, int(nbytes), groups, ready[rix[rep[groups]]], done[rix[rep[groups]]],
                     CKIND["dp"], tag=bi, lab="comm:dp:" + op)
            prev_done = done
        # optimizer on the local (possibly sharded) parameters
        opt_s = np.array([chain_of(s, cls_of(r))[1] for r in ranks.tolist()])
        opt = acc.add(len(ranks), kind=K_COMPUTE, src=host[ranks], rank=ranks, ckind=0,
                      duration=opt_s, label=acc.lab("compute:optimizer"),
                      mult=mult_rank[ranks])
        opt_node.update(zip(ranks.tolist(), opt.tolist()))
        acc.edges(opt, chain_base[ranks] + c["Q"] - 1)
        if prev_done is not None:
            acc.edges(opt, prev_done)
        end = opt
        if par.dist_opt and D > 1:
            done = acc.add(len(ranks), kind=DELAY, src=host[ranks], rank=ranks, ckind=CKIND["sync"],
                           stream=1, label=acc.lab("sync"))
            rix = np.full(par.n_gpus, -1, np.int64)
            rix[ranks] = np.arange(len(ranks))
            pbytes = int(opt_params(s) * D * lm.dt)
            stamp_dp("all_gather", pbytes, groups, opt[rix[rep[groups]]],
                     done[rix[rep[groups]]], CKIND["dp_ag"], lab="comm:dp_ag:all_gather")
            end = done
        step_end[s] = end

    # ---- step facts
    tokens = par.global_batch * m.seq
    model_flops = par.global_batch * m.model_flops_per_sequence()
    hw_flops = model_flops + par.global_batch * m.recompute_flops_per_sequence(par.recompute)
    sym_text = []
    if len(d_sim) < D:
        why = ("a slowed GPU or a GPU at a faulted link" if link_fold
               else "a slowed GPU")
        unfolded = (f"; the {len(bad_grp)} replica group(s) of {ep} holding {why} "
                    f"simulated on their own" if len(bad_grp) else "")
        sym_text.append(f"compute of {len(d_sim)} of {D} data-parallel replicas simulated "
                        f"(identical replicas{unfolded}); all network transfers of all replicas "
                        f"generated")
    elif faulty.size and symmetry == "auto" and not faults and D > ep:
        sym_text.append("none: every replica group holds a slowed GPU")
    if len(t_sim) < T:
        sym_text.append(f"one GPU per tensor-parallel group of {T} carries the compute chain "
                        f"(identical peers; tensor-parallel collectives priced inside the "
                        f"scale-up domain)")
    meta = dict(
        workload="training", model=m.name or "custom", gpu=spec.name, precision=par.precision,
        n_gpus=par.n_gpus, tp=T, pp=P, dp=D, cp=C, ep=par.ep, vp=V, sp=par.sp,
        micro_batch=par.micro_batch, global_batch=par.global_batch, micro_batches=M,
        recompute=par.recompute, dist_opt=par.dist_opt, stage_layers=list(lay),
        tokens_per_step=tokens,
        model_flops_per_step=model_flops, hardware_flops_per_step=hw_flops,
        peak_flops=spec.peak_flops(par.precision), peak_flops_total=spec.peak_flops(par.precision) * par.n_gpus,
        tp_comm="local" if tp_local else ("network" if T > 1 else "none"),
        tp_scaleup_GBps=spec.scaleup_GBps if tp_local else None,
        fabric_scaleup_GBps=fabric_su,
        symmetry="; ".join(sym_text) if sym_text else "none (every GPU simulated)",
        simulated_ranks=int(simulated.sum()), granularity=granularity,
        folded_replicas=int(D - len(d_sim)),
        network_detail_used="auto" if agg else "full",
        algorithms={op: algos.get(op, comm.DEFAULT_ALGO[op]) for op in comm.OPS},
        rank_host=host.tolist() if par.n_gpus <= 4096 else None,
        gpu_hosts=np.sort(host),
        expert_shares=m.expert_shares().tolist() if m.expert_imbalance is not None else None,
        ep_rank_load=([float(x) * ep for x in ep_rank_shares(m, ep)]
                      if m.experts and m.expert_imbalance is not None else None),
        gpu_faults=({str(int(host[r])): [list(x) for x in tl] for r, tl in timeline.items()}
                    if timeline else None),
    )
    sched = acc.build(meta)
    if later:
        _apply_later(sched, later, chain_base, opt_node, topology)
    return sched


def _apply_later(sched, later, chain_base, opt_node, topology) -> None:
    """Slowdowns that start at a time t > 0: compute durations are fixed when the schedule is
    built, so the nodes of a slowed GPU's chain (and its optimizer step) whose start in a
    contention-free evaluation of the step (``critical_path.evaluate``, every transfer at its
    ``transfer_bounds``: no engine starts a node earlier) is at or after t get the slowed
    durations. One evaluation per distinct time, in time order.

    The evaluation priced every transfer at the fabric's slowest GPU link (NVLink transfers at
    NIC speed), so it could run past the real step and slow nodes that start before t: on
    two_tier 2 x 4 (PP 2 x DP 4, HBM of GPU 0 at 0.3 from 1.5x the 1,387 us step) the step
    took 1,478 us, a fault after the step lengthening it."""
    from compute.critical_path import evaluate, transfer_bounds

    bw, lat = transfer_bounds(sched, topology) if topology is not None else (np.inf, 0.0)
    for t in sorted({x[0] for x in later}):
        start, _ = evaluate(sched, bandwidth_Bps=bw, latency_s=lat)
        for tt, r, secs, opt_s in later:
            if tt != t:
                continue
            nodes = chain_base[r] + np.arange(len(secs))
            sel = start[nodes] >= t - 1e-15
            sched.duration[nodes[sel]] = secs[sel]
            o = opt_node.get(r)
            if o is not None and start[o] >= t - 1e-15:
                sched.duration[o] = opt_s



