"""Looking at a packet-engine run mid-way changes nothing.

``Session.result()`` after ``run_until(t)`` (and ``PacketIncremental.result()`` while transfers
are pending) used to run the core to completion: every later event ran inside the look, the
session's later sends were then refused as in the past or started after events that should have
followed them, and the run no longer equalled the batch run. A look now runs no event: it
reports the transfers finished by now() and the links' figures closed at now(), and the run
goes on bit for bit as if nobody had looked.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import collectives
from netcore import simulate
from netcore.packet.incremental import PacketIncremental
from netcore.session import Session
from topo.builders import fat_tree
from topo.routing import Routing

from session_helpers import _has_packet, drive
from test_metamorphic_flow_faults import FABRICS, FAST, workloads

pytestmark = pytest.mark.skipif(not _has_packet(), reason="packet engine not built")

FT4 = fat_tree(4, link_gbps=100, latency_us=1.0)
# eager ports (tcp, dctcp) keep waiting packets in the wire's pipe: a look must not drain them
TRANSPORTS = [("tcp", "ecmp"), ("dctcp", "dmodk"), ("ideal", "ecmp"), ("dcqcn", "spray")]


def _ring():
    s = collectives.ring_all_reduce(list(range(0, 16, 2)), 600_000)
    deps = [s.dep_idx[s.dep_ptr[i]:s.dep_ptr[i + 1]].tolist() for i in range(s.n)]
    return s, deps


def _stops(makespan):
    # odd fractions: stops between events, not on completion instants only
    return [makespan * f for f in (0.013, 0.2, 0.37, 0.5, 0.81, 0.999)]


@pytest.mark.parametrize("transport, policy", TRANSPORTS)
def test_looking_at_every_stop_changes_no_bit(transport, policy):
    s, deps = _ring()
    batch = simulate(FT4, s, policy, engine="packet", transport=transport, seed=5)
    runs, looks = [], []
    for stops in ((), _stops(batch.makespan)):
        ses = Session(FT4, engine="packet", routing=policy, transport=transport, seed=5)
        seen = []
        if stops:  # look at each stop, and keep what was seen
            orig = ses.result

            def look():
                r = orig()
                seen.append((ses.now(), r))
                return r
            ses.result = look
        ids = drive(ses, s.src, s.dst, s.size, s.start, deps, stops)
        res = Session.result(ses)
        runs.append((ids, res))
        looks.append(seen)
    (ids0, one), (ids1, many) = runs
    assert ids0 == ids1
    for name in ("start", "end", "link_bytes", "link_busy"):
        np.testing.assert_array_equal(getattr(one, name), getattr(many, name))
    assert one.events == many.events
    assert one.info["events_by_kind"] == many.info["events_by_kind"]
    assert one.link_extra["queue_mean_bytes"].tolist() == \
        many.link_extra["queue_mean_bytes"].tolist()
    # and the session is the batch run
    order = np.array([ids0[i] for i in range(s.n)])
    np.testing.assert_allclose(one.end[order], batch.end, rtol=0, atol=1e-12)

    # what each look reported: the transfers done by then, the links' figures up to then
    prev_bytes = np.zeros_like(one.link_bytes)
    for now, r in looks[1]:
        done = np.isfinite(r.end)
        assert np.array_equal(done, np.isfinite(one.end[:len(r.end)]) &
                              (one.end[:len(r.end)] <= now))
        np.testing.assert_array_equal(r.end[done], one.end[:len(r.end)][done])
        assert np.array_equal(r.stranded, ~done)
        assert r.info["end_time_s"] == pytest.approx(now, abs=1e-12)
        assert np.all(r.link_bytes >= prev_bytes) and np.all(r.link_bytes <= one.link_bytes)
        assert np.all(r.link_busy <= one.link_busy)
        prev_bytes = r.link_bytes
    assert 0 < looks[1][0][1].link_bytes.sum() < looks[1][-1][1].link_bytes.sum()


def test_a_look_between_the_last_byte_and_its_ack_keeps_the_clock():
    """The transfer's last byte is in at E, its ACK still on the way: a look at E, then a
    send at E, as a co-simulator does. The look used to run the ACK out, taking the engine's
    clock past E, and the send was refused as starting in the past."""
    lone = Session(FT4, engine="packet", routing="dmodk", transport="tcp")
    lone.send(0, 15, 200_000)
    lone.run()
    e = float(lone.result().end[0])
    assert lone.now() > e  # the ACK lands after the last byte

    ends = []
    for look in (False, True):
        ses = Session(FT4, engine="packet", routing="dmodk", transport="tcp")
        ses.send(0, 15, 200_000)
        ses.run_until(e)
        if look:
            mid = ses.result()
            assert mid.end[0] == e and ses.now() == e
        ses.send(15, 0, 200_000)
        ses.run()
        ends.append(ses.result().end.tolist())
    assert ends[0] == ends[1]


@pytest.mark.parametrize("engine", ["packet", "flow"])
def test_a_look_reports_utilization_over_its_clock(engine):
    """A look's link figures are closed at now, so its utilization is busy time over now: the
    packet engine's look divided by the makespan of the transfers done by then (1,000 B done
    at about 2 us, 1 MB still sending at 40 us: 19 where at most 1 is possible)."""
    ses = Session(FT4, engine=engine, routing="dmodk",
                  **({"transport": "ideal"} if engine == "packet" else {}))
    ses.send(0, 1, 1000)
    ses.send(2, 6, 1_000_000)
    ses.run_until(40e-6)
    r = ses.result()
    assert np.isfinite(r.end[0]) and np.isnan(r.end[1]) and r.span == pytest.approx(40e-6)
    u = r.link_utilization()
    np.testing.assert_allclose(u, r.link_busy / 40e-6, rtol=1e-12)
    # the 1 MB transfer's links, busy since it started; a packet serialising at now counts
    # whole (docs/session.md), a frame of at most 128 bytes past the MTU
    frame = (r.info.get("mtu", 0) + 128) * 8 / 100e9
    assert 0.9 < u.max() <= 1.0 + frame / 40e-6
    ses.run()
    done = ses.result()
    assert done.span is None
    np.testing.assert_array_equal(done.link_utilization(), done.link_busy / done.makespan)


@pytest.mark.parametrize("transport", ["tcp", "ideal"])
def test_the_incremental_driver_looks_without_running(transport):
    """PacketIncremental.result() with transfers pending runs nothing (now(), pending() and
    the later completions unchanged); with none pending it runs the last ACKs out as `run`."""
    s = collectives.ring_all_reduce(list(range(8)), 400_000)
    batch = simulate(FT4, s, "ecmp", engine="packet", transport=transport)

    def replay(look_every):
        inc = PacketIncremental(FT4, Routing(FT4, "ecmp"), None, transport=transport)
        first = np.flatnonzero(np.diff(s.dep_ptr) == 0)
        inc.add_transfers(s.src[first], s.dst[first], s.size[first], flow_ids=first)
        node_of, left = first.tolist(), np.diff(s.dep_ptr).copy()
        cptr, cidx = s.children()
        k = 0
        while inc.pending():
            t, done = inc.advance(None)
            k += 1
            if look_every and k % look_every == 0:
                before = (inc.now(), inc.pending())
                r = inc.result()
                assert (inc.now(), inc.pending()) == before
                assert np.isfinite(r.end).sum() == len(r.end) - before[1]
            new = []
            for d in done.tolist():
                for c in cidx[cptr[node_of[d]]:cptr[node_of[d] + 1]]:
                    left[c] -= 1
                    if left[c] == 0:
                        new.append(int(c))
            if new:
                inc.add_transfers(s.src[new], s.dst[new], s.size[new], start_s=t,
                                  flow_ids=new)
                node_of += new
        return np.array(node_of), inc.result()

    nodes, plain = replay(0)
    nodes2, looked = replay(3)
    assert nodes.tolist() == nodes2.tolist()
    for name in ("end", "link_bytes", "link_busy"):
        np.testing.assert_array_equal(getattr(plain, name), getattr(looked, name))
    np.testing.assert_allclose(plain.end, batch.end[nodes], rtol=0, atol=1e-12)
    # at the end the last ACKs ran out: the batch run's link figures
    np.testing.assert_array_equal(plain.link_bytes, batch.link_bytes)


@settings(max_examples=40, **FAST)
@given(workloads(max_n=5), st.lists(st.integers(0, 96), min_size=1, max_size=6),
       st.sampled_from(["tcp", "dcqcn"]))
def test_looks_at_random_stops_with_faults_change_no_bit(w, grid, transport):
    """Random DAGs with links going down, degrading and coming back (re-routes pending at
    some stops): a look at every stop, then on, gives the run without looks bit for bit."""
    name, pol, src, dst, size, start, deps, f, delay = w
    t = FABRICS[name]
    stops = sorted(set([g * 2.0 ** -18 for g in grid] + f.time.tolist()))
    got = []
    for s in ((), stops):
        ses = Session(t, engine="packet", routing=Routing(t, pol), faults=f,
                      reroute_delay_us=delay, transport=transport)
        ids = drive(ses, src, dst, size, start, deps, s)
        got.append((ids, ses.result()))
    (ids0, one), (ids1, many) = got
    assert ids0 == ids1
    for name in ("start", "end", "link_bytes", "link_busy"):
        np.testing.assert_array_equal(getattr(one, name), getattr(many, name))
    assert one.events == many.events
