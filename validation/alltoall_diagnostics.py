"""Where the fluid model loses time on all-to-all (issue 17): `python -m
validation.alltoall_diagnostics [--bins N]`.

For fat_tree k=8 at 256 KiB per pair and leaf_spine 2:1 at 1 MiB per pair, compares the flow
engine (fluid) with the packet engine (tcp with deep buffers, dcqcn):

* the distribution of transfer end times (percentiles, and the tail: the share of the
  makespan during which fewer than 10% of the transfers are still running);
* when each receiver (and sender) finishes its last transfer;
* the utilisation of host uplinks (host -> switch), host downlinks (switch -> host) and
  switch-to-switch links in ``bins`` equal slices of each engine's own makespan. Flow engine:
  its exact rate series (``link_series``). Packet engine: it has no rate series, so the run is
  repeated with ``max_time_s`` at every slice boundary and the bytes each link has sent by
  then (``link_bytes``, wire bytes) are differenced; the engine is deterministic, so each
  truncated run is a prefix of the full one;
* the packet engine's queues (``sample_queues_us``): mean waiting packets per port class and
  the share of samples in which a host downlink has a queue;
* the host-link bound, and the makespans of both engines under ``spray`` (no ECMP path
  collisions), to tell path collisions from what the transports lose, with the packet
  engine's ``ideal`` transport (lossless, no congestion control) for reference.

Writes validation/results/alltoall_diagnostics.md (findings in docs/flow_engine.md).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from validation.alltoall_cases import CASES, FABRICS, PACKET_OPTIONS, Case
from validation.alltoall_engines import RESULTS, run_one

DIAG_CASES = (CASES["ft8_direct_256K"], CASES["ls2_direct_1M"])
DIAG_FABRIC = {c.name: c.fabric for c in DIAG_CASES}
CLASSES = ("host up", "host down", "switch-switch")


def link_classes(topology) -> np.ndarray:
    """0 host uplink, 1 host downlink, 2 switch-to-switch (or host-to-host), per dlink."""
    n = topology.n_hosts
    src, dst = topology.dlink_src, topology.dlink_dst
    cls = np.full(topology.n_dlinks, 2, dtype=np.int8)
    cls[(src < n) & (dst >= n)] = 0
    cls[(src >= n) & (dst < n)] = 1
    return cls


def end_stats(res, sched) -> dict:
    """Percentiles of transfer end times (us and share of makespan), the tail share, and the
    spread of receivers' and senders' last ends."""
    from netcore.schedule import TRANSFER

    t = sched.kind == TRANSFER
    end = res.end[t]
    ms = float(np.nanmax(end))
    q = {p: float(np.percentile(end, p)) for p in (10, 50, 90, 99)}
    out = {"makespan_us": ms * 1e6, **{f"p{p}_us": v * 1e6 for p, v in q.items()},
           **{f"p{p}_frac": v / ms for p, v in q.items()},
           # fewer than 10% of the transfers remain after the 90th percentile of end times
           "tail_frac": (ms - q[90]) / ms}
    for who, ids in (("recv", sched.dst[t]), ("send", sched.src[t])):
        last = np.full(int(ids.max()) + 1, np.nan)
        np.fmax.at(last, ids, end)
        last = last[~np.isnan(last)]
        out[f"{who}_last_min_frac"] = float(last.min()) / ms
        out[f"{who}_last_med_frac"] = float(np.median(last)) / ms
    return out


def flow_bytes_at(res, edges: np.ndarray, n_dlinks: int) -> np.ndarray:
    """Bytes each directed link has carried by each time in ``edges`` (n_edges, n_dlinks),
    integrated from the flow engine's piecewise-constant rate series."""
    ptr = res.link_extra["series_ptr"]
    ts, rate = res.link_extra["series_t"], res.link_extra["series_rate"]
    out = np.zeros((len(edges), n_dlinks))
    for l in range(n_dlinks):
        a, b = ptr[l], ptr[l + 1]
        if a == b:
            continue
        t, r = ts[a:b], rate[a:b]
        cum = np.concatenate(([0.0], np.cumsum(r[:-1] * np.diff(t))))
        k = np.clip(np.searchsorted(t, edges, side="right") - 1, 0, None)
        before = edges < t[0]
        out[:, l] = np.where(before, 0.0, cum[k] + r[k] * (edges - t[k]))
    return out


