"""One DCQCN reaction point under random marks, event by event (a diagnostic for
validation/dcqcn_fluid.py): the RP/NP algorithm of Zhu et al., SIGCOMM 2015 (Figure 7 and
section 3: cut on CNP, alpha timer, rate timer and byte counter with F fast-recovery stages,
additive and hyper increase), driven by independent marks: each packet the flow sends is marked
with probability p (the marks of a fluid model), and the NP turns a mark into a CNP unless it
sent one less than `cnp_interval` ago. No queue, no feedback delay, no PFC. Written from the
paper's description, not from the engine's code, so it separates two questions: what mean rate
the algorithm holds at a given marking probability (this), and what the fluid model's
mean-field equations say it holds (validation/dcqcn_model.py).
"""
from __future__ import annotations

import math
import random

from netcore.packet.options import DEFAULTS


def mean_rate(p: float, gbps: float, mtu: int = 1000, t_end: float = 2.0, seed: int = 1,
              warm: float = 0.2, **opts):
    """Time-average rate (Gb/s) and CNPs per second of one RP at line rate `gbps` whose
    packets are marked independently with probability p. Options: the engine's names."""
    o = dict(DEFAULTS, **opts)
    frame = mtu + o["l2_header_bytes"]
    bps = 1e9 / 8  # bytes per second per Gb/s
    line = gbps * bps
    g, F = o["dcqcn_g"], o["fast_recovery_steps"]
    T, Tp, tau = o["rate_timer_us"] * 1e-6, o["alpha_timer_us"] * 1e-6, o["cnp_interval_us"] * 1e-6
    B, r_ai, r_hai = o["byte_counter_bytes"], o["rate_ai_gbps"] * bps, o["rate_hai_gbps"] * bps
    r_min = o["min_rate_gbps"] * bps
    rnd = random.Random(seed)
    rc = rt = line
    alpha = 1.0
    t = 0.0
    t_cnt = b_cnt = 0
    bc = 0.0  # bytes since the last byte-counter stage
    next_rate, next_alpha, last_cnp = T, Tp, -1.0
    area = cnps = 0.0
    lam_per_byte = -math.log1p(-p) / frame if p > 0 else 0.0  # marks per byte sent

    def increase():
        nonlocal rc, rt
        if max(t_cnt, b_cnt) < F:
            pass
        elif min(t_cnt, b_cnt) > F:
            rt += r_hai
        else:
            rt += r_ai
        rt = min(rt, line)
        rc = min(line, (rt + rc) / 2)

    next_mark_bytes = rnd.expovariate(lam_per_byte) if p > 0 else math.inf
    while t < t_end:
        # bytes until the next mark and the next byte-counter stage, at the current rate
        t_mark = t + next_mark_bytes / rc
        t_bc = t + (B - bc) / rc
        t_next = min(t_mark, t_bc, next_rate, next_alpha, t_end)
        sent = (t_next - t) * rc
        if t >= warm:
            area += sent
        elif t_next > warm:
            area += (t_next - warm) * rc
        bc += sent
        next_mark_bytes -= sent
        t = t_next
        if t >= t_end:
            break
        if t == t_mark:
            next_mark_bytes = rnd.expovariate(lam_per_byte)
            if last_cnp < 0 or t - last_cnp >= tau:  # the NP's CNP (one per interval)
                last_cnp = t
                if t >= warm:
                    cnps += 1
                rt = rc
                rc = max(r_min, rc * (1 - alpha / 2))
                alpha = (1 - g) * alpha + g
                t_cnt = b_cnt = 0
                bc = 0.0
                next_rate, next_alpha = t + T, t + Tp
        elif t == t_bc:
            bc = 0.0
            b_cnt += 1
            increase()
        elif t == next_rate:
            t_cnt += 1
            increase()
            next_rate = t + T
        else:
            alpha *= 1 - g
            next_alpha = t + Tp
    span = t_end - warm
    return area / span / bps, cnps / span
