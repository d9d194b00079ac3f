"""Step figures from a simulated training Schedule: step time, tokens/s, MFU, exposed
communication by kind, and a Chrome/Perfetto trace-event timeline.

MFU = model FLOPs per step / (step time x peak FLOP/s x GPUs), with model FLOPs the analytical
count without recomputation (Korthikanti et al. 2022; Chowdhery et al. 2022). HFU counts the
recomputed FLOPs too.
"""
from __future__ import annotations

import json

import numpy as np

from compute.layers import CKIND
from netcore.schedule import COMPUTE, DELAY, TRANSFER, Schedule
from topo.arrays import union1d, unique


def _union_len(s: np.ndarray, e: np.ndarray) -> float:
    """Total length of the union of intervals [s, e)."""
    if s.size == 0:
        return 0.0
    o = np.argsort(s, kind="stable")
    s, e = s[o], e[o]
    run = np.maximum.accumulate(e)
    # a new block starts where the interval begins after everything before it ended
    new = np.concatenate([[True], s[1:] > run[:-1]])
    bid = np.cumsum(new) - 1
    bs = s[new]
    be = np.zeros(bs.size)
    np.maximum.at(be, bid, e)
    return float((be - bs).sum())


def _member_touch(schedule: Schedule, sel: np.ndarray, hosts: np.ndarray) -> dict:
    """host -> ids of the aggregated transfers (``sel`` & member set) that have a member
    sending from or receiving at that host, for the few ``hosts`` asked about."""
    ms = schedule.sets
    owner = np.repeat(np.arange(ms.n_sets), ms.sizes)
    pairs = []
    for end in (ms.src, ms.dst):
        hit = np.isin(end, hosts)
        pairs.append(np.stack([owner[hit], end[hit].astype(np.int64)], axis=1))
    pairs = np.unique(np.concatenate(pairs), axis=0)  # (set, host)
    nodes = np.flatnonzero(sel & (schedule.mset >= 0))
    out: dict = {}
    if not len(nodes) or not len(pairs):
        return out
    o = np.argsort(schedule.mset[nodes], kind="stable")
    nodes = nodes[o]
    nset = schedule.mset[nodes]
    lo = np.searchsorted(nset, pairs[:, 0], "left")
    hi = np.searchsorted(nset, pairs[:, 0], "right")
    for (s_, h), a, b in zip(pairs.tolist(), lo.tolist(), hi.tolist()):
        if b > a:
            out.setdefault(int(h), []).append(nodes[a:b])
    return {h: unique(np.concatenate(v)) for h, v in out.items()}


