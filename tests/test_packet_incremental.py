"""Packet engine driven incrementally (co-simulation): add_transfers / advance / result."""
import numpy as np
import pytest

import collectives
from netcore.packet import run
from netcore.packet.incremental import PacketIncremental
from netcore.schedule import TRANSFER, ScheduleBuilder
from topo.builders import fat_tree
from topo.errors import InputError
from topo.faults import LinkFaults
from topo.routing import Routing

NONE = LinkFaults.none()


def drive_dag(inc, s):
    """Replays a transfer-only Schedule through add_transfers/advance, releasing a node when its
    last parent completes (at that completion's time stamp), as the batch engine does."""
    assert np.all(s.kind == TRANSFER)
    cptr, cidx = s.children()
    indeg = np.diff(s.dep_ptr).astype(np.int64)
    node_of = []

    def add(nodes, t):
        nodes = np.asarray(nodes, dtype=np.int64)
        if len(nodes) == 0:
            return
        ids = inc.add_transfers(s.src[nodes], s.dst[nodes], s.size[nodes],
                                start_s=np.maximum(t, s.start[nodes]), flow_ids=nodes)
        assert ids.tolist() == list(range(len(node_of), len(node_of) + len(nodes)))
        node_of.extend(nodes.tolist())

    add(np.flatnonzero(indeg == 0), 0.0)
    calls = 0
    while inc.pending():
        t, done = inc.advance(None)
        calls += 1
        assert len(done) > 0
        released = []
        for d in done:
            n = node_of[d]
            for c in cidx[cptr[n]:cptr[n + 1]]:
                indeg[c] -= 1
                if indeg[c] == 0:
                    released.append(c)
        add(released, t)
    return np.asarray(node_of), calls


@pytest.mark.parametrize("transport,policy", [("tcp", "ecmp"), ("ideal", "ecmp"),
                                              ("dcqcn", "dmodk"), ("tcp", "spray")])
def test_ring_all_reduce_step_by_step_equals_batch_bit_for_bit(transport, policy):
    t = fat_tree(4, link_gbps=100, latency_us=1.0)
    s = collectives.ring_all_reduce(np.arange(8), 1_000_000)
    batch = run(t, s, Routing(t, policy, seed=3), NONE, seed=7, transport=transport)
    inc = PacketIncremental(t, Routing(t, policy, seed=3), NONE, seed=7, transport=transport)
    node_of, calls = drive_dag(inc, s)
    res = inc.result()
    assert sorted(node_of.tolist()) == list(range(len(s.kind)))
    assert calls >= 2 * (8 - 1)  # at least one return per ring step
    np.testing.assert_array_equal(res.end, batch.end[node_of])
    np.testing.assert_array_equal(res.start, batch.start[node_of])
    np.testing.assert_array_equal(res.link_bytes, batch.link_bytes)
    assert res.events == batch.events
    assert inc.pending() == 0 and res.finished.all()


def test_callback_pipeline_and_time_limits():
    """A pipeline-parallel chain driven by callbacks: stage i computes, then sends its
    activations to stage i+1; a callback fires on each completion and issues the next send."""
    t = fat_tree(4, link_gbps=100, latency_us=1.0)
    inc = PacketIncremental(t, Routing(t, "ecmp"), NONE, transport="tcp")
    stages, act, compute_s = [0, 5, 10, 15], 200_000, 20e-6
    callbacks = {}

    def send(i, at):
        (tid,) = inc.add_transfers([stages[i]], [stages[i + 1]], [act], start_s=at)
        callbacks[int(tid)] = i

    send(0, 0.0)
    # a limit before anything can finish returns (limit, nothing) and moves the clock
    t1, none = inc.advance(1e-6)
    assert t1 == 1e-6 and len(none) == 0 and inc.now() == 1e-6 and inc.pending() == 1
    with pytest.raises(InputError, match="start_s"):
        inc.add_transfers([0], [1], [10], start_s=0.0)
    ends = []
    while inc.pending():
        now, done = inc.advance(1.0)
        for d in done:
            i = callbacks.pop(int(d))
            ends.append(now)
            if i + 2 < len(stages):
                send(i + 1, now + compute_s)  # the next stage computes, then sends
    res = inc.result()
    assert len(ends) == len(stages) - 1 and res.finished.all()
    assert np.all(np.diff(ends) > compute_s)
    np.testing.assert_array_equal(res.start[1:], np.asarray(ends[:-1]) + compute_s)
    # the same chain as a batch DAG (transfer -> compute -> transfer) ends at the same times
    b = ScheduleBuilder()
    prev = b.add_transfers([stages[0]], [stages[1]], [act])
    xs = [prev[0]]
    for i in range(1, len(stages) - 1):
        c = b.add_compute([stages[i]], [compute_s], parents=prev)
        prev = b.add_transfers([stages[i]], [stages[i + 1]], [act], parents=c)
        xs.append(prev[0])
    batch = run(t, b.build(), Routing(t, "ecmp"), NONE, transport="tcp")
    np.testing.assert_allclose(batch.end[xs], ends, rtol=0, atol=1e-12)


