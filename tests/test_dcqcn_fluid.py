"""DCQCN against its fluid model (validation/dcqcn_fluid.py; docs/packet_engine.md, "DCQCN
against its fluid model"): the model's fixed point solves its own equations and the integrated
model reaches it, and the packet engine's steady queue for 4 flows at 100 Gb/s sits where the
write-up says it does relative to the model."""
import numpy as np
import pytest

from validation import dcqcn_fluid as V
from validation.dcqcn_model import Params, derivatives, fixed_point, integrate, mark_prob
from validation.dcqcn_rp import mean_rate


@pytest.mark.parametrize("n", [2, 4, 16])
def test_fixed_point_solves_the_model(n):
    P = V.params(100, 1000)
    fp = fixed_point(P, n)
    rc = np.full(n, fp["rc"])
    p = float(mark_prob(fp["q"], P))
    assert p == pytest.approx(fp["p"], rel=1e-9)  # q* lies on the RED line
    drc, drt, dal, dq = derivatives(rc, np.full(n, fp["rt"]), np.full(n, fp["alpha"]), fp["q"],
                                    rc, p, P)
    # every derivative vanishes (relative to the size of its terms: a cut rate r*alpha*A/2tau)
    scale = fp["rc"] * fp["alpha"] * fp["cnp"] / 2
    assert np.abs(drc).max() < 1e-6 * scale and np.abs(drt).max() < 1e-6 * scale
    assert np.abs(dal).max() < 1e-9 and abs(dq) < 1e-6 * P.C
    assert P.kmin < fp["q"] < P.kmax and fp["rt"] > fp["rc"]


def test_integrated_model_reaches_the_fixed_point():
    P = V.params(100, 1000)
    r = integrate(P, 4, 0.15)
    fp = fixed_point(P, 4)
    assert r["q"][-1] == pytest.approx(fp["q"], rel=0.01)
    assert r["rc"][:, -1] == pytest.approx(P.C / 4, rel=1e-4)


def test_parameters_are_the_engines():
    from netcore.packet.options import DEFAULTS

    P = Params.from_engine(100, 4e-6, mtu=1000)
    assert P.kmin * P.frame == DEFAULTS["kmin_bytes"] and P.tau == DEFAULTS["cnp_interval_us"] * 1e-6
    assert P.r_ai * P.frame * 8 == pytest.approx(DEFAULTS["rate_ai_gbps"] * 1e9)


def test_packet_engine_queue_against_the_fluid_model():
    # 4 flows, 100 Gb/s, MTU 1000, window 100-200 ms, as in validation/results/dcqcn_fluid.md.
    # Measured: mean queue +22% over the model's q* (+11% to +35% for 2..16 flows at MTU 1000),
    # explained by the model's mean-field rate law (the RP alone holds ~24% more than the model
    # at p*, next test); tolerance: that band widened by 10 points on each side.
    pt, prc, pb, qt, qb, info = V.run_packet(100, 4, 1000, V.T_END)
    P = V.params(100, 1000)
    q_star = fixed_point(P, 4)["q"] * P.frame
    sel = qt >= V.T_END / 2
    ratio = qb[sel].mean() / q_star
    assert 1.0 <= ratio <= 1.45, ratio
    steady = pt > V.T_END / 2
    assert pb[steady].mean() / 100 > 0.99  # bottleneck busy, as the model's
    rates = prc[:, steady].mean(1)
    assert rates.sum() ** 2 / (4 * (rates ** 2).sum()) > 0.99  # Jain fairness
    assert info["pause_steady_s"] == 0  # no PFC in the steady state: DCQCN alone holds it
    assert info["mark_frac"] > fixed_point(P, 4)["p"]  # more marks than p*: see the write-up


def test_reaction_point_holds_more_than_the_fluid_model_at_its_fixed_point():
    # the diagnosis of the queue error: the algorithm itself (event by event, independent
    # marks) at the model's p* holds 1.23-1.26x the fair share (write-up); so the bottleneck
    # must mark more, hence the higher queue.
    P = V.params(100, 1000)
    fp = fixed_point(P, 4)
    rate, cnps = mean_rate(fp["p"], 100, 1000, t_end=3.0)
    assert 1.15 < rate / 25.0 < 1.35
    assert cnps > fp["cnp"]
