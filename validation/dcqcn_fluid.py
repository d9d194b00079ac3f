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

The engine runs twice: with its defaults (PFC on) and with PFC out of reach (the model has
none). Compared in the steady window (the second half of the run): mean bottleneck queue,
marked fraction and CNP rate, bottleneck utilisation, per-flow rate (mean, min, max), Jain
fairness; for one join scenario the joiner's settling time and the peak queue; and, as a
diagnosis, the rate one reaction point alone holds at the model's p* and at the engine's
marked fraction (validation/dcqcn_rp.py). Nothing is fitted. Writes
validation/results/dcqcn_fluid.md and docs/dcqcn_fluid.png; about 30 s.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from validation.dcqcn_model import Params, fixed_point, integrate, jain, mark_prob

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


NO_PFC = {"buffer_packets": 1_000_000, "pfc_xoff_bytes": 500_000_000}  # never reached


def run_packet(gbps_: float, n: int, mtu: int, t_end: float, start=None, pfc: bool = True):
    """The engine on the star; returns t (rate sample ends), per-flow rates (Gb/s, per
    RATE_STEP), bottleneck rate (Gb/s), queue sample times and bytes, and the Result info."""
    from netcore.packet.incremental import PacketIncremental
    from topo.routing import Routing

    t = star(n, gbps_)
    inc = PacketIncremental(t, Routing(t, "shortest"), None, transport="dcqcn", mtu=mtu,
                            sample_queues_us=10.0, **({} if pfc else NO_PFC))
    start = np.zeros(n) if start is None else np.asarray(start, float)
    inc.add_transfers(np.arange(n), np.full(n, n), np.full(n, 10 ** 12), start_s=start)
    src, dst = np.asarray(t.dlink_src), np.asarray(t.dlink_dst)
    up = np.array([int(np.flatnonzero((src == i) & (dst == n + 1))[0]) for i in range(n)])
    bott = int(np.flatnonzero((src == n + 1) & (dst == n))[0])
    steps = int(round(t_end / RATE_STEP))
    sent = np.zeros((steps + 1, n))
    bb = np.zeros(steps + 1)
    pause = np.zeros(steps + 1)  # PFC pause time of the sender links so far, s
    marks = np.zeros((steps + 1, 3))  # bottleneck ECN marks and packets, CNPs so far
    rev = int(np.flatnonzero((src == n) & (dst == n + 1))[0])  # receiver -> switch: CNPs
    for k in range(1, steps + 1):
        inc.advance(k * RATE_STEP)
        ls = inc._sim.link_stats()
        b = ls["bytes"]
        sent[k], bb[k] = b[up], b[bott]
        pause[k] = float(np.asarray(ls["pause_ps"])[up].sum()) / 1e12
        marks[k] = ls["ecn_marks"][bott], ls["packets"][bott], ls["packets"][rev]
    qt = np.asarray(inc._sim.sample_times(), float)  # seconds
    q = np.asarray(inc._sim.sample_queues(), float).reshape(len(qt), t.n_dlinks)[:, bott]
    frame = mtu + 2
    to_gbps = 8 / RATE_STEP / 1e9
    half = steps // 2
    m = marks[-1] - marks[half]
    info = {"pause_s": pause[-1], "pause_steady_s": pause[-1] - pause[half],
            "mark_frac": m[0] / m[1] if m[1] else float("nan"),
            "cnp_per_flow_s": m[2] / n / (t_end - half * RATE_STEP)}
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


def _packet_stats(gbps_, n, mtu, pfc, lo):
    w = time.perf_counter()
    pt, prc, pb, qt, qb, info = run_packet(gbps_, n, mtu, T_END, pfc=pfc)
    psel, qsel = pt > lo, qt >= lo
    rates = prc[:, psel].mean(1)
    P = params(gbps_, mtu)
    return {"wall": time.perf_counter() - w, "pause_s": info["pause_s"],
            "pause_steady_s": info["pause_steady_s"], "mark": info["mark_frac"],
            "cnp": info["cnp_per_flow_s"],
            "mark_of_q": float(mark_prob(qb[qsel] / P.frame, P).mean()),
            "queue_kb": qb[qsel].mean() / 1e3, "queue_sd_kb": qb[qsel].std() / 1e3,
            "util": pb[psel].mean() / gbps_, "rate_mean": rates.mean(),
            "rate_min": rates.min(), "rate_max": rates.max(), "jain": jain(rates),
            "rate_1ms_cv": float(np.std(window_avg(pt[psel], prc[:, psel], SMOOTH)[1])
                                 / (gbps_ / n))}


