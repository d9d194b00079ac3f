"""NCCL-tests-style figures: time, algbw = S / t, busbw = algbw * factor(op, n).

Factors from NCCL-tests doc/PERFORMANCE.md (NVIDIA/nccl-tests, "Summary"): AllReduce
2(n-1)/n; ReduceScatter, AllGather and AlltoAll (n-1)/n; Broadcast and Reduce 1. S is the
size NCCL-tests prints: the per-rank buffer for all-reduce, the total array (n shards) for
reduce-scatter and all-gather, each rank's send buffer for all-to-all. Send/recv is
point-to-point: busbw = algbw (factor 1). GB/s means 1e9 bytes/s, as NCCL-tests prints.
"""
from __future__ import annotations

from topo.errors import InputError


def bus_factor(op: str, n: int) -> float:
    if n < 1:
        raise InputError(f"ranks = {n}: must be >= 1")
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("reduce_scatter", "all_gather", "all_to_all", "all_to_all_v"):
        return (n - 1) / n
    if op in ("broadcast", "reduce", "send_recv"):
        return 1.0
    raise InputError(f"op = {op!r}: no bus bandwidth factor")


def figures(op: str, n: int, nbytes: int, seconds: float) -> dict:
    """time (s and us), algbw and busbw in GB/s (1e9 bytes/s)."""
    if not seconds > 0:
        raise InputError(f"time = {seconds!r}: must be > 0 to compute a bandwidth")
    algbw = nbytes / seconds / 1e9
    return {"bytes": int(nbytes), "time_s": seconds, "time_us": seconds * 1e6,
            "algbw_GBps": algbw, "busbw_GBps": algbw * bus_factor(op, n)}


def table(rows: list[dict], title: str = "") -> str:
    """Rows of figures() as NCCL-tests prints them: size, count-free, time (us), GB/s."""
    out = []
    if title:
        out.append(f"# {title}")
    how = all("algorithm" in r and r.get("protocol") for r in rows) and rows
    tail = lambda r: f"  {r['algorithm']}/{r['protocol']}" if how else ""  # noqa: E731
    out.append(f"#{'size':>14} {'time':>12} {'algbw':>9} {'busbw':>9}" +
               ("  algorithm/protocol" if how else ""))
    out.append(f"#{'(B)':>14} {'(us)':>12} {'(GB/s)':>9} {'(GB/s)':>9}")
    for r in rows:
        out.append(f"{r['bytes']:>15d} {r['time_us']:>12.2f} {r['algbw_GBps']:>9.2f} "
                   f"{r['busbw_GBps']:>9.2f}" + tail(r))
    if rows:
        avg = sum(r["busbw_GBps"] for r in rows) / len(rows)
        out.append(f"# Avg bus bandwidth    : {avg:.4f}")
    return "\n".join(out)


def run(topology, op, algorithm, ranks, nbytes, engine="analytical", routing="ecmp",
        faults=None, seed=0, fabric=None, **options) -> dict:
    """Build (or estimate) one collective and return figures() plus the engine used."""
    import collectives as co
    from collectives.analytical import estimate

    if engine == "analytical":
        t = estimate(topology, op, algorithm, ranks, nbytes, routing=routing, fabric=fabric,
                     **options)
    else:
        from netcore.api import simulate

        # a collective's steps between two ranks share one connection (one ECMP hash), as
        # NCCL's persistent queue pairs do: what `netcosim run` simulates, and what the
        # analytical estimate routes
        sched = co.build(op, algorithm, ranks, nbytes, fabric=topology,
                         **options).with_connections()
        res = simulate(topology, sched, routing=routing, faults=faults, engine=engine,
                       seed=seed)
        if res.n_stranded:
            raise InputError(undelivered(res))
        t = res.makespan
    n = len(co._plan.check_ranks(ranks))
    S = nbytes if op != "all_to_all_v" else int(__import__("numpy").asarray(nbytes)
                                                .sum(axis=1).max())
    return {**figures(op, n, S, t), "engine": engine, "op": op, "algorithm": algorithm,
            "protocol": options.get("protocol")}


def undelivered(res) -> str:
    """Why a collective's run left transfers stranded, for the error message: TCP giving up
    (its retries ran out: links far too slow for its timers, or too lossy) or faults cutting
    every path."""
    gave_up = int(res.info.get("tcp_gave_up", 0) or 0)
    why = (f"TCP gave up on {gave_up} connections when their retries ran out (links too "
           f"slow or too lossy for its timers)" if gave_up else "faults cut them off")
    return f"{res.n_stranded} transfers could not be delivered: {why}"
