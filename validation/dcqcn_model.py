"""The DCQCN fluid model (validation reference for the packet engine's `dcqcn`; see
validation/dcqcn_fluid.py and docs/packet_engine.md, "DCQCN against its fluid model").

Model: Zhu, Ghobadi, Misra, Padhye, "ECN or Delay: Lessons Learnt from Analysis of DCQCN and
TIMELY", CoNEXT 2016, section 3 (the fluid model of DCQCN, written by the DCQCN authors; the
algorithm is Zhu et al., SIGCOMM 2015, section 3). Written here from the published equations
in numpy; nothing is fitted. Units: packets (one packet = one full wire frame of the packet
engine, MTU + L2 header bytes) and seconds.

For flow i with current rate R_C, target rate R_T and alpha a, all of them and the marking
probability p seen through the feedback delay tau* (subscript d = value at t - tau*):

    p(q)    = 0 below Kmin, pmax (q - Kmin)/(Kmax - Kmin) up to Kmax, 1 above     (RED at the CP)
    dq/dt   = sum_i R_C,i - C                                                     (q >= 0)
    da/dt   = g/tau' ((1 - (1 - p_d)^(tau' R_C,d)) - a)
    dR_T/dt = -(R_T - R_C) A/tau + R_AI R_C,d (b (1-p_d)^(F B) + d (1-p_d)^(F T R_C,d))
    dR_C/dt = -R_C a A/(2 tau) + (R_T - R_C)/2 R_C,d (b + d)

with A = 1 - (1 - p_d)^(tau R_C,d) (a CNP in a CNP interval tau: the chance one of its packets
is marked), b = p_d / ((1 - p_d)^(-B) - 1) (byte-counter expiries per packet, a counter of B
packets restarted by every cut) and d = p_d / ((1 - p_d)^(-T R_C,d) - 1) (rate-timer expiries
per packet, a timer of T seconds restarted by every cut). The (1-p)^(F.) factors are the chance
that F stages passed without a cut (additive instead of fast-recovery increase). The model has
no hyper increase, no minimum rate, no PFC, no packets and no timer phase.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from netcore.packet.options import DEFAULTS, L3L4_HEADER


@dataclass(frozen=True)
class Params:
    """Everything in packets and seconds."""
    C: float          # bottleneck capacity, packets/s
    line: float       # a sender's line rate (cap on R_C and R_T), packets/s
    kmin: float       # packets
    kmax: float       # packets
    pmax: float
    g: float
    tau: float        # CNP interval, s
    tau_p: float      # alpha timer, s
    T: float          # rate-increase timer, s
    B: float          # byte counter, packets
    F: int
    r_ai: float       # packets/s
    tau_star: float   # feedback delay, s
    frame: int        # bytes per packet (wire)

    @classmethod
    def from_engine(cls, gbps: float, tau_star: float, line_gbps: float | None = None,
                    **opts) -> "Params":
        """The packet engine's dcqcn options (netcore/packet/options.py DEFAULTS, overridden
        by `opts`) in the model's units. The packet is a full data frame on the wire."""
        o = dict(DEFAULTS, transport="dcqcn", **opts)
        frame = o["mtu"] + o["l2_header_bytes"]
        pps = lambda g_: g_ * 1e9 / 8 / frame  # noqa: E731
        return cls(C=pps(gbps), line=pps(line_gbps or gbps), kmin=o["kmin_bytes"] / frame,
                   kmax=o["kmax_bytes"] / frame, pmax=o["pmax"], g=o["dcqcn_g"],
                   tau=o["cnp_interval_us"] * 1e-6, tau_p=o["alpha_timer_us"] * 1e-6,
                   T=o["rate_timer_us"] * 1e-6, B=o["byte_counter_bytes"] / frame,
                   F=o["fast_recovery_steps"], r_ai=pps(o["rate_ai_gbps"]),
                   tau_star=tau_star, frame=frame)


def mark_prob(q, P: Params):
    q = np.asarray(q, dtype=np.float64)
    lin = P.pmax * (q - P.kmin) / (P.kmax - P.kmin)
    return np.where(q <= P.kmin, 0.0, np.where(q <= P.kmax, lin, 1.0))


