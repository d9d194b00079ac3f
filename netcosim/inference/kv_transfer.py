"""KV-cache transfers of disaggregated serving, priced by a cost curve measured on the fabric.

A request's prompt KV cache (``compute.inference.kv_transfer_bytes_per_token`` x its prompt
tokens) moves from the GPUs of its prefill replica to those of its decode replica, TP-sharded:
GPU k of the prefill replica (flattened stage-major, as the hosts are packed) sends to GPU k of
the decode replica, for k over the larger of the two replicas (a smaller replica's GPUs then
serve several pairs, modulo its size), each pair carrying an equal share of the bytes.

The curve of each (prefill replica, decode replica) pair is measured with the scenario's
topology, routing, link faults and engine at ``fabric.POINTS`` sizes per GPU pair, log-spaced
over the prompts of the run, in ``dp_decode`` rounds: in round s every prefill replica p sends
to decode replica (p + s) mod dp_decode at once (so transfers that share links contend as they
would when every prefill replica hands a request over at the same time). ``transfer_times``
then interpolates per request in log-log, as the collective curves (``fabric.curve_time``).

Simulating every round costs dp_decode x POINTS simulations of every prefill GPU's flows, about
GPUs^2 (16,384 GPUs of two-tier: 132 s, benchmarks/bench_kv_transfer.py). ``measure`` gives the
same times with two exact savings:

* where netcosim/inference/kv_rounds.py proves every round the same problem as round 0 up to
  renaming the links into the decode GPUs (the GPU pairs of a column meet at switches they
  all share: a rail leaf, the switches of single-switch planes), round 0 alone is simulated
  and stands for every round, bit for bit: linear in GPUs (16,384 GPUs: 0.3 s);
* elsewhere, a round no request uses is not simulated, its times never being read (request i
  goes from prefill replica i mod dp_p to decode replica i mod dp_d: with dp_p = dp_d every
  request is in round 0). A fault cutting a pair apart in such a round is then not refused,
  as no request crosses it. Rounds where spines, a fat-tree's upper tiers or a fault on a
  decode GPU's link make the rounds contend differently are all simulated when the requests
  use them all (coprime replica counts and a long run): still dp_decode rounds there.

The POINTS simulations of a round share its routing (``SamePaths``). ``measure_every_round`` is
the original measurement, kept as the reference the tests compare with
(tests/test_kv_transfer_classes.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from netcore.schedule import Schedule
from netcosim.inference.fabric import POINTS, check_faults_at_start, curve_time, size_grid
from netcosim.inference.kv_rounds import columns, rounds_alike
from topo.errors import InputError
from topo.arrays import unique


def gpu_pairs(p_replica: np.ndarray, d_replica: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(src hosts, dst hosts) of one replica-to-replica KV transfer; ``*_replica``: (pp, tp)."""
    src, dst = p_replica.ravel(), d_replica.ravel()
    k = np.arange(max(len(src), len(dst)))
    return src[k % len(src)], dst[k % len(dst)]


@dataclass
class KVCurves:
    """Measured KV-transfer curves: the pair of prefill replica p in round s (decode replica
    (p + s) mod dp_d) has the curve ``log_t[row0[s] + p]``."""

    log_s: np.ndarray  # float64 (POINTS,) log bytes per GPU pair
    log_t: np.ndarray  # float64 (rows, POINTS) log seconds
    row0: np.ndarray  # int64 (dp_d,) first row of each round; -1: not measured (never used)
    dp_p: int
    report: dict

    def pair_log_t(self) -> np.ndarray:
        """(dp_p, dp_d, POINTS) log seconds of every replica pair, NaN where not measured
        (the layout of ``measure_every_round``; tests and small fabrics only)."""
        dp_d = len(self.row0)
        p = np.arange(self.dp_p)[:, None]
        s = (np.arange(dp_d)[None, :] - p) % dp_d
        rows = self.row0[s] + p
        out = self.log_t[np.maximum(rows, 0)]
        out[self.row0[s] < 0] = np.nan
        return out


def rounds_used(p_rep: np.ndarray, d_rep: np.ndarray, dp_d: int) -> np.ndarray:
    """The rounds (sorted) holding the (prefill, decode) replica pairs of the requests."""
    return unique((np.asarray(d_rep) - np.asarray(p_rep)) % dp_d)


