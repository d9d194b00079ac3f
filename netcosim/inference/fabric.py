"""Communication cost curves of a serving run, measured on the scenario's fabric.

A serving run executes millions of small collectives (two TP all-reduces per layer per
iteration, the expert all-to-alls, pipeline sends). Simulating each is out of the question;
instead each kind is simulated at a handful of message sizes, log-spaced over the range the run
can need, with every replica's group running at once (so replicas that share links contend as
they would), on the scenario's topology, routing, link faults and engine. The serving loop then
interpolates piecewise-linearly in log(size)-log(time) (``curve_time``), per replica. Bandwidth,
topology and faults therefore change the curves and, through them, TTFT and inter-token latency.
"""
from __future__ import annotations

import numba
import numpy as np

from netcore.schedule import Schedule
from topo.errors import InputError
from topo.arrays import unique

POINTS = 8
# the kinds of curve, in the order of the (kinds, replicas, POINTS) array
KINDS = ("all_reduce", "all_to_all", "send")


def placed_hosts(n_hosts: int, n: int, place, where: str, gpus: str, order: str) -> np.ndarray:
    """``n`` host ids: the first ``n`` hosts ("packed") or the given list. ``gpus`` says how
    the count is made (for the message when it exceeds the fabric), ``order`` what a given
    list holds."""
    if place == "packed":
        if n > n_hosts:
            raise InputError(f"{gpus} = {n} GPUs, the fabric has {n_hosts} hosts")
        return np.arange(n)
    if isinstance(place, list):
        if len(place) != n or len(set(place)) != n or not all(
                isinstance(h, int) and not isinstance(h, bool) and 0 <= h < n_hosts
                for h in place):
            raise InputError(f"{where}.placement: expected {n} distinct host ids in "
                             f"0..{n_hosts - 1} ({order})")
        return np.asarray(place)
    raise InputError(f"{where}.placement = {place!r}: expected \"packed\" or a list of host "
                     f"ids")


def replica_hosts(n_hosts: int, layout, placement, where: str) -> np.ndarray:
    """(dp, pp, tp) host ids: replicas packed in host order (or the given host list)."""
    hosts = placed_hosts(n_hosts, layout.n_gpus, placement, where,
                         f"{where}.parallel: tp x pp x dp = {layout.tp} x {layout.pp} x "
                         f"{layout.dp}", "tp x pp x dp")
    return hosts.reshape(layout.dp, layout.pp, layout.tp)


def _sizes(lo: float, hi: float) -> np.ndarray:
    lo, hi = max(1.0, float(lo)), max(2.0, float(hi))
    if hi <= lo:
        hi = lo * 2
    return unique(np.round(np.geomspace(lo, hi, POINTS))).astype(np.int64)


def size_grid(lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """(bytes (POINTS,), log sizes (POINTS,)) of a curve over ``lo`` .. ``hi``: a short range
    padded with its largest size, the log sizes made strictly increasing."""
    sz = _sizes(lo, hi)
    sz = np.concatenate([sz, np.full(POINTS - len(sz), sz[-1])])
    return sz, np.log(sz) + np.arange(POINTS) * 1e-9


def check_faults_at_start(faults) -> None:
    """Cost curves are measured on transfers that last microseconds from time 0: a fault
    striking later would silently never apply, so it is refused."""
    late = np.flatnonzero(np.asarray(faults.time) > 0) if faults is not None and len(faults) else []
    if len(late):
        # 15 digits: `:g` showed 1234567.891 us as 1.23457e+06
        raise InputError(f"faults: at_us = {float(faults.time[late[0]]) * 1e6:.15g}: an inference "
                         f"run prices its communication on the fabric as it stands from the "
                         f"start, so its faults must strike at at_us = 0 (faults later in a "
                         f"serving run are not modelled yet)")


def measure(topology, routing, faults, engine: str, seed: int, hosts: np.ndarray,
            sizes: dict, algorithms: dict, where: str) -> tuple[np.ndarray, np.ndarray, dict]:
    """Curves (log sizes (kinds, POINTS), log seconds (kinds, dp, POINTS)) and a report.

    ``sizes``: kind -> (smallest, largest) bytes the run can need, or None when the layout
    never runs that kind. All-reduces and all-to-alls run over each replica's first TP group
    (every TP group of a replica runs the same collective at the same time; with pp > 1 the
    first stage's group stands for the others), sends from each stage's first GPU to the next
    stage's. ``algorithms``: kind -> algorithm, and "protocol": the NCCL protocol of the
    collectives ("auto": the least estimate per size, as NCCL's tuner; None: no protocol cost),
    which adds NCCL's launch and per-step latencies that dominate a decode step's small
    all-reduces (collectives/protocols.py; validated in validation/results/nccl_tests.md)."""
    import collectives
    from netcore.api import simulate

    check_faults_at_start(faults)
    dp = hosts.shape[0]
    log_s = np.zeros((len(KINDS), POINTS))
    log_t = np.full((len(KINDS), dp, POINTS), -np.inf)  # exp(-inf) = 0: a kind never run
    report = {}
    for ki, kind in enumerate(KINDS):
        rng = sizes.get(kind)
        if rng is None:
            log_s[ki] = np.arange(POINTS)
            continue
        sz, log_s[ki] = size_grid(*rng)
        times = np.zeros((dp, POINTS))
        for j, nbytes in enumerate(sz):
            parts, owner = [], []
            for r in range(dp):
                if kind == "send":
                    for s in range(hosts.shape[1] - 1):
                        parts.append(Schedule.from_transfers([int(hosts[r, s, 0])],
                                                             [int(hosts[r, s + 1, 0])],
                                                             [int(nbytes)]))
                        owner.append(r)
                else:
                    ranks = [int(x) for x in hosts[r, 0]]
                    parts.append(collectives.build(kind, algorithms[kind], ranks, int(nbytes),
                                                   fabric=topology,
                                                   protocol=algorithms.get("protocol"))
                                 .with_connections())
                    owner.append(r)
            sched = Schedule.concat(parts)
            res = simulate(topology, sched, routing, faults, engine=engine, seed=seed)
            off = np.cumsum([0] + [p.n for p in parts])
            for i, r in enumerate(owner):
                end = res.end[off[i]:off[i + 1]]
                if not np.isfinite(end).all():
                    raise InputError(f"faults: replica {r}'s {kind} cannot complete (its GPUs "
                                     f"are cut apart by the link faults)")
                times[r, j] = max(times[r, j], float(end.max()))
        log_t[ki] = np.log(np.maximum(times, 1e-12))
        report[kind] = {"bytes": [int(x) for x in sz[:len(unique(sz))]],
                        "seconds_replica0": [float(x) for x in times[0, :len(unique(sz))]]}
    return log_s, log_t, report


@numba.njit(cache=True)
def curve_time(log_s, log_t_row, nbytes):
    """Seconds for ``nbytes`` from one measured curve: piecewise linear in log-log inside the
    measured range, proportional to size beyond it (bandwidth-bound) and flat below it
    (latency-bound)."""
    if nbytes <= 0.0:
        return 0.0
    x = np.log(nbytes)
    n = log_s.shape[0]
    if x <= log_s[0]:
        return np.exp(log_t_row[0])
    if x >= log_s[n - 1]:
        return np.exp(log_t_row[n - 1] + (x - log_s[n - 1]))
    return np.exp(np.interp(x, log_s, log_t_row))