def _expiries(p, n):
    """p / ((1-p)^(-n) - 1): expiries per packet of a counter of n packets that every mark
    restarts; 1/n at p = 0, 0 at p = 1."""
    p = np.asarray(p, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        lp = np.log1p(-np.minimum(p, 1 - 1e-15))
        den = np.expm1(-n * lp)
        out = np.where(p <= 1e-15, 1.0 / np.maximum(n, 1e-300), p / den)
    return np.where(p >= 1.0, 0.0, out)


def _pow1m(p, x):
    """(1 - p)^x, exact at p = 1."""
    p = np.asarray(p, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.where(p >= 1.0, np.where(np.asarray(x) > 0, 0.0, 1.0),
                        np.exp(np.asarray(x) * np.log1p(-np.minimum(p, 1 - 1e-15))))


def derivatives(rc, rt, alpha, q, rc_d, p_d, P: Params):
    """Right-hand side of the model (vectors over flows; q scalar). Returns d(rc, rt, alpha, q)."""
    A = 1.0 - _pow1m(p_d, P.tau * rc_d)
    b = _expiries(p_d, P.B)
    d = _expiries(p_d, P.T * rc_d)
    c = b * _pow1m(p_d, P.F * P.B)
    e = d * _pow1m(p_d, P.F * P.T * rc_d)
    dalpha = P.g / P.tau_p * ((1.0 - _pow1m(p_d, P.tau_p * rc_d)) - alpha)
    drt = -(rt - rc) * A / P.tau + P.r_ai * rc_d * (c + e)
    drc = -rc * alpha * A / (2 * P.tau) + (rt - rc) / 2 * rc_d * (b + d)
    dq = float(np.sum(rc)) - P.C
    return drc, drt, dalpha, dq


def integrate(P: Params, n: int, t_end: float, dt: float = 0.1e-6, start=None,
              every: float = 10e-6):
    """Forward Euler with a fixed step `dt`, the delayed terms read from the stored history
    (tau* rounded to whole steps). Flow i is off until `start[i]` (s; default 0) and then
    starts at line rate with R_T = line rate and alpha = 1, as the engine's senders. Returns a
    dict of series sampled every `every` seconds: t, q (packets), rc and alpha (flows x
    samples). The loop is compiled with numba (the same equations as `derivatives`)."""
    steps = int(round(t_end / dt))
    lag = max(1, int(round(P.tau_star / dt)))
    start = np.zeros(n) if start is None else np.asarray(start, dtype=np.float64)
    stride = max(1, int(round(every / dt)))
    pars = np.array([P.C, P.line, P.kmin, P.kmax, P.pmax, P.g, P.tau, P.tau_p, P.T, P.B,
                     P.F, P.r_ai], dtype=np.float64)
    ts, qs, rcs, als = _euler(pars, start, steps, dt, lag, stride)
    return {"t": ts, "q": qs, "rc": rcs, "alpha": als}


def _kernel():
    from numba import njit

    @njit(cache=True)
    def pow1m(p, x):
        if p >= 1.0:
            return 0.0 if x > 0 else 1.0
        return math.exp(x * math.log1p(-p))

    @njit(cache=True)
    def expiries(p, m):
        if p <= 1e-15:
            return 1.0 / max(m, 1e-300)
        if p >= 1.0:
            return 0.0
        return p / math.expm1(-m * math.log1p(-p))

    @njit(cache=True)
    def euler(pars, start, steps, dt, lag, stride):
        C, line, kmin, kmax, pmax, g = pars[0], pars[1], pars[2], pars[3], pars[4], pars[5]
        tau, tau_p, T, B, F, r_ai = pars[6], pars[7], pars[8], pars[9], pars[10], pars[11]
        n = start.shape[0]
        rc = np.zeros(n)
        rt = np.full(n, line)
        al = np.ones(n)
        on = np.zeros(n, np.bool_)
        h_rc = np.zeros((lag + 1, n))
        h_p = np.zeros(lag + 1)
        q = 0.0
        ns = steps // stride + 1
        ts = np.zeros(ns)
        qs = np.zeros(ns)
        rcs = np.zeros((n, ns))
        als = np.zeros((n, ns))
        s = 0
        for k in range(steps):
            t = k * dt
            for i in range(n):
                if not on[i] and start[i] <= t:  # joins at line rate, fresh state; its
                    on[i] = True                 # history: as if it had always sent
                    rc[i] = line
                    rt[i] = line
                    al[i] = 1.0
                    for j in range(lag + 1):
                        h_rc[j, i] = line
            j = k % (lag + 1)
            jd = (k + 1) % (lag + 1)  # the entry written lag steps ago
            if q <= kmin:
                p = 0.0
            elif q <= kmax:
                p = pmax * (q - kmin) / (kmax - kmin)
            else:
                p = 1.0
            h_p[j] = p
            for i in range(n):
                h_rc[j, i] = rc[i]
            p_d = h_p[jd] if k >= lag else 0.0
            if k % stride == 0 and s < ns:
                ts[s] = t
                qs[s] = q
                for i in range(n):
                    rcs[i, s] = rc[i]
                    als[i, s] = al[i]
                s += 1
            b = expiries(p_d, B)
            c = b * pow1m(p_d, F * B)
            tot = 0.0
            for i in range(n):
                if not on[i]:
                    continue
                r_d = h_rc[jd, i] if k >= lag else rc[i]
                A = 1.0 - pow1m(p_d, tau * r_d)
                d = expiries(p_d, T * r_d)
                e = d * pow1m(p_d, F * T * r_d)
                dal = g / tau_p * ((1.0 - pow1m(p_d, tau_p * r_d)) - al[i])
                drt = -(rt[i] - rc[i]) * A / tau + r_ai * r_d * (c + e)
                drc = -rc[i] * al[i] * A / (2 * tau) + (rt[i] - rc[i]) / 2 * r_d * (b + d)
                rc[i] = min(max(rc[i] + dt * drc, 0.0), line)
                rt[i] = min(max(rt[i] + dt * drt, 0.0), line)
                al[i] = min(max(al[i] + dt * dal, 0.0), 1.0)
                tot += rc[i]
            q = max(0.0, q + dt * (tot - C))
        return ts[:s], qs[:s], rcs[:, :s], als[:, :s]

    return euler


_EULER = None


def _euler(*args):
    global _EULER
    if _EULER is None:
        _EULER = _kernel()
    return _EULER(*args)


def fixed_point(P: Params, n: int):
    """The symmetric fixed point of n flows on one bottleneck: R_C = C/n, dR_C = dR_T = da = 0
    solved for p (bisection on the one equation left), then q from the RED line. Returns
    dict(p, q, rc, rt, alpha, cnp)."""
    r = P.C / n

    def rt_of(p):  # dR_T = 0
        A = 1.0 - _pow1m(p, P.tau * r)
        b, d = _expiries(p, P.B), _expiries(p, P.T * r)
        c, e = b * _pow1m(p, P.F * P.B), d * _pow1m(p, P.F * P.T * r)
        return float(r + P.r_ai * r * (c + e) * P.tau / A)

    def f(p):  # dR_C at R_T = rt_of(p), alpha = its fixed point
        A = 1.0 - _pow1m(p, P.tau * r)
        al = 1.0 - _pow1m(p, P.tau_p * r)
        b, d = _expiries(p, P.B), _expiries(p, P.T * r)
        return float(-r * al * A / (2 * P.tau) + (rt_of(p) - r) / 2 * r * (b + d))

    lo, hi = 1e-12, P.pmax  # f > 0 (increase wins) at tiny p, < 0 at pmax for these rates
    if f(lo) <= 0 or f(hi) >= 0:
        raise ValueError("no fixed point with Kmin < q < Kmax")
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if f(mid) > 0:
            lo = mid
        else:
            hi = mid
    p = math.sqrt(lo * hi)
    return {"p": p, "q": P.kmin + p / P.pmax * (P.kmax - P.kmin), "rc": r, "rt": rt_of(p),
            "alpha": float(1.0 - _pow1m(p, P.tau_p * r)),
            "cnp": float((1.0 - _pow1m(p, P.tau * r)) / P.tau)}  # cuts per flow per second


def jain(x) -> float:
    x = np.asarray(x, dtype=np.float64)
    return float(x.sum() ** 2 / (len(x) * (x ** 2).sum())) if (x > 0).any() else 0.0


def header_bytes() -> int:
    return L3L4_HEADER["dcqcn"]
