"""The all-to-all diagnostics (validation/alltoall_diagnostics.py) on a tiny case: the flow
engine's rate series integrate to its link bytes, a packet run stopped early is a prefix of
the full one, end-time statistics and link classes."""
import numpy as np
import pytest

from validation import alltoall_cases as cases
from validation import alltoall_diagnostics as diag
from validation.alltoall_engines import run_one

TINY = cases.Case("tiny_ls2_64K", "ls2", 64 * cases.KIB)


@pytest.fixture(scope="module")
def fluid():
    return run_one(TINY, "flow", {"transport": "fluid", "link_series": True})


def test_link_classes(fluid):
    _, prep = fluid
    topo = prep.topology
    cls = diag.link_classes(topo)
    n = topo.n_hosts
    # every host has exactly one uplink and one downlink on a leaf-spine
    assert np.bincount(topo.dlink_src[cls == 0], minlength=n).tolist() == [1] * n
    assert np.bincount(topo.dlink_dst[cls == 1], minlength=n).tolist() == [1] * n
    assert (topo.dlink_src[cls == 2] >= n).all() and (topo.dlink_dst[cls == 2] >= n).all()


def test_series_integrate_to_link_bytes(fluid):
    res, prep = fluid
    ms = res.makespan
    edges = np.array([0.0, ms / 3, ms / 2, ms])
    at = diag.flow_bytes_at(res, edges, prep.topology.n_dlinks)
    assert (at[0] == 0).all() and (np.diff(at, axis=0) >= -1e-6).all()
    np.testing.assert_allclose(at[-1], res.link_bytes, rtol=1e-9, atol=1e-3)
    u = diag.utilisation(at, edges, prep.topology.dlink_bw, diag.link_classes(prep.topology))
    assert u.shape == (3, 3) and (u >= 0).all() and (u <= 1 + 1e-9).all()


def test_end_stats(fluid):
    res, prep = fluid
    s = diag.end_stats(res, prep.schedule)
    assert s["makespan_us"] == pytest.approx(res.makespan * 1e6)
    assert s["p10_us"] <= s["p50_us"] <= s["p90_us"] <= s["p99_us"] <= s["makespan_us"]
    assert s["tail_frac"] == pytest.approx(1 - s["p90_frac"])
    assert 0 < s["recv_last_min_frac"] <= s["recv_last_med_frac"] <= 1


def test_stopped_packet_run_is_a_prefix():
    full, _ = run_one(TINY, "packet", cases.TCP_DEEP)
    cut, _ = run_one(TINY, "packet", {**cases.TCP_DEEP, "max_time_s": full.makespan / 2})
    assert cut.stranded.any() and not full.stranded.any()
    assert (cut.link_bytes <= full.link_bytes).all() and cut.link_bytes.sum() > 0
    done = ~cut.stranded & ~np.isnan(cut.end)
    np.testing.assert_array_equal(cut.end[done], full.end[done])  # same run up to the stop


def test_host_bound(fluid):
    res, prep = fluid
    # 31 pieces of 64 KiB leave and enter every host over its 100 Gb/s link
    assert diag.host_bound(prep) == pytest.approx(31 * 64 * 1024 / 12.5e9)
    assert res.makespan >= diag.host_bound(prep)