def steady(gbps_, n, mtu):
    """Fluid model and the engine (with PFC, and with PFC out of reach) in the steady window."""
    lo = T_END / 2
    ft, frc, fq, P = run_fluid(gbps_, n, mtu, T_END)
    fp = fixed_point(P, n)
    fsel = ft >= lo
    f_rates = frc[:, fsel].mean(1)
    fluid = {"queue_kb": fq[fsel].mean() / 1e3, "queue_sd_kb": fq[fsel].std() / 1e3,
             "util": min(frc[:, fsel].sum(0).mean(), gbps_) / gbps_,
             "rate_mean": f_rates.mean(), "rate_min": f_rates.min(), "rate_max": f_rates.max(),
             "jain": jain(f_rates), "rate_1ms_cv": 0.0, "mark": fp["p"], "cnp": fp["cnp"],
             "mark_of_q": float(mark_prob(fq[fsel] / P.frame, P).mean())}
    return {"gbps": gbps_, "n": n, "mtu": mtu, "fixed_q_kb": fp["q"] * P.frame / 1e3,
            "fluid": fluid, "pfc": _packet_stats(gbps_, n, mtu, True, lo),
            "nopfc": _packet_stats(gbps_, n, mtu, False, lo)}


def settle_time(t, rate, t_join, share, band=0.1, width=5e-3):
    """Time after t_join from which the joiner's `width`-mean rate stays within +-band of
    its fair share until the end (nan if it never settles)."""
    tw, rw = window_avg(t, rate, width)
    sel = tw > t_join
    tw, rw = tw[sel], rw[sel]
    out = np.abs(rw / share - 1) > band
    if out[-1]:
        return float("nan")
    last = np.flatnonzero(out)
    return float((tw[last[-1]] if len(last) else tw[0] - width) + width - t_join)


def join():
    g, n, mtu = JOIN
    start = np.zeros(n)
    start[-1] = T_JOIN
    share = g / n
    ft, frc, fq, _ = run_fluid(g, n, mtu, T_JOIN_END, start=start)
    res = {"fluid": (ft, frc, fq), "conv": {"fluid": settle_time(ft, frc[-1], T_JOIN, share)}}
    for key, pfc in (("pfc", True), ("nopfc", False)):
        pt, prc, pb, qt, qb, _ = run_packet(g, n, mtu, T_JOIN_END, start=start, pfc=pfc)
        res[key] = (pt, prc, qt, qb)
        res["conv"][key] = settle_time(pt, prc[-1], T_JOIN, share)
    res["peak_q_kb"] = {"fluid": float(fq.max()) / 1e3, "pfc": float(res["pfc"][3].max()) / 1e3,
                        "nopfc": float(res["nopfc"][3].max()) / 1e3}
    return res


def diagnose(r, t_end=10.0):
    """The RP alone (validation/dcqcn_rp.py) under independent marks at the fluid model's p*
    and at the engine's measured marked fraction: which of the two holds the fair share."""
    from validation.dcqcn_rp import mean_rate

    share = r["gbps"] / r["n"]
    at_fluid = mean_rate(r["fluid"]["mark"], r["gbps"], r["mtu"], t_end=t_end)
    at_engine = mean_rate(r["pfc"]["mark"], r["gbps"], r["mtu"], t_end=t_end)
    return {"share": share, "at_fluid": at_fluid, "at_engine": at_engine}


def err(f, p):
    return (p - f) / f if f else float("nan")


