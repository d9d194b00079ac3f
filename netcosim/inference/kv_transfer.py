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
"""
from __future__ import annotations

import numba
import numpy as np

from netcore.schedule import Schedule
from netcosim.inference.fabric import POINTS, _sizes, check_faults_at_start, curve_time
from topo.errors import InputError
from topo.arrays import unique


def gpu_pairs(p_replica: np.ndarray, d_replica: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(src hosts, dst hosts) of one replica-to-replica KV transfer; ``*_replica``: (pp, tp)."""
    src, dst = p_replica.ravel(), d_replica.ravel()
    k = np.arange(max(len(src), len(dst)))
    return src[k % len(src)], dst[k % len(dst)]


def measure(topology, routing, faults, engine: str, seed: int, p_hosts: np.ndarray,
            d_hosts: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray, dict]:
    """(log sizes (POINTS,), log seconds (dp_prefill, dp_decode, POINTS), report) for GPU-pair
    transfers of ``lo`` .. ``hi`` bytes; ``*_hosts``: (dp, pp, tp) host ids of each pool."""
    from netcore.api import simulate

    check_faults_at_start(faults)
    dp_p, dp_d = p_hosts.shape[0], d_hosts.shape[0]
    sz = _sizes(lo, hi)
    sz = np.concatenate([sz, np.full(POINTS - len(sz), sz[-1])])
    log_s = np.log(sz) + np.arange(POINTS) * 1e-9
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
INLINED_SHA1 = "f59fef71db2a7118"


@numba.njit(cache=True)
def transfer_times(p_rep, d_rep, nbytes, log_s, log_t):
    """Seconds of each request's transfer: ``nbytes`` per GPU pair from prefill replica
    ``p_rep[i]`` to decode replica ``d_rep[i]``."""
    out = np.empty(nbytes.shape[0])
    for i in range(nbytes.shape[0]):
        out[i] = curve_time(log_s, log_t[p_rep[i], d_rep[i]], nbytes[i])
    return out