def utilisation(bytes_at: np.ndarray, edges: np.ndarray, bw: np.ndarray,
                cls: np.ndarray) -> np.ndarray:
    """Mean utilisation of each link class in each slice: (len(CLASSES), bins)."""
    per = np.diff(bytes_at, axis=0) / (np.diff(edges)[:, None] * bw[None, :])
    return np.stack([per[:, cls == c].mean(axis=1) for c in range(len(CLASSES))])


def diagnose(case: Case, bins: int = 10, log=print) -> dict:
    out = {}
    res, prep = run_one(case, "flow", {"transport": "fluid", "link_series": True,
                                       "record_paths": False})
    topo = prep.topology
    cls, bw = link_classes(topo), topo.dlink_bw
    ms = res.makespan
    edges = np.linspace(0.0, ms, bins + 1)
    out["fluid"] = {**end_stats(res, prep.schedule),
                    "util": utilisation(flow_bytes_at(res, edges, topo.n_dlinks), edges, bw, cls)}
    log(f"  fluid: {ms * 1e6:,.1f} us")
    period_us = ms * 1e6 / 200  # ~200+ queue samples over the run
    for tr in ("tcp", "dcqcn"):
        # the run the table makes (end times, bytes); the queue samples come from a second
        # run, because sampling events change the order of ties at equal picoseconds and so
        # the tcp run itself (by 0.01-0.15% of the makespan here)
        res, prep = run_one(case, "packet", PACKET_OPTIONS[tr])
        sampled, _ = run_one(case, "packet", {**PACKET_OPTIONS[tr],
                                              "sample_queues_us": period_us})
        pm = res.makespan
        st = end_stats(res, prep.schedule)
        edges = np.linspace(0.0, pm, bins + 1)
        at = np.zeros((bins + 1, topo.n_dlinks))
        at[-1] = res.link_bytes
        for i in range(1, bins):  # the same run stopped at each slice boundary
            cut, _ = run_one(case, "packet", {**PACKET_OPTIONS[tr], "max_time_s": edges[i]})
            at[i] = cut.link_bytes
        q = sampled.info["queue_series"]["packets"].astype(float)
        st["util"] = utilisation(at, edges, bw, cls)
        st["queue_mean"] = [float(q[:, cls == c].mean()) for c in range(len(CLASSES))]
        st["queue_max"] = [float(q[:, cls == c].max()) for c in range(len(CLASSES))]
        st["down_busy_frac"] = float((q[:, cls == 1] > 0).mean())
        out[tr] = st
        log(f"  packet {tr}: {pm * 1e6:,.1f} us")
    out["bound_us"] = host_bound(prep) * 1e6
    out["routing"] = routing_variants(case)
    log(f"  routing variants: {out['routing']}")
    return out


def host_bound(prep) -> float:
    """The time the busiest host link needs for its bytes (payload): no engine can beat it."""
    from netcore.schedule import TRANSFER

    s, topo = prep.schedule, prep.topology
    t = s.kind == TRANSFER
    n = topo.n_hosts
    sent = np.bincount(s.src[t], weights=s.size[t], minlength=n)
    recv = np.bincount(s.dst[t], weights=s.size[t], minlength=n)
    cls, src, dst, bw = link_classes(topo), topo.dlink_src, topo.dlink_dst, topo.dlink_bw
    up = np.zeros(n)
    down = np.zeros(n)
    np.add.at(up, src[cls == 0], bw[cls == 0])
    np.add.at(down, dst[cls == 1], bw[cls == 1])
    return float(max((sent / up).max(), (recv / down).max()))


# the packet engine's lossless transport without congestion control (credits, hop-by-hop
# back-pressure, 1,000-packet ports): what the fabric does when nothing slows the senders
IDEAL = {"transport": "ideal", "mtu": 9000}


def routing_variants(case: Case) -> dict:
    """Makespans (us) of the case under its fabric's routing and under per-packet spraying
    (flow engine: every path in equal shares; no path collisions in either engine), on the
    fluid model, the packet engine's tcp and dcqcn, and its ``ideal`` transport."""
    from dataclasses import replace

    out = {}
    for label, c in (("fabric", case), ("spray", replace(case, routing="spray"))):
        r = {"fluid": run_one(c, "flow", {"transport": "fluid"})[0].makespan * 1e6}
        for tr, opts in (("tcp", PACKET_OPTIONS["tcp"]), ("dcqcn", PACKET_OPTIONS["dcqcn"]),
                         ("ideal", IDEAL)):
            res = run_one(c, "packet", opts)[0]
            r[tr] = res.makespan * 1e6
            if tr == "tcp":  # nothing drops: retransmissions are spurious (reordering)
                r["tcp_retx"] = int(res.info["retransmissions"])
        out[label] = r
    return out


