"""The flow engine end to end: exact analytical cases, conservation, determinism, and the
incremental compiled engine against the from-scratch pure-Python reference simulation."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netcore import Schedule, ScheduleBuilder, simulate
from netcore.flow import reference
from topo.builders import fat_tree
from topo.errors import InputError
from topo.routing import Routing
from topo.topology import Topology

GB = 12.5e9  # 100 Gbps in bytes/s


def chain(bw=(GB, GB / 4, GB), lat=(1e-6, 2e-6, 3e-6)):
    """h0 - s0 - s1 - h1 with the given per-link bandwidth and latency."""
    return Topology("custom", 2, 2, np.array([0, 2, 3]), np.array([2, 3, 1]), np.array(bw),
                    np.array(lat), np.zeros(3))


FT4 = fat_tree(4, link_gbps=100, latency_us=1.0)


def test_single_flow_is_size_over_bottleneck_plus_latency():
    t = chain()
    S = 3_000_000
    r = simulate(t, Schedule.from_transfers([0], [1], [S]), "shortest")
    assert r.end[0] == pytest.approx(S / (GB / 4) + 6e-6, rel=1e-12)
    assert r.start[0] == 0.0
    assert not r.stranded.any()


def test_two_flows_sharing_a_link_get_half_each():
    t = FT4
    S = 1_000_000
    r = simulate(t, Schedule.from_transfers([0, 0], [1, 2], [S, S]), "ecmp", link_series=True)
    lat = Routing(t, "ecmp").paths([0, 0], [1, 2], flow_id=[0, 1]).latency
    np.testing.assert_allclose(r.end, 2 * S / GB + lat, rtol=1e-12)
    # the shared host uplink ran at B; each flow at B/2 on its own edge->host link
    p = Routing(t, "ecmp").paths([0, 0], [1, 2], flow_id=[0, 1])
    ptr, rate = r.link_extra["series_ptr"], r.link_extra["series_rate"]
    up, down1 = p.link[0], p.link[p.ptr[1] - 1]
    assert rate[ptr[up]] == pytest.approx(GB, rel=1e-12)
    assert rate[ptr[down1]] == pytest.approx(GB / 2, rel=1e-12)
    assert rate[ptr[up + 1] - 1] == 0.0  # and went idle at the end


@pytest.mark.parametrize("n", [3, 15])
def test_incast_finishes_at_n_s_over_b(n):
    S = 500_000
    sched = Schedule.from_transfers(np.arange(1, n + 1), np.zeros(n, dtype=int), np.full(n, S))
    r = simulate(FT4, sched, "ecmp")
    lat = Routing(FT4, "ecmp").paths(np.arange(1, n + 1), np.zeros(n, dtype=int),
                                      flow_id=np.arange(n)).latency
    np.testing.assert_allclose(r.end, n * S / GB + lat, rtol=1e-12)


# DESIGN.md's dmodk takes index ``d mod count`` at every tier, so inter-pod flows of one pod
# whose destinations share a parity meet on one agg->core link (shift 4 on fat_tree(4) does);
# these permutations are contention-free under it: each link carries at most one flow.
@pytest.mark.parametrize("perm", ["shift1", "shift2", "xor1", "xor3"])
def test_contention_free_permutation_on_fat_tree_with_dmodk(perm):
    n = FT4.n_hosts
    S = 2_000_000
    src = np.arange(n)
    kind, k = perm[:-1], int(perm[-1])
    dst = (src + k) % n if kind == "shift" else src ^ k
    p = Routing(FT4, "dmodk").paths(src, dst, flow_id=src)
    assert np.bincount(p.link, minlength=FT4.n_dlinks).max() == 1  # really contention-free
    r = simulate(FT4, Schedule.from_transfers(src, dst, np.full(n, S)), "dmodk")
    np.testing.assert_allclose(r.end, S / GB + p.latency, rtol=1e-12)


def test_mtu_adds_one_packet_per_hop_after_the_first():
    t = chain(bw=(GB, GB / 2, GB), lat=(0, 0, 0))
    S = 100_000
    r = simulate(t, Schedule.from_transfers([0], [1], [S]), "shortest", mtu=4096)
    assert r.end[0] == pytest.approx(S / (GB / 2) + 4096 / (GB / 2) + 4096 / GB, rel=1e-12)
    # a packet never exceeds the transfer
    r = simulate(t, Schedule.from_transfers([0], [1], [100]), "shortest", mtu=4096)
    assert r.end[0] == pytest.approx(100 / (GB / 2) + 100 / (GB / 2) + 100 / GB, rel=1e-12)


def test_zero_bytes_compute_delay_and_start_times():
    t = chain()
    b = ScheduleBuilder()
    a = b.add_transfers([0], [1], [0], start=[5e-6])
    c = b.add_compute([1], [7e-6], parents=a)
    d = b.add_delay([1], [1e-6], parents=c, start=[100e-6])
    e = b.add_transfers([1], [0], [GB / 4 * 1e-6], parents=d)
    r = simulate(t, b.build(), "shortest")
    assert r.end[a[0]] == pytest.approx(5e-6 + 6e-6)
    assert r.end[c[0]] == pytest.approx(18e-6)
    assert r.start[d[0]] == pytest.approx(100e-6)
    assert r.end[e[0]] == pytest.approx(101e-6 + 1e-6 + 6e-6)


def _random_schedule(draw, n_hosts):
    n = draw(st.integers(1, 12))
    b = ScheduleBuilder()
    for i in range(n):
        parents = draw(st.lists(st.integers(0, i - 1), max_size=2, unique=True)) if i else []
        start = draw(st.sampled_from([0.0, 0.0, 1e-6, 7e-6, 30e-6]))
        if draw(st.integers(0, 5)) == 0:
            b.add_compute([draw(st.integers(0, n_hosts - 1))],
                          [draw(st.sampled_from([0.0, 2e-6, 5e-6]))],
                          parents=[parents] if parents else None, start=[start])
        else:
            s = draw(st.integers(0, n_hosts - 1))
            d = (s + draw(st.integers(1, n_hosts - 1))) % n_hosts
            size = draw(st.sampled_from([0, 1000, 125_000, 250_000, 1_000_000, 3_333_333]))
            b.add_transfers([s], [d], [size], parents=[parents] if parents else None, start=[start])
    return b.build()


@st.composite
def scenarios(draw):
    policy = draw(st.sampled_from(["ecmp", "spray", "shortest"]))
    return _random_schedule(draw, FT4.n_hosts), policy


def _reference_run(topo, sched, policy):
    tr = np.flatnonzero(sched.kind == 0)
    p = Routing(topo, policy).paths(sched.src[tr], sched.dst[tr], flow_id=tr)
    paths = [[] for _ in range(sched.n)]
    tails = [0.0] * sched.n
    for j, i in enumerate(tr):
        paths[i] = list(zip(p.link[p.ptr[j]:p.ptr[j + 1]].tolist(),
                            p.weight[p.ptr[j]:p.ptr[j + 1]].tolist()))
        tails[i] = float(p.latency[j])
    parents = [sched.deps_of(i).tolist() for i in range(sched.n)]
    return reference.simulate(sched.kind.tolist(), sched.size.tolist(), sched.duration.tolist(),
                              sched.start.tolist(), parents, paths, tails,
                              topo.dlink_bw.tolist())


@settings(max_examples=60, deadline=None)
@given(scenarios())
def test_incremental_engine_matches_reference_simulation(sc):
    sched, policy = sc
    r = simulate(FT4, sched, policy)
    ref_start, ref_end = _reference_run(FT4, sched, policy)
    np.testing.assert_allclose(r.start, ref_start, rtol=1e-9, atol=1e-18)
    np.testing.assert_allclose(r.end, ref_end, rtol=1e-9, atol=1e-18)
    assert not r.stranded.any()


@settings(max_examples=30, deadline=None)
@given(scenarios())
def test_bytes_are_conserved_per_link(sc):
    sched, policy = sc
    r = simulate(FT4, sched, policy)
    ptr, link, w = (r.node_extra[k] for k in ("path_ptr", "path_link", "path_weight"))
    expect = np.zeros(FT4.n_dlinks)
    np.add.at(expect, link, w * np.repeat(sched.size.astype(float), np.diff(ptr)))
    np.testing.assert_allclose(r.link_bytes, expect, rtol=1e-12, atol=1e-6)
    # busy time never exceeds the makespan, and a link that carried bytes was busy
    assert np.all(r.link_busy <= r.makespan * (1 + 1e-12))
    assert np.all((r.link_bytes > 0) <= (r.link_busy > 0))


def test_same_seed_same_result_bit_for_bit():
    rng = np.random.default_rng(3)
    n = 400
    src = rng.integers(0, 16, n)
    dst = (src + rng.integers(1, 16, n)) % 16
    size = rng.integers(1, 4_000_000, n)
    start = rng.choice([0.0, 1e-5, 3e-5], n)
    deps = [[int(rng.integers(0, i))] if i and rng.random() < 0.3 else [] for i in range(n)]
    sched = Schedule.from_transfers(src, dst, size, start=start, deps=deps)
    a = simulate(FT4, sched, "ecmp", seed=7, link_series=True)
    b = simulate(FT4, sched, "ecmp", seed=7, link_series=True)
    for x, y in ((a.start, b.start), (a.end, b.end), (a.link_bytes, b.link_bytes),
                 (a.link_busy, b.link_busy), (a.link_extra["series_rate"],
                                              b.link_extra["series_rate"])):
        assert np.array_equal(x, y, equal_nan=True)
    assert a.events == b.events


def test_options_are_checked():
    sched = Schedule.from_transfers([0], [1], [10])
    with pytest.raises(InputError, match=r"engine\.mtu"):
        simulate(FT4, sched, "ecmp", mtu=-5)
    with pytest.raises(InputError, match=r"engine\.reroute_delay_us"):
        simulate(FT4, sched, "ecmp", reroute_delay_us=-1)
    with pytest.raises(InputError, match=r"engine\.bogus"):
        simulate(FT4, sched, "ecmp", bogus=1)
    with pytest.raises(InputError, match=r"engine\.link_series"):
        simulate(FT4, sched, "ecmp", link_series="yes")


@pytest.mark.parametrize("build, match", [
    (lambda: Schedule.from_transfers([0, 1], [1, 2], [5, 5], deps=[[1], [0]]), "cycle"),
    (lambda: Schedule.from_transfers([3], [3], [5]), "to itself"),
    (lambda: Schedule.from_transfers([0], [1], [-5]), "bytes -5"),
    (lambda: Schedule.from_transfers([0], [1], [5], start=[-1.0]), "start time"),
])
def test_bad_schedules_are_input_errors(build, match):
    with pytest.raises(InputError, match=match):
        simulate(FT4, build(), "ecmp")


@pytest.mark.parametrize("seed, policy", [(0, "ecmp"), (1, "spray"), (2, "ecmp")])
def test_crowded_instance_matches_reference(seed, policy):
    """Many flows on few hosts with distinct sizes: completions are spread in time, so most
    re-allocations run in the removal-only (rate-threshold) mode."""
    rng = np.random.default_rng(seed)
    n = 30
    src = rng.integers(0, 6, n)
    dst = (src + rng.integers(1, 16, n)) % 16
    size = rng.integers(10_000, 2_000_000, n)
    start = rng.choice([0.0, 0.0, 2e-5, 5e-5], n)
    sched = Schedule.from_transfers(src, dst, size, start=start)
    r = simulate(FT4, sched, policy)
    ref_start, ref_end = _reference_run(FT4, sched, policy)
    np.testing.assert_allclose(r.start, ref_start, rtol=1e-9)
    np.testing.assert_allclose(r.end, ref_end, rtol=1e-9)
    assert len(np.unique(r.end)) > n // 2  # really spread out


def test_warm_loads_every_kernel_a_run_calls():
    """engine.warm() keeps compilation and cache loading out of Result.wall_s. It missed the
    slot-growth kernels (many flows starting on one link) and the contention model's, so the
    first all-to-all of validation.alltoall_engines timed 5.8 ms instead of 0.4 ms. Fresh
    process: in this one earlier tests have called them already."""
    import subprocess
    import sys

    code = ("import netcore.flow._kernels as K, netcore.flow.contention as C\n"
            "from netcore.flow import engine\n"
            "engine.warm()\n"
            "print(' '.join(f.__name__ for f in (K.flush_pending, K.relayout_slots, "
            "K.advance, K.start_nodes, C.dag_levels) if not f.signatures))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "", f"not loaded by warm(): {out}"