def summarize(schedule: Schedule, start: np.ndarray, end: np.ndarray) -> dict:
    meta = schedule.meta
    ok = np.isfinite(end)
    step = float(end[ok].max()) if ok.any() else 0.0
    x = schedule.extra
    rank, ck, tp_s = x["rank"], x["ckind"], x["tp_s"]
    comp = (schedule.kind == COMPUTE) & ok
    sim_ranks = unique(rank[comp])
    kinds = [k for k in CKIND if k not in ("compute", "sync")]
    exposed = {k: 0.0 for k in kinds}
    busy_total = 0.0
    exposed_total = 0.0  # union over kinds (kinds may overlap one another)
    tr = (schedule.kind == TRANSFER) & ok
    tp_delay = (schedule.kind == DELAY) & (ck == CKIND["tp"]) & ok

    def by(keys, sel):
        """node ids where ``sel``, grouped by ``keys`` (dict key -> ids), one sort."""
        ids = np.flatnonzero(sel)
        k = keys[ids]
        o = np.argsort(k, kind="stable")
        ids, k = ids[o], k[o]
        cut = np.flatnonzero(np.diff(k)) + 1
        return {int(kk[0]): g for kk, g in zip(np.split(k, cut), np.split(ids, cut)) if kk.size}

    comp_of = by(rank, comp)
    tpd_of = by(rank, tp_delay)
    # transfers touching a host: as sender and as receiver
    t_src, t_dst = by(schedule.src, tr), by(schedule.dst, tr)
    empty = np.zeros(0, np.int64)
    if schedule.has_members:
        # an aggregated transfer (network_detail auto) touches every member's hosts
        hosts = unique(schedule.src[comp])
        for h, ids in _member_touch(schedule, tr, hosts).items():
            t_src[h] = union1d(t_src.get(h, empty), ids)
    # a simulated rank stands for ``mult`` GPUs (symmetry folding: its replica's peers, or its
    # tensor-parallel group); per-GPU figures weigh it so. Unweighted, a slowed GPU simulated
    # on its own counted as much as the representative of all healthy replicas
    mult = x["mult"] if "mult" in x else np.ones(len(schedule.kind))
    weight = 0.0
    for r in sim_ranks:
        cm = comp_of[int(r)]
        w = float(mult[cm[0]])
        weight += w
        h = int(schedule.src[cm[0]])
        cs, ce = start[cm], end[cm]
        busy = _union_len(cs, ce)
        tp_inside = float(tp_s[cm].sum())  # analytic TP time fused into compute nodes
        busy_total += w * (busy - tp_inside)
        touch = union1d(t_src.get(h, empty), t_dst.get(h, empty))
        tck = ck[touch]
        d = tpd_of.get(int(r), empty)
        comm = np.concatenate([touch[tck != CKIND["sync"]], d])
        allu = _union_len(np.concatenate([cs, start[comm]]), np.concatenate([ce, end[comm]]))
        exposed_total += w * (allu - busy + tp_inside)
        for k in kinds:
            code = CKIND[k]
            exp = 0.0
            if k == "tp":
                d = tpd_of.get(int(r), empty)
                exp = float((end[d] - start[d]).sum()) + tp_inside
            sel = touch[tck == code]
            if sel.size:
                a = _union_len(np.concatenate([cs, start[sel]]), np.concatenate([ce, end[sel]]))
                exp += a - busy
            exposed[k] += w * exp
    nr = weight if weight > 0 else 1.0
    exposed = {k: v / nr for k, v in exposed.items() if v > 0}
    compute_s = busy_total / nr
    tokens = meta.get("tokens_per_step", 0)
    peak_total = meta.get("peak_flops_total", 0.0)
    out = dict(
        step_time_s=step,
        tokens_per_s=tokens / step if step > 0 else 0.0,
        mfu=meta.get("model_flops_per_step", 0.0) / (step * peak_total) if step > 0 and peak_total else 0.0,
        hfu=meta.get("hardware_flops_per_step", 0.0) / (step * peak_total) if step > 0 and peak_total else 0.0,
        compute_s_per_gpu=compute_s,
        exposed_comm_s=exposed,
        exposed_comm_total_s=exposed_total / nr,
        idle_s_per_gpu=max(step - compute_s - exposed_total / nr, 0.0),
        symmetry=meta.get("symmetry", ""),
        tp_comm=meta.get("tp_comm", ""),
        simulated_ranks=int(meta.get("simulated_ranks", nr)),
        n_gpus=int(meta.get("n_gpus", 0)),
    )
    if (~ok).any():
        # a step some of whose nodes never ended (stranded behind a cut with no path left, a
        # TCP connection that gave up, a deadlock) has no step time: NaN (null in
        # summary.json), not the end of the part that ran, and no throughput figures from it
        # (a host cut off mid-step reported the healthy step's time and MFU)
        out["unfinished_nodes"] = int((~ok).sum())
        for k in ("step_time_s", "tokens_per_s", "mfu", "hfu", "idle_s_per_gpu"):
            out[k] = float("nan")
    return out