def round_flows(p_hosts: np.ndarray, d_hosts: np.ndarray, s: int) -> tuple[np.ndarray,
                                                                             np.ndarray]:
    """(src (dp_p, K), dst (dp_p, K)) of round s: row p is prefill replica p's transfer to
    decode replica (p + s) mod dp_d, in ``gpu_pairs`` order."""
    P, D = columns(p_hosts, d_hosts)
    return P, D[(np.arange(P.shape[0]) + s) % D.shape[0]]


class SamePaths:
    """``routing``, except that a ``paths`` call repeating one of its last calls (the same
    transfers, keys and alive mask) gets that call's answer: the POINTS simulations of a round
    route the same transfers, only their bytes differ, and routing them again cost more than
    simulating them (65,536 GPUs: 2.8 of the 3.7 s a round took). The flow engine copies the
    paths it is given (FlowState.assign), so sharing one answer changes nothing."""

    KEEP = 4  # calls remembered: a run with faults routes again at its fault instant

    def __init__(self, routing):
        self._routing = routing
        self._calls = []

    def __getattr__(self, name):  # every name SamePaths does not define
        if name == "_routing":  # not set yet (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self._routing, name)

    def paths(self, src, dst, flow_id=None, alive=None):
        args = (src, dst, flow_id, alive)
        for key, got in self._calls:
            if all(_same(a, b) for a, b in zip(args, key)):
                return got
        got = self._routing.paths(src, dst, flow_id=flow_id, alive=alive)
        key = tuple(None if a is None else np.array(a, copy=True) for a in args)
        self._calls = [(key, got)] + self._calls[:self.KEEP - 1]
        return got


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    a = np.asarray(a)
    return a.dtype == b.dtype and np.array_equal(a, b)


def round_times(topology, routing, faults, engine: str, seed: int, p_hosts: np.ndarray,
                d_hosts: np.ndarray, s: int, sz: np.ndarray) -> np.ndarray:
    """(dp_p, POINTS) seconds of round s: each prefill replica's slowest GPU pair, the
    round's transfers of ``sz[j]`` bytes per pair all at once."""
    from netcore.api import simulate

    if engine == "flow":
        routing = SamePaths(routing)
    src, dst = round_flows(p_hosts, d_hosts, s)
    out = np.zeros((src.shape[0], len(sz)))
    for j, nbytes in enumerate(sz):
        sched = Schedule.from_transfers(src.ravel(), dst.ravel(),
                                        np.full(src.size, int(nbytes)), label="kv")
        res = simulate(topology, sched.with_connections(), routing, faults, engine=engine,
                       seed=seed)
        end = res.end.reshape(src.shape)
        cut = np.flatnonzero(~np.isfinite(end).all(axis=1))
        if len(cut):
            p = int(cut[0])
            raise InputError(f"faults: the KV transfer from prefill replica {p} to decode "
                             f"replica {(p + s) % d_hosts.shape[0]} cannot complete (their "
                             f"GPUs are cut apart by the link faults)")
        out[:, j] = end.max(axis=1)
    return out


def measure(topology, routing, faults, engine: str, seed: int, p_hosts: np.ndarray,
            d_hosts: np.ndarray, lo: float, hi: float, rounds=None) -> KVCurves:
    """Curves of GPU-pair transfers of ``lo`` .. ``hi`` bytes; ``*_hosts``: (dp, pp, tp) host
    ids of each pool; ``rounds``: the rounds the run reads (``rounds_used``; None: all).

    Round 0 is always measured (the report's curve is its pair (0, 0)). Where kv_rounds proves
    the rounds alike it is the only one simulated; otherwise every round asked for is."""
    from topo.routing import Routing

    check_faults_at_start(faults)
    if isinstance(routing, str):  # one routing object (and its cached rows) for every round
        routing = Routing(topology, routing, seed=seed)
    dp_p, dp_d = p_hosts.shape[0], d_hosts.shape[0]
    sz, log_s = size_grid(lo, hi)
    why = rounds_alike(topology, routing, faults, engine, p_hosts, d_hosts)
    row0 = np.full(dp_d, -1, dtype=np.int64)
    if why is None:
        measured = np.zeros(1, dtype=np.int64)
        row0[:] = 0
    else:
        asked = np.arange(dp_d) if rounds is None else np.asarray(rounds, dtype=np.int64)
        measured = unique(np.concatenate([[0], asked]))
        row0[measured] = np.arange(len(measured)) * dp_p
    times = np.concatenate([round_times(topology, routing, faults, engine, seed, p_hosts,
                                        d_hosts, int(s), sz) for s in measured])
    u = len(unique(sz))
    report = {"bytes_per_gpu_pair": [int(x) for x in sz[:u]],
              "seconds_prefill0_to_decode0": [float(x) for x in times[0, :u]],
              "gpu_pairs": int(len(gpu_pairs(p_hosts[0], d_hosts[0])[0])),
              "rounds": int(dp_d),
              "rounds_simulated": int(len(measured)),
              "rounds_alike": why is None, **({} if why is None else {"rounds_differ": why})}
    return KVCurves(log_s, np.log(np.maximum(times, 1e-12)), row0, dp_p, report)


