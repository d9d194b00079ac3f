"""The packet engine's `dcqcn` against the DCQCN fluid model (issue 17, "Validate dcqcn"):
`python -m validation.dcqcn_fluid [--quick]`.

Reference: the fluid model of DCQCN by its authors (Zhu, Ghobadi, Misra, Padhye, CoNEXT 2016;
validation/dcqcn_model.py has the equations), integrated here with the packet engine's own
DCQCN options (netcore/packet/options.py DEFAULTS) converted to packets. Scenario: N long
flows from N senders through one switch into one receiver (a star: every link `gbps`, 1 us);
the bottleneck is the switch port to the receiver. The packet engine runs the same star with
`transport = "dcqcn"` and PFC, driven step by step (netcore/packet/incremental.py) to read each
sender's link bytes (its sending rate) every 100 us and the bottleneck queue every 10 us
(`sample_queues_us`).

Compared in the steady window (the second half of the run): mean bottleneck queue, bottleneck
utilisation, per-flow rate (mean, min, max), Jain fairness; and for one join scenario the
time the joining flow needs to reach 90% of its fair share. Nothing is fitted. Writes
validation/results/dcqcn_fluid.md and docs/dcqcn_fluid.png; about a minute.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from validation.dcqcn_model import Params, fixed_point, integrate, jain

ROOT = Path(__file__).resolve().parent.parent
OUT_MD = ROOT / "validation" / "results" / "dcqcn_fluid.md"
OUT_PNG = ROOT / "docs" / "dcqcn_fluid.png"
LAT_US = 1.0
MTU = 1000  # the DCQCN papers' 1 KB packets (see the write-up for MTU 9000)
CNP_BYTES = 64  # wire size of a CNP in the engine (see tau_star)
STEADY = [(100, n, MTU) for n in (2, 4, 8, 16, 32)] + [(400, 4, MTU), (400, 16, MTU),
                                                      (100, 2, 9000), (100, 4, 9000)]
T_END = 0.2          # s; steady window = [T_END/2, T_END]
JOIN = (100, 4, MTU)  # N-1 flows from 0, the N-th joins at T_JOIN
T_JOIN, T_JOIN_END = 0.1, 0.25
RATE_STEP = 100e-6    # engine rate samples
SMOOTH = 1e-3         # rates are averaged over 1 ms windows for convergence


def star(n_senders: int, gbps_: float):
    from topo.topology import Topology, gbps, us

    nh = n_senders + 1
    return Topology("custom", nh, 1, list(range(nh)), [nh] * nh, [gbps(gbps_)] * nh,
                    [us(LAT_US)] * nh, [0] * nh)


def tau_star(gbps_: float, mtu: int) -> float:
    """Feedback delay of the star without queueing: a data frame crosses two links
    (latency + serialisation each), its CNP two links back."""
    bps = gbps_ * 1e9 / 8
    return 4 * LAT_US * 1e-6 + 2 * (mtu + 2) / bps + 2 * CNP_BYTES / bps


def params(gbps_: float, mtu: int) -> Params:
    return Params.from_engine(gbps_, tau_star(gbps_, mtu), mtu=mtu)


def run_packet(gbps_: float, n: int, mtu: int, t_end: float, start=None):
    """The engine on the star; returns t (rate sample ends), per-flow rates (Gb/s, per
    RATE_STEP), bottleneck rate (Gb/s), queue sample times and bytes, and the Result info."""
    from netcore.packet.incremental import PacketIncremental
    from topo.routing import Routing

    t = star(n, gbps_)
    inc = PacketIncremental(t, Routing(t, "shortest"), None, transport="dcqcn", mtu=mtu,
                            sample_queues_us=10.0)
    start = np.zeros(n) if start is None else np.asarray(start, float)
    inc.add_transfers(np.arange(n), np.full(n, n), np.full(n, 10 ** 12), start_s=start)
    src, dst = np.asarray(t.dlink_src), np.asarray(t.dlink_dst)
    up = np.array([int(np.flatnonzero((src == i) & (dst == n + 1))[0]) for i in range(n)])
    bott = int(np.flatnonzero((src == n + 1) & (dst == n))[0])
    steps = int(round(t_end / RATE_STEP))
    sent = np.zeros((steps + 1, n))
    bb = np.zeros(steps + 1)
    pause = np.zeros(steps + 1)  # PFC pause time of the sender links so far, s
    for k in range(1, steps + 1):
        inc.advance(k * RATE_STEP)
        ls = inc._sim.link_stats()
        b = ls["bytes"]
        sent[k], bb[k] = b[up], b[bott]
        pause[k] = float(np.asarray(ls["pause_ps"])[up].sum()) / 1e12
    qt = np.asarray(inc._sim.sample_times(), float)  # seconds
    q = np.asarray(inc._sim.sample_queues(), float).reshape(len(qt), t.n_dlinks)[:, bott]
    frame = mtu + 2
    to_gbps = 8 / RATE_STEP / 1e9
    half = steps // 2
    info = {"pause_s": pause[-1], "pause_steady_s": pause[-1] - pause[half]}
    return (np.arange(1, steps + 1) * RATE_STEP, np.diff(sent, axis=0).T * to_gbps,
            np.diff(bb) * to_gbps, qt, q * frame, info)


def run_fluid(gbps_: float, n: int, mtu: int, t_end: float, start=None):
    P = params(gbps_, mtu)
    r = integrate(P, n, t_end, start=start)
    g = P.frame * 8 / 1e9
    return r["t"], r["rc"] * g, r["q"] * P.frame, P


def window_avg(t, x, width):
    """Mean of x over consecutive windows of `width` s (x sampled at t, even steps)."""
    step = t[1] - t[0]
    k = max(1, int(round(width / step)))
    m = x.shape[-1] // k
    return t[k - 1:m * k:k], x[..., :m * k].reshape(*x.shape[:-1], m, k).mean(-1)


def steady(gbps_, n, mtu):
    lo = T_END / 2
    ft, frc, fq, P = run_fluid(gbps_, n, mtu, T_END)
    fp = fixed_point(P, n)
    fsel = ft >= lo
    w = time.perf_counter()
    pt, prc, pb, qt, qb, info = run_packet(gbps_, n, mtu, T_END)
    wall = time.perf_counter() - w
    psel, qsel = pt > lo, qt >= lo
    f_rates, p_rates = frc[:, fsel].mean(1), prc[:, psel].mean(1)
    return {
        "gbps": gbps_, "n": n, "mtu": mtu, "wall": wall, "fixed_q": fp["q"] * P.frame,
        "fixed_p": fp["p"], "pause_s": info["pause_s"], "pause_steady_s": info["pause_steady_s"],
        "queue_kb": (fq[fsel].mean() / 1e3, qb[qsel].mean() / 1e3),
        "queue_sd_kb": (fq[fsel].std() / 1e3, qb[qsel].std() / 1e3),
        "util": (min(frc[:, fsel].sum(0).mean(), gbps_) / gbps_, pb[psel].mean() / gbps_),
        "rate_mean": (f_rates.mean(), p_rates.mean()),
        "rate_min": (f_rates.min(), p_rates.min()),
        "rate_max": (f_rates.max(), p_rates.max()),
        "jain": (jain(f_rates), jain(p_rates)),
        # 1 ms rates: how far a flow strays from the fair share within the window
        "rate_1ms_cv": (0.0, float(np.std(window_avg(pt[psel], prc[:, psel], SMOOTH)[1])
                                   / (gbps_ / n))),
    }


def converge_time(t, rate, t_join, share, frac=0.9):
    """First time after t_join at which the 1-ms average rate reaches frac x share."""
    tw, rw = window_avg(t, rate, SMOOTH)
    hit = np.flatnonzero((tw > t_join) & (rw >= frac * share))
    return float(tw[hit[0]] - t_join) if len(hit) else float("nan")


def join():
    g, n, mtu = JOIN
    start = np.zeros(n)
    start[-1] = T_JOIN
    ft, frc, fq, _ = run_fluid(g, n, mtu, T_JOIN_END, start=start)
    pt, prc, pb, qt, qb, _ = run_packet(g, n, mtu, T_JOIN_END, start=start)
    share = g / n
    return {"fluid": (ft, frc, fq), "packet": (pt, prc, qt, qb),
            "conv": (converge_time(ft, frc[-1], T_JOIN, share),
                     converge_time(pt, prc[-1], T_JOIN, share))}


def err(f, p):
    return (p - f) / f if f else float("nan")


def table(rows, jn) -> str:
    out = ["# DCQCN: packet engine against the fluid model", "",
           "Written by `python -m validation.dcqcn_fluid` (docs/packet_engine.md, \"DCQCN "
           "against its fluid model\", explains the reference, the mapping and the errors). "
           f"N long flows, N senders -> one switch -> one receiver, every link of the given "
           f"speed and {LAT_US:g} us; engine defaults for DCQCN and PFC; steady window "
           f"{T_END / 2 * 1e3:g}-{T_END * 1e3:g} ms. Error = (packet - fluid) / fluid. "
           "Fluid q* = the model's analytical fixed point (the integrated model reaches it).",
           "", "| scenario | metric | fluid model | packet engine | error |", "|---|---|---|---|---|"]
    for r in rows:
        sc = f"{r['n']} flows, {r['gbps']:g} Gb/s, MTU {r['mtu']}"
        f, p = r["queue_kb"]
        out.append(f"| {sc} | mean queue (KB) | {f:.1f} (q* {r['fixed_q'] / 1e3:.1f}) | "
                   f"{p:.1f} | {err(f, p):+.0%} |")
        f, p = r["queue_sd_kb"]
        out.append(f"| {sc} | queue std dev (KB) | {f:.1f} | {p:.1f} | |")
        f, p = r["util"]
        out.append(f"| {sc} | bottleneck utilisation | {f:.3f} | {p:.3f} | {err(f, p):+.1%} |")
        f, p = r["rate_mean"]
        out.append(f"| {sc} | mean flow rate (Gb/s) | {f:.2f} | {p:.2f} | {err(f, p):+.1%} |")
        out.append(f"| {sc} | min / max flow rate (Gb/s) | {r['rate_min'][0]:.2f} / "
                   f"{r['rate_max'][0]:.2f} | {r['rate_min'][1]:.2f} / {r['rate_max'][1]:.2f}"
                   f" | |")
        f, p = r["jain"]
        out.append(f"| {sc} | Jain fairness (window means) | {f:.4f} | {p:.4f} | "
                   f"{p - f:+.4f} |")
        out.append(f"| {sc} | 1 ms rate std dev / fair share | 0 | {r['rate_1ms_cv'][1]:.2f} | |")
    g, n, mtu = JOIN
    f, p = jn["conv"]
    out += ["", f"Join: {n - 1} flows from t = 0, the {n}th joins at {T_JOIN * 1e3:g} ms "
            f"({g:g} Gb/s, MTU {mtu}); time until the joiner's 1 ms rate reaches 90% of "
            f"C/{n}:", "", "| scenario | metric | fluid model | packet engine | error |",
            "|---|---|---|---|---|",
            f"| join {n - 1}+1, {g:g} Gb/s | convergence time (ms) | {f * 1e3:.1f} | "
            f"{p * 1e3:.1f} | {err(f, p):+.0%} |", ""]
    return "\n".join(out)


def figure(jn, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ft, frc, fq = jn["fluid"]
    pt, prc, qt, qb = jn["packet"]
    fig, ax = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    tw, rw = window_avg(pt, prc, 0.5e-3)
    for i in range(frc.shape[0]):
        c = f"C{i}"
        ax[0].plot(ft * 1e3, frc[i], color=c, lw=1.5, label=f"flow {i} fluid")
        ax[0].plot(tw * 1e3, rw[i], color=c, lw=0.8, ls="--", label=f"flow {i} packet (0.5 ms)")
    ax[0].set_ylabel("rate (Gb/s)")
    ax[0].legend(fontsize=7, ncol=2)
    tq, qw = window_avg(qt, qb, 0.5e-3)
    ax[1].plot(ft * 1e3, fq / 1e3, color="k", lw=1.5, label="fluid")
    ax[1].plot(tq * 1e3, qw / 1e3, color="C3", lw=0.8, label="packet (0.5 ms mean)")
    ax[1].set_ylabel("bottleneck queue (KB)")
    ax[1].set_xlabel("time (ms)")
    ax[1].legend(fontsize=8)
    g, n, mtu = JOIN
    fig.suptitle(f"DCQCN, {n - 1} flows + 1 joining at {T_JOIN * 1e3:g} ms, {g:g} Gb/s, "
                 f"MTU {mtu}: fluid model vs packet engine", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="only the 100 Gb/s MTU 1000 cases")
    ap.add_argument("--out", default=str(OUT_MD))
    ap.add_argument("--figure", default=str(OUT_PNG))
    a = ap.parse_args(argv)
    cases = [c for c in STEADY if not a.quick or (c[0] == 100 and c[2] == MTU)]
    rows = []
    for c in cases:
        r = steady(*c)
        rows.append(r)
        print(f"{c}: queue fluid {r['queue_kb'][0]:.1f} KB packet {r['queue_kb'][1]:.1f} KB, "
              f"util {r['util'][1]:.3f}, jain {r['jain'][1]:.4f}, pause {r['pause_s']:.2e} s (steady {r['pause_steady_s']:.2e}) "
              f"({r['wall']:.1f} s)", flush=True)
    jn = join()
    print(f"join: convergence fluid {jn['conv'][0] * 1e3:.1f} ms, packet "
          f"{jn['conv'][1] * 1e3:.1f} ms")
    Path(a.out).write_text(table(rows, jn))
    figure(jn, a.figure)
    print(f"wrote {a.out} and {a.figure}")


if __name__ == "__main__":
    main()