def _row(cells) -> str:
    return "| " + " | ".join(cells) + " |"


def write(results: dict, bins: int, out: Path = RESULTS) -> str:
    lines = ["# All-to-all diagnostics: flow (fluid) vs packet engine", "",
             "Generated by `python -m validation.alltoall_diagnostics` (see its docstring for "
             "the method; findings in docs/flow_engine.md \"All-to-all: where the fluid model "
             "loses time\"). Times in us; fractions are of each engine's own makespan.", ""]
    for name, r in results.items():
        engines = ("fluid", "tcp", "dcqcn")
        lines += [f"## {name}", "", "Transfer end times:", "",
                  _row(["engine", "makespan", "p10", "p50", "p90", "p99", "p50 / makespan",
                        "p90 / makespan", "tail (< 10% left) / makespan",
                        "first receiver done / makespan", "median receiver done / makespan",
                        "first sender done / makespan"]),
                  "|---" + "|---:" * 11 + "|"]
        for e in engines:
            s = r[e]
            lines.append(_row([e, f"{s['makespan_us']:,.1f}"]
                              + [f"{s[f'p{p}_us']:,.1f}" for p in (10, 50, 90, 99)]
                              + [f"{s['p50_frac']:.2f}", f"{s['p90_frac']:.2f}",
                                 f"{s['tail_frac']:.2f}", f"{s['recv_last_min_frac']:.2f}",
                                 f"{s['recv_last_med_frac']:.2f}",
                                 f"{s['send_last_min_frac']:.2f}"]))
        policy = FABRICS[DIAG_FABRIC[name]].routing
        lines += ["", f"Host-link bound (the busiest host link's payload at line rate): "
                      f"{r['bound_us']:,.1f} us. Makespans under the fabric's routing "
                      f"(`{policy}`) and under `spray` (no path collisions in either engine); "
                      "`ideal` is the packet engine's lossless transport without congestion "
                      "control (credits, 1,000-packet ports); err = (fluid - packet) / packet:",
                  "", _row(["routing", "fluid", "tcp", "dcqcn", "ideal", "err vs tcp",
                            "err vs dcqcn", "err vs ideal", "tcp retransmissions"]),
                  "|---" + "|---:" * 8 + "|"]
        for label, v in r["routing"].items():
            lines.append(_row([policy if label == "fabric" else label]
                              + [f"{v[e]:,.1f}" for e in ("fluid", "tcp", "dcqcn", "ideal")]
                              + [f"{(v['fluid'] - v[e]) / v[e]:+.1%}"
                                 for e in ("tcp", "dcqcn", "ideal")] + [f"{v['tcp_retx']:,}"]))
        lines += ["", f"Mean link utilisation per slice of the makespan ({bins} slices; packet: "
                      "wire bytes incl. headers and ACKs):", "",
                  _row(["engine", "links"] + [f"{i + 1}" for i in range(bins)] + ["whole run"]),
                  "|---|---" + "|---:" * (bins + 1) + "|"]
        for e in engines:
            u = r[e]["util"]
            for c, cname in enumerate(CLASSES):
                lines.append(_row([e, cname] + [f"{x:.2f}" for x in u[c]]
                                  + [f"{u[c].mean():.2f}"]))
        lines += ["", "Packet engine queues (waiting packets per port, sampled):", "",
                  _row(["transport"] + [f"mean, {c}" for c in CLASSES]
                       + [f"max, {c}" for c in CLASSES] + ["host downlink queued, share of samples"]),
                  "|---" + "|---:" * 7 + "|"]
        for e in engines:
            if "queue_mean" in r[e]:
                s = r[e]
                lines.append(_row([e] + [f"{x:.1f}" for x in s["queue_mean"]]
                                  + [f"{x:.0f}" for x in s["queue_max"]]
                                  + [f"{s['down_busy_frac']:.2f}"]))
        lines.append("")
    text = "\n".join(lines)
    out.mkdir(parents=True, exist_ok=True)
    (out / "alltoall_diagnostics.md").write_text(text)
    return text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.alltoall_diagnostics",
                                 description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bins", type=int, default=10, help="slices of the makespan")
    ap.add_argument("--out", default=str(RESULTS), help="results directory")
    args = ap.parse_args(argv)
    results = {}
    for case in DIAG_CASES:
        t0 = time.perf_counter()
        print(case.name, flush=True)
        results[case.name] = diagnose(case, args.bins, log=lambda s: print(s, flush=True))
        print(f"  [{time.perf_counter() - t0:.1f} s]", flush=True)
    print(write(results, args.bins, Path(args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