def measure_every_round(topology, routing, faults, engine: str, seed: int,
                        p_hosts: np.ndarray, d_hosts: np.ndarray, lo: float,
                        hi: float) -> tuple[np.ndarray, np.ndarray, dict]:
    """The original measurement, every round simulated: (log sizes (POINTS,), log seconds
    (dp_prefill, dp_decode, POINTS), report). The reference ``measure`` must match bit for
    bit (tests/test_kv_transfer_classes.py); not used by runs."""
    from netcore.api import simulate

    check_faults_at_start(faults)
    dp_p, dp_d = p_hosts.shape[0], d_hosts.shape[0]
    sz, log_s = size_grid(lo, hi)
    times = np.zeros((dp_p, dp_d, POINTS))
    for s in range(dp_d):
        pairs = [(p, (p + s) % dp_d) for p in range(dp_p)]
        ends = [gpu_pairs(p_hosts[p], d_hosts[d]) for p, d in pairs]
        src = np.concatenate([e[0] for e in ends])
        dst = np.concatenate([e[1] for e in ends])
        off = np.cumsum([0] + [len(e[0]) for e in ends])
        for j, nbytes in enumerate(sz):
            sched = Schedule.from_transfers(src, dst, np.full(len(src), int(nbytes)),
                                            label="kv").with_connections()
            res = simulate(topology, sched, routing, faults, engine=engine, seed=seed)
            for i, (p, d) in enumerate(pairs):
                end = res.end[off[i]:off[i + 1]]
                if not np.isfinite(end).all():
                    raise InputError(f"faults: the KV transfer from prefill replica {p} to "
                                     f"decode replica {d} cannot complete (their GPUs are cut "
                                     f"apart by the link faults)")
                times[p, d, j] = float(end.max())
    u = len(unique(sz))
    report = {"bytes_per_gpu_pair": [int(x) for x in sz[:u]],
              "seconds_prefill0_to_decode0": [float(x) for x in times[0, 0, :u]],
              "gpu_pairs": int(len(gpu_pairs(p_hosts[0], d_hosts[0])[0]))}
    return log_s, np.log(np.maximum(times, 1e-12)), report


# The compiled function below inlines curve_time from fabric.py; Numba's disk cache does not
# see a change there (see INLINED_SHA1 in loop.py, tests/test_numba_inlined_sources.py).
INLINED_FROM = ("netcosim/inference/fabric.py",)
INLINED_SHA1 = "4dc9ec256805ccf6"


@numba.njit(cache=True)
def transfer_times(p_rep, d_rep, nbytes, log_s, log_t, row0):
    """Seconds of each request's transfer: ``nbytes`` per GPU pair from prefill replica
    ``p_rep[i]`` to decode replica ``d_rep[i]``, read from the curve of their round
    (``KVCurves``)."""
    dp_d = row0.shape[0]
    out = np.empty(nbytes.shape[0])
    for i in range(nbytes.shape[0]):
        s = (d_rep[i] - p_rep[i]) % dp_d
        if s < 0:
            s += dp_d
        if row0[s] < 0:
            raise ValueError("transfer_times: a request's round was not measured")
        out[i] = curve_time(log_s, log_t[row0[s] + p_rep[i]], nbytes[i])
    return out