def test_bad_input_names_the_field():
    t = fat_tree(4, link_gbps=100, latency_us=1.0)
    inc = PacketIncremental(t, Routing(t, "ecmp"), NONE)
    with pytest.raises(InputError, match="dst"):
        inc.add_transfers([0], [99], [10])
    with pytest.raises(InputError, match="size"):
        inc.add_transfers([0], [1], [-1])
    with pytest.raises(InputError, match="dst"):
        inc.add_transfers([0, 1], [1], [10, 10])
    with pytest.raises(InputError, match="engine.transport"):
        PacketIncremental(t, Routing(t, "ecmp"), NONE, transport="udp")
    inc.add_transfers([0], [1], [0])  # size 0 completes at once
    tt, done = inc.advance(None)
    assert tt == 0.0 and done.tolist() == [0]
    tt, done = inc.advance(2e-6)
    assert tt == 2e-6 and len(done) == 0
    with pytest.raises(InputError, match="t_limit"):
        inc.advance(1e-6)


def test_link_down_mid_run_reroutes_and_finishes():
    t = fat_tree(4, link_gbps=100, latency_us=1.0)
    r = Routing(t, "ecmp")
    p = r.paths([0], [15], flow_id=[0])
    core = [int(l) for l in p.link if t.dlink_src[l] >= t.n_hosts and t.dlink_dst[l] >= t.n_hosts]
    mid = core[len(core) // 2]
    f = LinkFaults.from_records(t, [{"link": [int(t.dlink_src[mid]), int(t.dlink_dst[mid])],
                                     "kind": "down", "at_us": 120.0}])
    inc = PacketIncremental(t, r, f, transport="tcp", reroute_delay_us=5.0)
    inc.add_transfers([0], [15], [3_000_000])
    tt, done = inc.advance(None)
    res = inc.result()
    assert done.tolist() == [0] and res.finished.all()
    assert res.info["reroutes"] == 1 and res.node_extra["retransmissions"][0] > 0


@pytest.mark.parametrize("transport", ["tcp", "ideal"])
def test_fullflat_planes_step_by_step_stripe_as_the_batch_run(transport):
    """On fullflat a single-path policy stripes over the planes; the batch run splits every
    transfer into one connection per plane (netcore/packet/plane_split.py) and so must the
    co-simulation API: before, it kept each connection in one plane (1/planes of a GPU's
    bandwidth) while `run` and the flow engine used them all."""
    from topo.builders import build

    t = build("fullflat", {"n_gpus": 8, "planes": 4, "switch_radix": 8, "gpu_gbps": 800})
    s = collectives.ring_all_reduce(np.arange(8), 4_000_003)
    batch = run(t, s, Routing(t, "ecmp", seed=3), NONE, seed=7, transport=transport)
    inc = PacketIncremental(t, Routing(t, "ecmp", seed=3), NONE, seed=7, transport=transport)
    node_of, calls = drive_dag(inc, s)
    res = inc.result()
    assert res.info["plane_pieces"] == batch.info["plane_pieces"] == 3 * len(s.kind)
    assert inc.pending() == 0 and res.finished.all()
    # the same pieces on the same planes; only the order pieces are numbered in differs
    # (a batch numbers every piece after the schedule's transfers), which can reorder events
    # that tie to the picosecond
    np.testing.assert_allclose(res.end, batch.end[node_of], rtol=1e-3)
    one = PacketIncremental(t, Routing(t, "ecmp", seed=3), NONE, seed=7, transport=transport,
                            warm_connections=transport == "tcp")
    if transport == "tcp":  # warm connections keep one plane per pair, as in `run`
        drive_dag(one, s)
        kept = one.result()
        assert "plane_pieces" not in kept.info and kept.end.max() > res.end.max()


def test_a_send_at_a_stop_between_picoseconds_starts_there():
    """The clock stops on whole picoseconds: run_until(5.27 * 1e-6) (5.2699999999999995e-06 s)
    stops at 5,270,000 ps, one ulp above the time asked for. A send then, at the session's
    now(), was refused ('start_s must be >= now() = 5.27e-06 s'), as was one from a callback
    scheduled for that instant while traffic was in flight. It starts at that picosecond; a
    start that rounds to an earlier picosecond is still refused."""
    from netcore.session import Session
    t = fat_tree(4, link_gbps=100, latency_us=1.0)
    stop = 5.27 * 1e-6
    assert stop * 1e12 != round(stop * 1e12)  # between picoseconds, rounding up
    ses = Session(t, engine="packet", routing="ecmp")
    ses.send(1, 6, 100_000)
    ses.run_until(stop)
    late = ses.send(0, 5, 1000)
    ses.run()
    assert ses.result().start[late] == 5_270_000 / 1e12
    ses = Session(t, engine="packet", routing="ecmp")
    ses.send(1, 6, 100_000)
    ids = []
    ses.schedule(stop, lambda: ids.append(ses.send(0, 5, 1000)))
    ses.run()
    assert ses.result().start[ids[0]] == 5_270_000 / 1e12 and np.isfinite(ses.result().end).all()
    inc = PacketIncremental(t, Routing(t, "ecmp"), NONE)
    inc.add_transfers([1], [6], [100_000])
    inc.advance(stop)
    with pytest.raises(InputError, match="start_s"):
        inc.add_transfers([0], [5], [1000], start_s=5_269_999 / 1e12)
    assert inc.add_transfers([0], [5], [1000], start_s=stop).tolist() == [1]
