import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from compute.critical_path import evaluate
from compute.report import _union_len, chrome_trace, summarize
from compute.training import build_step

SMALL = dict(layers=4, hidden=256, heads=8, seq=128, vocab=512)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 20)), max_size=30))
def test_union_length_matches_a_grid_count(iv):
    s = np.array([a for a, _ in iv], dtype=float)
    e = np.array([a + b for a, b in iv], dtype=float)
    grid = np.zeros(80, bool)
    for a, b in zip(s.astype(int), e.astype(int)):
        grid[a:b] = True
    assert _union_len(s, e) == grid.sum()


def _run(par, **kw):
    s = build_step(SMALL, par, "A100-80GB", n_hosts=8, host_group=[i // 2 for i in range(8)],
                   symmetry="none", **kw)
    st_, en = evaluate(s, 5e9, 2e-6)
    return s, summarize(s, st_, en)


def test_mfu_and_exposed_communication():
    par = dict(tp=2, pp=1, global_batch=8, bucket_mb=0.2)
    s, r = _run(par)
    m = s.meta
    assert r["mfu"] == pytest.approx(m["model_flops_per_step"] /
                                     (r["step_time_s"] * m["peak_flops"] * 8))
    assert r["tokens_per_s"] == pytest.approx(8 * 128 / r["step_time_s"])
    # every rank's compute + exposed communication + idle adds up to the step
    total = r["compute_s_per_gpu"] + r["exposed_comm_total_s"] + r["idle_s_per_gpu"]
    assert total == pytest.approx(r["step_time_s"], rel=1e-9)
    assert max(r["exposed_comm_s"].values()) <= r["exposed_comm_total_s"] + 1e-15
    # local TP blocks the stream: all of it is exposed, and it equals the priced TP time
    tp_nodes = s.extra["ckind"] == 1
    per_rank = s.duration[tp_nodes].sum() / 8 + s.extra["tp_s"][s.kind == 1].sum() / 8
    assert r["exposed_comm_s"]["tp"] == pytest.approx(per_rank, rel=1e-9)
    # overlapping the gradient reduction with the backward hides part of it
    _, r2 = _run(dict(par, overlap_grad_reduce=False))
    assert r["exposed_comm_s"]["dp"] < r2["exposed_comm_s"]["dp"]
    assert r["step_time_s"] < r2["step_time_s"]


def test_trace_has_every_timed_node(tmp_path):
    s, _ = _run(dict(tp=2, pp=2, global_batch=4), granularity="op")
    st_, en = evaluate(s, 5e9, 2e-6)
    tr = chrome_trace(s, st_, en, tmp_path / "t.json")
    xs = [e for e in tr["traceEvents"] if e["ph"] == "X"]
    timed = int(((en - st_) > 0).sum()) + 0
    assert len(xs) == timed or len(xs) == timed + int(((en - st_) == 0) & (s.kind == 0)).sum()
    assert {e["pid"] for e in xs} == set(range(8))