ROWS = [  # key, label, format, error kind
    ("queue_kb", "mean queue (KB)", "{:.1f}", "rel"),
    ("queue_sd_kb", "queue std dev (KB)", "{:.1f}", None),
    ("mark", "marked fraction (fluid: p*)", "{:.2e}", "rel"),
    ("mark_of_q", "mean RED p(q(t))", "{:.2e}", "rel"),
    ("cnp", "CNPs per flow per second (fluid: A*/tau)", "{:.0f}", "rel"),
    ("util", "bottleneck utilisation", "{:.3f}", "rel"),
    ("rate_mean", "mean flow rate (Gb/s)", "{:.2f}", "rel"),
    ("rate_min", "min flow rate (Gb/s)", "{:.2f}", "rel"),
    ("rate_max", "max flow rate (Gb/s)", "{:.2f}", "rel"),
    ("jain", "Jain fairness (window means)", "{:.4f}", "abs"),
    ("rate_1ms_cv", "1 ms rate std dev / fair share", "{:.2f}", None),
]


def _e(kind, f, p):
    if kind == "rel":
        return f"{err(f, p):+.1%}"
    if kind == "abs":
        return f"{p - f:+.4f}"
    return ""


def table(rows, jn, diag) -> str:
    out = ["# DCQCN: packet engine against the fluid model", "",
           "Written by `python -m validation.dcqcn_fluid` (docs/packet_engine.md, \"DCQCN "
           "against its fluid model\", explains the reference, the mapping and the errors). "
           f"N long flows, N senders -> one switch -> one receiver, every link of the given "
           f"speed and {LAT_US:g} us; engine defaults for DCQCN and PFC (\"packet\"), and the "
           f"same with PFC out of reach (\"no PFC\": {NO_PFC}); steady window "
           f"{T_END / 2 * 1e3:g}-{T_END * 1e3:g} ms. Error = (packet - fluid) / fluid "
           "(Jain: difference). q* = the fluid model's analytical fixed point; the integrated "
           "model reaches it. Marked fraction: the engine's ECN marks / packets on the "
           "bottleneck in the window; mean RED p(q(t)): the marking curve applied to the "
           "queue samples (10 us).", "",
           "| scenario | metric | fluid model | packet | error | packet, no PFC | error |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        sc = f"{r['n']} flows, {r['gbps']:g} Gb/s, MTU {r['mtu']}"
        f, p, x = r["fluid"], r["pfc"], r["nopfc"]
        for key, label, fmt, kind in ROWS:
            fv = fmt.format(f[key])
            if key == "queue_kb":
                fv += f" (q* {r['fixed_q_kb']:.1f})"
            out.append(f"| {sc} | {label} | {fv} | {fmt.format(p[key])} | "
                       f"{_e(kind, f[key], p[key])} | {fmt.format(x[key])} | "
                       f"{_e(kind, f[key], x[key])} |")
        out.append(f"| {sc} | PFC pause of sender links in the window (s) | - | "
                   f"{p['pause_steady_s']:.2e} | | {x['pause_steady_s']:.2e} | |")
    g, n, mtu = JOIN
    c, pk = jn["conv"], jn["peak_q_kb"]
    out += ["", f"Join: {n - 1} flows from t = 0, the {n}th joins at {T_JOIN * 1e3:g} ms "
            f"({g:g} Gb/s, MTU {mtu}). Settling time: from the join until the joiner's 5 ms "
            f"mean rate stays within 10% of C/{n} to the end of the run "
            f"({T_JOIN_END * 1e3:g} ms); figure: docs/dcqcn_fluid.png.", "",
            "| scenario | metric | fluid model | packet | error | packet, no PFC | error |",
            "|---|---|---|---|---|---|---|",
            f"| join {n - 1}+1, {g:g} Gb/s | settling time (ms) | {c['fluid'] * 1e3:.1f} | "
            f"{c['pfc'] * 1e3:.1f} | {err(c['fluid'], c['pfc']):+.0%} | "
            f"{c['nopfc'] * 1e3:.1f} | {err(c['fluid'], c['nopfc']):+.0%} |",
            f"| join {n - 1}+1, {g:g} Gb/s | peak queue (KB) | {pk['fluid']:.0f} | "
            f"{pk['pfc']:.0f} | {err(pk['fluid'], pk['pfc']):+.0%} | {pk['nopfc']:.0f} | "
            f"{err(pk['fluid'], pk['nopfc']):+.0%} |", ""]
    out += ["Diagnosis of the queue error: one DCQCN reaction point alone, event by event "
            "(validation/dcqcn_rp.py: the paper's RP/NP algorithm, each packet marked "
            "independently with probability p, 10 s), at the fluid model's p* and at the "
            "engine's measured marked fraction. The rate the algorithm holds at a given p "
            "decides which p (hence which queue) the bottleneck settles at.", "",
            "| scenario | fair share (Gb/s) | p* (fluid) | RP rate at p* (Gb/s) | "
            "CNPs/s at p* (fluid A*/tau) | engine marked fraction | RP rate at it (Gb/s) | "
            "RP CNPs/s at it (engine) |", "|---|---|---|---|---|---|---|---|"]
    for r, d in diag:
        (rf, cf), (re_, ce) = d["at_fluid"], d["at_engine"]
        out.append(f"| {r['n']} flows, {r['gbps']:g} Gb/s, MTU {r['mtu']} | {d['share']:.2f} | "
                   f"{r['fluid']['mark']:.2e} | {rf:.2f} ({err(d['share'], rf):+.0%}) | "
                   f"{cf:.0f} ({r['fluid']['cnp']:.0f}) | {r['pfc']['mark']:.2e} | "
                   f"{re_:.2f} ({err(d['share'], re_):+.0%}) | {ce:.0f} ({r['pfc']['cnp']:.0f}) |")
    out.append("")
    return "\n".join(out)


def figure(jn, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ft, frc, fq = jn["fluid"]
    fig, ax = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    for a, key, title in ((ax[0], "pfc", "packet engine (PFC on)"),
                          (ax[1], "nopfc", "packet engine, PFC out of reach")):
        pt, prc = jn[key][0], jn[key][1]
        tw, rw = window_avg(pt, prc, 1e-3)
        for i in range(frc.shape[0]):
            a.plot(ft * 1e3, frc[i], color=f"C{i}", lw=1.6, label=f"flow {i} fluid")
            a.plot(tw * 1e3, rw[i], color=f"C{i}", lw=0.8, ls="--",
                   label=f"flow {i} packet (1 ms mean)")
        a.set_ylabel("rate (Gb/s)")
        a.set_ylim(0, None)
        a.set_title(f"fluid model (solid) and {title} (dashed)", fontsize=9)
    ax[0].legend(fontsize=6, ncol=2, loc="upper right")
    ax[2].plot(ft * 1e3, fq / 1e3, color="k", lw=1.6, label="fluid")
    for key, c, lab in (("pfc", "C3", "packet (PFC)"), ("nopfc", "C0", "packet, no PFC")):
        tq, qw = window_avg(jn[key][2], jn[key][3], 1e-3)
        ax[2].plot(tq * 1e3, qw / 1e3, color=c, lw=0.8, label=lab + " (1 ms mean)")
    ax[2].set_yscale("symlog", linthresh=100)
    ax[2].set_ylabel("bottleneck queue (KB)")
    ax[2].set_xlabel("time (ms)")
    ax[2].legend(fontsize=8)
    g, n, mtu = JOIN
    fig.suptitle(f"DCQCN, {n - 1} flows + 1 joining at {T_JOIN * 1e3:g} ms, {g:g} Gb/s, "
                 f"MTU {mtu}", fontsize=10)
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
        f, p, x = r["fluid"], r["pfc"], r["nopfc"]
        print(f"{c}: queue KB fluid {f['queue_kb']:.1f} packet {p['queue_kb']:.1f} no-PFC "
              f"{x['queue_kb']:.1f}; marks {f['mark']:.2e} {p['mark']:.2e} {x['mark']:.2e}; "
              f"util {p['util']:.3f} {x['util']:.3f}; jain {p['jain']:.4f} {x['jain']:.4f}; "
              f"steady pause {p['pause_steady_s']:.1e} s ({p['wall'] + x['wall']:.1f} s)",
              flush=True)
    diag = [(r, diagnose(r)) for r in rows if r["n"] <= 16]
    jn = join()
    c, pk = jn["conv"], jn["peak_q_kb"]
    print("join: settling " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in c.items())
          + "; peak queue " + ", ".join(f"{k} {v:.0f} KB" for k, v in pk.items()))
    Path(a.out).write_text(table(rows, jn, diag))
    figure(jn, a.figure)
    print(f"wrote {a.out} and {a.figure}")


if __name__ == "__main__":
    main()