def chrome_trace(schedule: Schedule, start: np.ndarray, end: np.ndarray, path=None,
                 max_events: int = 500_000) -> dict:
    """Trace-event JSON: one process per GPU host; thread 0 is the compute stream, thread 1 the
    analytic tensor-parallel / sync steps, threads 2+ hold concurrent transfers (a transfer is
    drawn on its sender, each on the lowest free track)."""
    ok = np.isfinite(end) & np.isfinite(start)
    idx = np.flatnonzero(ok)
    if idx.size > max_events:  # keep the earliest events; the trace says so
        idx = idx[np.argsort(start[idx], kind="stable")[:max_events]]
    labels = schedule.labels
    ev = []
    tr = schedule.kind[idx] == TRANSFER
    # lanes for transfers, per sender host, greedy by start time
    ti = idx[tr]
    order = ti[np.lexsort((start[ti], schedule.src[ti]))]
    lane_of = {}
    free: dict = {}
    for i in order:
        h = int(schedule.src[i])
        ends = free.setdefault(h, [])
        s0 = start[i]
        for li, e in enumerate(ends):
            if e <= s0:
                ends[li] = end[i]
                lane_of[int(i)] = li
                break
        else:
            ends.append(end[i])
            lane_of[int(i)] = len(ends) - 1
    for j, i in enumerate(idx):
        k = schedule.kind[i]
        name = labels[schedule.label[i]]
        if k == TRANSFER:
            tid = 2 + lane_of[int(i)]
            args = {"bytes": int(schedule.size[i]), "dst": int(schedule.dst[i]), "tag": int(schedule.tag[i])}
        else:
            tid = 0 if schedule.extra["stream"][i] == 0 else 1
            args = {"tag": int(schedule.tag[i])}
            if schedule.extra["tp_s"][i] > 0:
                args["tp_s"] = float(schedule.extra["tp_s"][i])
            if end[i] - start[i] <= 0:
                continue
        ev.append({"name": name, "ph": "X", "pid": int(schedule.src[i]), "tid": int(tid),
                   "ts": float(start[i] * 1e6), "dur": float((end[i] - start[i]) * 1e6), "args": args})
    hosts = sorted({e["pid"] for e in ev})
    for h in hosts:
        ev.append({"name": "process_name", "ph": "M", "pid": h, "args": {"name": f"GPU host {h}"}})
        ev.append({"name": "thread_name", "ph": "M", "pid": h, "tid": 0, "args": {"name": "compute"}})
        ev.append({"name": "thread_name", "ph": "M", "pid": h, "tid": 1, "args": {"name": "tp/sync"}})
    trace = {"traceEvents": ev, "displayTimeUnit": "ms",
             "otherData": {k: v for k, v in schedule.meta.items() if isinstance(v, (int, float, str, bool))}}
    if idx.size < int(ok.sum()):
        trace["otherData"]["truncated_to_events"] = int(max_events)
    if path is not None:
        with open(path, "w") as f:
            json.dump(trace, f)
    return trace


def format_summary(s: dict) -> str:
    if s.get("unfinished_nodes"):
        return (f"step time      none: {s['unfinished_nodes']:,} schedule nodes never ended "
                f"(stranded transfers and what waits on them)")
    lines = [f"step time      {s['step_time_s']:.4f} s",
             f"tokens/s       {s['tokens_per_s']:.1f}",
             f"MFU            {100 * s['mfu']:.1f} %   (HFU {100 * s['hfu']:.1f} %)",
             f"compute/GPU    {s['compute_s_per_gpu']:.4f} s"]
    for k, v in sorted(s["exposed_comm_s"].items(), key=lambda kv: -kv[1]):
        lines.append(f"exposed {k:7s} {v:.4f} s")
    lines.append(f"exposed, all   {s['exposed_comm_total_s']:.4f} s (kinds can overlap)")
    lines.append(f"idle/bubble    {s['idle_s_per_gpu']:.4f} s")
    lines.append(f"symmetry       {s['symmetry']}")
    return "\n".join(lines)
