"""Link faults in time: re-routing with the remaining bytes, stranding, degrade/up."""
import numpy as np
import pytest

from netcore import Schedule, simulate
from topo.builders import fat_tree
from topo.errors import InputError
from topo.faults import DEGRADE, DOWN, UP, FaultError, LinkFaults, random_failures
from topo.routing import Routing

GB = 12.5e9
FT4 = fat_tree(4, link_gbps=100, latency_us=1.0)
S = 10_000_000  # 0.8 ms at 100 Gbps


def both(dlink):
    """The two directed links of dlink's physical link."""
    return [dlink, dlink ^ 1]


def faults(*events):
    """events: (time_s, dlink, kind, factor); each applied to both directions."""
    rows = [(t, d2, k, f) for t, d, k, f in events for d2 in both(d)]
    t, d, k, f = zip(*rows)
    return LinkFaults(np.array(t), np.array(d), np.array(k), np.array(f))


def path(src, dst, flow_id, policy="ecmp", alive=None):
    p = Routing(FT4, policy).paths([src], [dst], flow_id=[flow_id], alive=alive)
    return p.link[p.ptr[0]:p.ptr[1]], float(p.latency[0])


def test_link_down_with_alternative_reroutes_the_remaining_bytes():
    links, lat = path(0, 15, 0)
    core = int(links[2])  # agg -> core: other cores remain
    tf, d = 0.3e-3, 5e-6
    sched = Schedule.from_transfers([0, 1], [15, 0], [S, S // 2])
    base = simulate(FT4, sched, "ecmp")
    r = simulate(FT4, sched, "ecmp", faults(( tf, core, DOWN, 0.0)), reroute_delay_us=d * 1e6)
    assert r.finished.all() and not r.stranded.any()
    alive = np.ones(FT4.n_dlinks, bool)
    alive[both(core)] = False
    _, lat_new = path(0, 15, 0, alive=alive)
    assert r.end[0] == pytest.approx(S / GB + d + lat_new, rel=1e-12)
    assert r.end[0] > base.end[0]
    assert r.end[1] == base.end[1]  # the other transfer never touched the failed link
    # bytes: the first hop carried everything, the failed link only what left before tf
    assert r.link_bytes[links[0]] == pytest.approx(S, rel=1e-12)
    assert r.link_bytes[core] == pytest.approx(GB * tf, rel=1e-12)
    assert r.node_extra["reroutes"][0] == 1
    ptr = r.node_extra["path_ptr"]
    used = r.node_extra["path_link"][ptr[0]:ptr[1]]
    assert used[:len(links)].tolist() == links.tolist() and core not in used[len(links):]


def test_link_down_without_alternative_strands_and_blocks_descendants():
    links, lat = path(0, 15, 0)
    up = int(links[0])  # host 0's only uplink
    tf = 0.2e-3
    sched = Schedule.from_transfers([0, 15, 2], [15, 3, 3], [S, S, S // 10],
                                    deps=[[], [0], []])
    r = simulate(FT4, sched, "ecmp", faults((tf, up, DOWN, 0.0)))
    assert r.stranded.tolist() == [True, True, False]
    assert r.node_extra["stranded_no_path"].tolist() == [True, False, False]
    assert r.node_extra["blocked"].tolist() == [False, True, False]
    assert np.isnan(r.end[:2]).all() and np.isfinite(r.end[2])
    assert r.start[0] == 0.0 and np.isnan(r.start[1])
    assert r.link_bytes[up] == pytest.approx(GB * tf, rel=1e-12)
    assert r.info["stranded"] == 2


def test_degrade_halves_the_rate_from_then_on():
    links, lat = path(0, 15, 0)
    td = 0.2e-3
    r = simulate(FT4, Schedule.from_transfers([0], [15], [S]), "ecmp",
                 faults((td, int(links[0]), DEGRADE, 0.5)))
    assert r.end[0] == pytest.approx(td + (S - GB * td) / (GB / 2) + lat, rel=1e-12)


def test_link_back_up_before_reroute_lets_the_flow_continue():
    links, lat = path(0, 15, 0)
    up = int(links[0])
    t1, t2, d = 0.1e-3, 0.12e-3, 50e-6
    r = simulate(FT4, Schedule.from_transfers([0], [15], [S]), "ecmp",
                 faults((t1, up, DOWN, 0.0), (t2, up, UP, 1.0)), reroute_delay_us=d * 1e6)
    # it resumes on its path when the link is back (t2), before its re-route (t1 + d) is due,
    # as the packet engine and ns-3 do; until session 29 it waited for t1 + d
    assert r.end[0] == pytest.approx(S / GB + (t2 - t1) + lat, rel=1e-12)
    assert r.node_extra["reroutes"][0] == 0


def test_transfers_starting_after_a_fault_avoid_the_dead_link():
    links, lat = path(0, 15, 0)
    core = int(links[2])
    sched = Schedule.from_transfers([0, 0], [15, 15], [S, S], start=[0.0, 2e-3])
    r = simulate(FT4, sched, "ecmp", faults((0.0, core, DOWN, 0.0)))
    assert r.finished.all()
    assert r.link_bytes[core] == 0.0
    assert r.end[0] == pytest.approx(S / GB + lat, rel=1e-12)
    assert r.end[1] == pytest.approx(2e-3 + S / GB + lat, rel=1e-12)


def test_unroutable_at_time_zero_then_up_before_start():
    links, lat = path(0, 15, 0)
    up = int(links[0])
    sched = Schedule.from_transfers([0, 0], [15, 15], [S, S], start=[0.0, 2e-3])
    r = simulate(FT4, sched, "ecmp", faults((0.0, up, DOWN, 0.0), (0.5e-3, up, UP, 1.0)))
    # the first has no path when it becomes ready: it waits for the link (until session 36:
    # stranded) and starts as it comes back
    assert r.finished.all()
    assert r.start[0] == 0.5e-3
    assert r.end[0] == pytest.approx(0.5e-3 + S / GB + lat, rel=1e-12)
    assert r.end[1] == pytest.approx(2e-3 + S / GB + lat, rel=1e-12)
    # with no up it is stranded at once
    r = simulate(FT4, sched, "ecmp", faults((0.0, up, DOWN, 0.0)))
    assert r.stranded.all() and r.node_extra["stranded_no_path"].all()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_failures_always_terminate_consistently(seed):
    rng = np.random.default_rng(seed)
    n = 120
    src = rng.integers(0, 16, n)
    dst = (src + rng.integers(1, 16, n)) % 16
    deps = [[int(rng.integers(0, i))] if i and rng.random() < 0.5 else [] for i in range(n)]
    sched = Schedule.from_transfers(src, dst, rng.integers(1, 3_000_000, n), deps=deps)
    f = random_failures(FT4, count=6, at_us=float(rng.uniform(10, 200)), seed=seed)
    r = simulate(FT4, sched, "ecmp", f, reroute_delay_us=3.0)
    fin = np.isfinite(r.end)
    assert np.array_equal(fin, ~r.stranded)
    blocked = r.node_extra["blocked"]
    # a node runs only if all its parents finished
    for i in range(n):
        if fin[i]:
            assert all(fin[p] for p in sched.deps_of(i))
        if blocked[i]:
            assert any(r.stranded[p] for p in sched.deps_of(i))
    r2 = simulate(FT4, sched, "ecmp", f, reroute_delay_us=3.0)
    assert np.array_equal(r.end, r2.end, equal_nan=True)


def test_fault_on_a_missing_link_is_an_input_error():
    with pytest.raises(FaultError, match=r"no link between nodes 0 and 1"):
        LinkFaults.from_records(FT4, [{"link": [0, 1], "kind": "down"}])
    bad = LinkFaults(np.array([0.0]), np.array([10_000]), np.array([DOWN]), np.array([0.0]))
    with pytest.raises(InputError, match=r"directed link 10000 does not exist"):
        simulate(FT4, Schedule.from_transfers([0], [1], [5]), "ecmp", bad)
