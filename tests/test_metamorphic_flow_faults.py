"""Metamorphic and property tests of the flow engine's link faults in time and of the session
API that drives it call by call (docs/flow_engine.md "Faults in time", docs/session.md),
beyond tests/test_flow_faults.py (hand-picked instants), tests/test_metamorphic.py (no-op
faults, bandwidth and time scaling, a session without faults = the batch run) and
tests/test_session.py (one ring with one fault set).

Fabrics have power-of-two bandwidths (bytes/s), latencies, sizes and instants, so the times
below are exact in float64 and instants coincide on purpose (a fault exactly when a flow
starts or when its last byte leaves).

Closed forms:
* a single flow on a chain of 1-4 links, with any sequence of down / degrade / up events on
  them, drains when the integral of its rate min_l bw_l x factor_l(t) reaches its size and
  ends the path latency later; a `down` stops it, it is re-routed `reroute_delay_us` later
  with what it has left; if a link of the chain is still down then, it waits, and is
  re-routed the delay after each later instant a down link comes back, until the chain is
  whole (stranded once no down link is due back); a transfer that becomes ready while a
  link is down waits likewise and starts the delay after it comes back. Factors are absolute (capacity = nominal x
  factor, docs/flow_engine.md), so a degrade of a down link brings it back degraded, an up
  of a link never down and a degrade to the rate in force change nothing; records of one
  instant apply in the order written. Named edges: an event at the flow's start, a down or a
  degrade at the instant its last byte leaves, repeated degrades, a fault at the re-route
  instant;
* n flows crossing one bottleneck degraded (several times) mid-run get its capacity / n each
  (max-min), piecewise, to their closed-form ends;
* a down with another path: the flow pays the re-route delay once (also when a second link of
  its old path dies during the wait), its bytes are conserved link by link (the old path's
  own links: what left before the down; the new path's: the rest; shared hops: everything),
  both segments are recorded; a down the instant its last byte leaves re-routes nothing; a
  down the instant a child is released routes the child around it at once (no delay);
* a down with no other path that never comes back: stranded (end NaN, `stranded_no_path`),
  its descendants blocked, the bytes sent before counted; in a session no `on_done`, nothing
  pending, `run()` returns.
Equivalences and invariants (hypothesis; fat_tree k=4 and a leaf-spine of 3 x 3 hosts, random
DAGs, random down / degrade / up events, re-route delays):
* a degrade by f on one link of a path equals degrades by f on two consecutive links of it,
  and a milder degrade on a second link changes nothing (the bottleneck sets the rate);
* shifting every start and fault instant by D shifts every end by D;
* the link series under faults integrates to each link's bytes, is never above the capacity
  in force (also right after each fault instant), is nonzero exactly while the link is busy,
  and ends at 0;
* a session equals the batch run with the same faults (sends from `on_done` and timed
  callbacks, faults at time 0 and mid-run, re-route delays, fluid and tcp): same ends, same
  stranded transfers, same re-route counts; driven in many small `run_until` steps, with its
  state queried in between, it gives one `run()`'s bits; `run()`, then more sends at `now()`
  (faults still to come) equals the batch run with those sends as start times;
* same inputs, same bits (batch and session).

Bugs these tests found, each fixed in its own commit (git log -- this file):
* a flow whose last byte left at the instant a link of its path went down was stopped with
  0 bytes left and re-routed: stranded (end NaN) when no other path existed, else delivered a
  re-route delay late (netcore/flow/engine.py `_fault_instant`);
* a session's sends at time 0 were routed and started before the faults at time 0 were in
  place, so links down from the start stopped them: a re-route counted and the re-route
  delay paid that the batch run does not pay (`FlowIncremental.__init__`);
* `run()` of a session whose transfers had all finished ran the engine's clock on through
  every later fault instant: `now()` said the last completion, the engine the last fault, and
  the next `send` (or `run_until`) failed with "start_s must be >= now()"
  (`FlowIncremental.advance`).
* `run()` returned on an empty `advance()` without taking the engine's clock, so when a
  fault stranded the last transfer after the last completion (or, on the packet engine,
  TCP's last ACKs ran past it) `now()` stayed behind the engine and the next send was
  refused as in the past (`netcore.session.Session._run`).
"""
import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from netcore import Schedule, simulate
from netcore.session import Session
from session_helpers import drive
from topo.builders import build
from topo.faults import DEGRADE, DOWN, UP, LinkFaults
from topo.routing import Routing
from topo.topology import Topology

FAST = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                   HealthCheck.filter_too_much])

B = 2.0 ** 30  # bytes/s
LAT = 2.0 ** -20  # s
MS = 2.0 ** -10  # a 1 MiB flow alone at B drains in MS


# ------------------------------------------------------------------ fabrics and faults
def chain(bws, lats) -> Topology:
    """Host 0 - switch - ... - switch - host 1: hop i is directed link 2 i (forward)."""
    h = len(bws)
    nodes = [0] + list(range(2, h + 1)) + [1]
    return Topology("chain", 2, h - 1, np.array(nodes[:-1]), np.array(nodes[1:]),
                    np.array(bws, dtype=float), np.array(lats, dtype=float), np.zeros(h))


# hosts 0, 1; switches 2 (a), 3 (top), 4 (bottom), 5 (b): two disjoint 4-hop paths
DIAMOND = Topology("diamond", 2, 4, np.array([0, 2, 2, 3, 4, 5]), np.array([2, 3, 4, 5, 5, 1]),
                   np.full(6, B), np.full(6, LAT), np.zeros(6))
TOP = [0, 2, 6, 10]  # directed links 0->2->3->5->1, the shortest path
BOTTOM = [0, 4, 8, 10]  # 0->2->4->5->1


def dumbbell(n: int, core_bw: float = B) -> Topology:
    """Hosts 0..n-1 on switch 2n, hosts n..2n-1 on switch 2n+1, one core link between the
    switches (physical link 2n, directed 4n forward); host links at 4x the core."""
    a, b = 2 * n, 2 * n + 1
    u = list(range(2 * n)) + [a]
    v = [a] * n + [b] * n + [b]
    bw = [4 * core_bw] * (2 * n) + [core_bw]
    return Topology("dumbbell", 2 * n, 2, np.array(u), np.array(v), np.array(bw),
                    np.full(2 * n + 1, LAT), np.zeros(2 * n + 1))


def dyadic(t: Topology) -> Topology:
    """The fabric with every link at B and LAT (every time stays a dyadic fraction)."""
    return dataclasses.replace(t, link_bw=np.full(t.n_links, B),
                               link_lat=np.full(t.n_links, LAT), params=dict(t.params))


FABRICS = {"fat_tree": dyadic(build("fat_tree", {"k": 4})),
           "leaf_spine": dyadic(build("leaf_spine", {"leaves": 3, "hosts_per_leaf": 3,
                                                     "spines": 2}))}


def kind_of(factor: float) -> int:
    return DOWN if factor == 0 else (UP if factor == 1 else DEGRADE)


def faults(events) -> LinkFaults:
    """events: (time_s, directed link, factor); 0 is a down, 1 an up, else a degrade."""
    if not events:
        return LinkFaults.none()
    t, d, f = zip(*events)
    return LinkFaults(np.array(t, dtype=float), np.array(d), np.array([kind_of(x) for x in f]),
                      np.array(f, dtype=float))


def shifted(f: LinkFaults, dt: float) -> LinkFaults:
    return LinkFaults(f.time + dt, f.dlink, f.kind, f.factor)


# ------------------------------------------------------------------ closed form, one flow
def piecewise_end(bws, lats, size, t0, events, delay):
    """End of one flow host 0 -> host 1 on a chain (docs/flow_engine.md "Faults in time"):
    ``events`` (time, hop, factor) on the hops' forward links, in the order written."""
    events = sorted(events, key=lambda e: e[0])  # stable: one instant's records in order
    times = sorted({e[0] for e in events})

    def cap(t):  # the path's capacity once every event at or before t has applied
        f = [1.0] * len(bws)
        for te, hop, fa in events:
            if te <= t:
                f[hop] = fa
        return min(b * x for b, x in zip(bws, f))

    def restores(x):  # does an event at x bring back a link that was down before x
        f = [1.0] * len(bws)
        for te, hop, fa in events:
            if te < x:
                f[hop] = fa
        return any(fa > 0 and f[hop] == 0 for te, hop, fa in events if te == x)

    t = t0
    while cap(t) == 0:  # ready without a path: it waits for a dead link to come back and
        # tries the delay after that; stranded once none is due back
        ups = [x for x in times if x > t and restores(x)]
        if not ups:
            return math.nan
        t = ups[0] + delay
    t0 = t
    t, rem = t0, float(size)
    while True:
        rate = cap(t)
        tn = min([x for x in times if x > t], default=math.inf)
        if t + rem / rate <= tn:  # the last byte leaves before (or as) anything changes
            return t + rem / rate + sum(lats)
        rem -= rate * (tn - t)
        t = tn
        if cap(t) == 0:  # a link of the path went down: stop, re-route after the delay,
            # unless the path comes back first (or then): it resumes on it at that instant
            back = [x for x in times if t < x <= t + delay and cap(x) > 0]
            t = back[0] if back else t + delay
            while cap(t) == 0:  # no path: it waits for a dead link to come back and is
                # re-routed the delay after that; stranded once none is due back
                ups = [x for x in times if x > t and restores(x)]
                if not ups:
                    return math.nan
                t = ups[0] + delay


def run_chain(bws, lats, size, t0, events, delay_us, **opts):
    topo = chain(bws, lats)
    f = faults([(t, 2 * hop, fa) for t, hop, fa in events])
    return simulate(topo, Schedule.from_transfers([0], [1], [size], start=[t0]), "shortest", f,
                    engine="flow", reroute_delay_us=delay_us, **opts)


@st.composite
def chain_cases(draw):
    h = draw(st.integers(1, 4))
    bws = [2.0 ** draw(st.integers(28, 31)) for _ in range(h)]
    lats = [2.0 ** -draw(st.integers(18, 22)) for _ in range(h)]
    size = draw(st.integers(1, 64)) * 2 ** 16
    t0 = draw(st.integers(0, 8)) * 2.0 ** -14
    events = [(draw(st.integers(0, 64)) * 2.0 ** -14, draw(st.integers(0, h - 1)),
               draw(st.sampled_from([0.0, 0.125, 0.25, 0.5, 1.0])))
              for _ in range(draw(st.integers(0, 6)))]
    delay_us = draw(st.sampled_from([0.0, 2.0 ** -14 * 1e6, 2.0 ** -12 * 1e6]))
    return bws, lats, size, t0, events, delay_us


@settings(max_examples=300, **FAST)
@given(chain_cases())
# the last byte leaves as the only link goes down (no other path; with a delay too)
@example(([B], [LAT], 2 ** 20, 0.0, [(MS, 0, 0.0)], 0.0))
@example(([B, B / 2], [LAT, LAT], 2 ** 20, 2.0 ** -14, [(2.0 ** -14 + 2 * MS, 1, 0.0)],
          2.0 ** -12 * 1e6))
# down on one hop while another is degraded, a degrade of the down hop during the wait
@example(([B, 2 * B], [LAT, LAT / 2], 3 * 2 ** 18, 0.0,
          [(2.0 ** -12, 1, 0.5), (2.0 ** -11, 0, 0.0), (2.0 ** -11 + 2.0 ** -14, 0, 0.25)],
          2.0 ** -12 * 1e6))
def test_single_flow_ends_at_the_integral_of_its_piecewise_rate(case):
    bws, lats, size, t0, events, delay_us = case
    r = run_chain(bws, lats, size, t0, events, delay_us)
    want = piecewise_end(bws, lats, size, t0, events, delay_us * 1e-6)
    if math.isnan(want):
        assert r.stranded[0] and np.isnan(r.end[0]), r.end[0]
        assert r.node_extra["stranded_no_path"][0]
    else:
        assert not r.stranded[0]
        assert r.end[0] == pytest.approx(want, rel=1e-12, abs=0)
        # every byte crossed every hop of the chain, whatever the stops
        np.testing.assert_allclose(r.link_bytes[0::2], size, rtol=1e-12)


T1 = 2.0 ** -12  # a quarter of the way through a 1 MiB flow alone at B
# (name, start, events (time, hop 0, factor), reroute delay s, end by hand, re-routes)
EDGES = [
    ("down as the last byte leaves", 0.0, [(MS, 0.0)], 0.0, MS + LAT, 0),
    ("down as the last byte leaves, with a delay", 0.0, [(MS, 0.0)], T1, MS + LAT, 0),
    ("degrade as the last byte leaves", 0.0, [(MS, 0.5)], 0.0, MS + LAT, 0),
    ("degrade at the start instant", T1, [(T1, 0.5)], 0.0, T1 + 2 * MS + LAT, 0),
    # no path when it becomes ready: it starts when the link is back (until session 36:
    # stranded)
    ("down at the start instant, up later", T1, [(T1, 0.0), (2 * T1, 1.0)], 0.0,
     2 * T1 + MS + LAT, 0),
    ("down at the start instant, up later, with a delay", T1, [(T1, 0.0), (2 * T1, 1.0)], T1,
     3 * T1 + MS + LAT, 0),
    ("down before the start, up at it", T1, [(0.0, 0.0), (T1, 1.0)], 0.0, T1 + MS + LAT, 0),
    # 1/4 at B, then 1/4 at B/2 (2 T1), then 1/8 at B/4 (2 T1), then 3/8 at B/2 (3 T1)
    ("repeated degrades", 0.0, [(T1, 0.5), (3 * T1, 0.25), (5 * T1, 0.5)], 0.0,
     8 * T1 + LAT, 0),
    ("a degrade to the rate in force", 0.0, [(T1, 0.5), (2 * T1, 0.5)], 0.0,
     T1 + 6 * T1 + LAT, 0),
    ("an up of a link never down", 0.0, [(T1, 1.0)], 0.0, MS + LAT, 0),
    # stalled at T1 with 3/4 left; the degrade brings the link back at 1.5 T1, before the
    # re-route due at 3 T1: it resumes then, at B/2 (until session 29 it waited for 3 T1)
    ("a degrade of a down link during the wait", 0.0, [(T1, 0.0), (1.5 * T1, 0.5)], 2 * T1,
     1.5 * T1 + 6 * T1 + LAT, 0),
    ("an up during the wait", 0.0, [(T1, 0.0), (2 * T1, 1.0)], 4 * T1, 2 * T1 + 3 * T1 + LAT,
     0),
    # stalled at T1 with 3/4 left and no other path: it waits past its re-route (2 T1) for
    # the up at 3 T1 and continues the delay after it (until session 36: stranded at 2 T1)
    ("no path at the re-route, up later", 0.0, [(T1, 0.0), (3 * T1, 1.0)], T1,
     4 * T1 + 3 * T1 + LAT, 2),
    # the up at 3 T1 brings the link back degraded to 1/2 and a second down at 3.5 T1 (during
    # the delay) makes that re-route fail; the up at 5 T1 makes the next one (6 T1) succeed
    ("no path, back, down again during the delay, back", 0.0,
     [(T1, 0.0), (3 * T1, 0.5), (3.5 * T1, 0.0), (5 * T1, 1.0)], T1,
     6 * T1 + 3 * T1 + LAT, 3),
    ("down then degrade at one instant: degraded", 0.0, [(T1, 0.0), (T1, 0.5)], 0.0,
     T1 + 6 * T1 + LAT, 0),
    ("degrade then down at one instant: down", 0.0, [(T1, 0.5), (T1, 0.0)], 0.0, math.nan, 1),
    # stalled at T1 (3/4 left), back at 2 T1, the re-route instant, as the degrade strikes:
    # it resumes on its path (no re-route), 1/4 at B/2 until the up at 4 T1, then 1/2 at B
    ("down, degrade at the re-route instant, up", 0.0, [(T1, 0.0), (2 * T1, 0.5),
                                                         (4 * T1, 1.0)], T1,
     6 * T1 + LAT, 0),
]


@pytest.mark.parametrize("name, t0, events, delay, want, reroutes", EDGES,
                         ids=[e[0] for e in EDGES])
def test_single_flow_named_edges(name, t0, events, delay, want, reroutes):
    ev = [(t, 0, f) for t, f in events]
    r = run_chain([B], [LAT], 2 ** 20, t0, ev, delay * 1e6)
    ref = piecewise_end([B], [LAT], 2 ** 20, t0, ev, delay)
    if math.isnan(want):
        assert math.isnan(ref) and r.stranded[0] and np.isnan(r.end[0])
    else:
        assert ref == want and r.end[0] == want and not r.stranded[0]
    assert r.node_extra["reroutes"][0] == reroutes


# ------------------------------------------------------------------ several flows
def maxmin_ends(sizes, events, core_bw, tail):
    """Ends of flows that all start at 0 and share only a core link of capacity
    core_bw x factor(t) (``events``: (time, factor), degrades only): capacity / k each."""
    rem = np.array(sizes, dtype=float)
    end = np.full(len(sizes), np.nan)
    events = sorted(events, key=lambda e: e[0])
    t, fac, i = 0.0, 1.0, 0
    while np.isnan(end).any():
        while i < len(events) and events[i][0] <= t:
            fac = events[i][1]
            i += 1
        act = np.isnan(end)
        rate = core_bw * fac / act.sum()
        t_drain = t + rem[act].min() / rate
        t_next = events[i][0] if i < len(events) else math.inf
        tn = min(t_drain, t_next)
        rem[act] -= rate * (tn - t)
        t = tn
        done = act & (rem <= 1e-9 * max(sizes))
        end[done] = t + tail
    return end


@settings(max_examples=40, **FAST)
@given(st.integers(2, 5), st.data())
def test_flows_sharing_a_degraded_bottleneck_get_an_equal_share(n, data):
    sizes = data.draw(st.lists(st.integers(1, 16).map(lambda k: k * 2 ** 16), min_size=n,
                               max_size=n))
    events = data.draw(st.lists(st.tuples(st.integers(0, 32).map(lambda k: k * 2.0 ** -16),
                                          st.sampled_from([0.125, 0.25, 0.5, 0.75, 1.0])),
                                max_size=3))
    topo = dumbbell(n)
    core = 4 * n
    f = faults([(t, core, fa) for t, fa in events])
    r = simulate(topo, Schedule.from_transfers(list(range(n)), list(range(n, 2 * n)), sizes),
                 "shortest", f, engine="flow", link_series=True)
    want = maxmin_ends(sizes, events, B, 3 * LAT)
    np.testing.assert_allclose(r.end, want, rtol=1e-12, atol=0)
    assert r.link_bytes[core] == pytest.approx(sum(sizes), rel=1e-12)


@settings(max_examples=40, **FAST)
@given(st.integers(1, 5), st.data())
def test_a_degrade_on_one_link_of_a_path_equals_it_on_two(k, data):
    """Every flow crosses the whole chain: the bottleneck alone sets the rates."""
    h = 3
    sizes = data.draw(st.lists(st.integers(1, 16).map(lambda x: x * 2 ** 16), min_size=k,
                               max_size=k))
    starts = data.draw(st.lists(st.integers(0, 8).map(lambda x: x * 2.0 ** -14), min_size=k,
                                max_size=k))
    t_f = data.draw(st.integers(0, 32)) * 2.0 ** -15
    fa = data.draw(st.sampled_from([0.125, 0.25, 0.5]))
    hop = data.draw(st.integers(0, h - 2))
    topo = chain([B] * h, [LAT] * h)
    sched = Schedule.from_transfers([0] * k, [1] * k, sizes, start=starts)
    one = simulate(topo, sched, "shortest", faults([(t_f, 2 * hop, fa)]), engine="flow")
    two = simulate(topo, sched, "shortest",
                   faults([(t_f, 2 * hop, fa), (t_f, 2 * hop + 2, fa)]), engine="flow")
    milder = simulate(topo, sched, "shortest",
                      faults([(t_f, 2 * hop + 2, 2 * fa), (t_f, 2 * hop, fa),
                              (2 * t_f, 2 * hop + 2, min(4 * fa, 1.0))]),
                      engine="flow")
    np.testing.assert_allclose(two.end, one.end, rtol=1e-12, atol=0)
    np.testing.assert_allclose(milder.end, one.end, rtol=1e-12, atol=0)


# ------------------------------------------------------------------ re-routing
@settings(max_examples=40, **FAST)
@given(st.integers(1, 64), st.integers(1, 64), st.sampled_from([0.0, 2.0 ** -14, 2.0 ** -11]),
       st.booleans())
@example(16, 64, 2.0 ** -11, False)  # the down strikes as the last byte leaves
def test_a_reroute_pays_its_delay_once_and_conserves_bytes(k, q, delay, second_down):
    """Flow 0 -> 1 of k x 64 KiB on the diamond's top path; its second link goes down at
    q x 2^-16 s, before its last byte leaves or as it does (clamped there); optionally its
    third link dies too while it waits to be re-routed."""
    size = k * 2 ** 16
    t_down = q * 2.0 ** -16
    drain = size / B
    if t_down > drain:
        t_down = drain
    ev = [(t_down, 2, 0.0)]
    if second_down:
        ev.append((t_down + delay / 2, 6, 0.0))
    d_us = delay * 1e6
    r = simulate(DIAMOND, Schedule.from_transfers([0], [1], [size]), "shortest", faults(ev),
                 engine="flow", reroute_delay_us=d_us)
    ptr, link = r.node_extra["path_ptr"], r.node_extra["path_link"]
    assert not r.stranded[0]
    if t_down == drain:  # nothing left to re-route
        assert r.end[0] == drain + 4 * LAT
        assert r.node_extra["reroutes"][0] == 0
        np.testing.assert_array_equal(r.link_bytes[TOP], size)
        assert link[ptr[0]:ptr[1]].tolist() == TOP
        return
    assert r.end[0] == pytest.approx(drain + d_us * 1e-6 + 4 * LAT, rel=1e-12)
    assert r.node_extra["reroutes"][0] == 1
    sent = B * t_down
    np.testing.assert_allclose(r.link_bytes[[0, 10]], size, rtol=1e-12)  # shared hops
    np.testing.assert_allclose(r.link_bytes[[2, 6]], sent, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(r.link_bytes[[4, 8]], size - sent, rtol=1e-12, atol=1e-9)
    assert link[ptr[0]:ptr[1]].tolist() == TOP + BOTTOM


def test_a_flow_cut_for_good_is_stranded_and_blocks_its_descendants():
    """Chain 0 - s - 1; hop 1's forward link goes down at T1 for good: flow 0 (0 -> 1)
    stranded after sending B x T1, flow 1 (its child) blocked, flow 2 (1 -> 0, the reverse
    links) untouched; the same through a session: no on_done for 0 and 1, nothing pending."""
    topo = chain([B, B], [LAT, LAT])
    f = faults([(T1, 2, 0.0)])
    sched = Schedule.from_transfers([0, 1, 1], [1, 0, 0], [2 ** 20, 2 ** 20, 2 ** 19],
                                    deps=[[], [0], []])
    r = simulate(topo, sched, "shortest", f, engine="flow", reroute_delay_us=1.0)
    assert r.stranded.tolist() == [True, True, False]
    assert r.node_extra["stranded_no_path"].tolist() == [True, False, False]
    assert r.node_extra["blocked"].tolist() == [False, True, False]
    assert np.isnan(r.end[:2]).all() and np.isnan(r.start[1])
    assert r.end[2] == 2 ** 19 / B + 2 * LAT
    assert r.link_bytes[0] == r.link_bytes[2] == B * T1
    ses = Session(topo, routing="shortest", faults=f, reroute_delay_us=1.0)
    done = []
    ses.send(0, 1, 2 ** 20, on_done=lambda i: (done.append(i), ses.send(1, 0, 2 ** 20)))
    ses.send(1, 0, 2 ** 19, on_done=done.append)
    assert ses.run() == r.end[2]
    assert done == [1] and ses.pending() == 0
    rs = ses.result()
    assert rs.stranded.tolist() == [True, False] and rs.end[1] == r.end[2]
    assert rs.link_bytes[0] == B * T1


# ------------------------------------------------------------------ random workloads
@st.composite
def workloads(draw, max_n=7, kinds=("down", "degrade", "up"), zero_at=True):
    """(fabric name, policy, src, dst, size, start, deps, LinkFaults, reroute delay us):
    sizes in 4 KiB units, starts on a 2^-18 s grid, fault instants on a 2^-17 s grid (often
    0), on any link, one or both directions."""
    name = draw(st.sampled_from(sorted(FABRICS)))
    t = FABRICS[name]
    H = t.n_hosts
    n = draw(st.integers(1, max_n))
    src = np.array(draw(st.lists(st.integers(0, H - 1), min_size=n, max_size=n)))
    dst = (src + np.array(draw(st.lists(st.integers(1, H - 1), min_size=n, max_size=n)))) % H
    size = np.array(draw(st.lists(st.integers(0, 256), min_size=n, max_size=n))) * 4096
    start = np.array(draw(st.lists(st.integers(0, 32), min_size=n, max_size=n))) * 2.0 ** -18
    deps = [sorted(draw(st.sets(st.integers(0, i - 1), max_size=2))) if i else []
            for i in range(n)]
    ev = []
    for _ in range(draw(st.integers(1, 5))):
        d = draw(st.integers(0, t.n_dlinks - 1))
        at = draw(st.one_of(st.just(0), st.integers(0, 64))) if zero_at else \
            draw(st.integers(1, 64))
        kind = draw(st.sampled_from(kinds))
        fa = draw(st.sampled_from([0.25, 0.5])) if kind == "degrade" else \
            (0.0 if kind == "down" else 1.0)
        for dd in ([d] if draw(st.booleans()) else [d, d ^ 1]):
            ev.append((at * 2.0 ** -17, dd, fa))
    pol = draw(st.sampled_from(["ecmp", "shortest"]))
    delay = draw(st.sampled_from([0.0, 2.0 ** -17 * 1e6, 2.0 ** -15 * 1e6]))
    return name, pol, src, dst, size, start, deps, faults(ev), delay


def sched(src, dst, size, start, deps):
    return Schedule.from_transfers(src, dst, size, start=np.asarray(start, dtype=float),
                                   deps=deps)


def by_transfer(values, ids, n, missing=np.nan):
    """A session's per-id ``values`` in the order of the transfers (``ids``: transfer ->
    session id); ``missing`` for transfers never sent."""
    out = np.full(n, missing, dtype=np.asarray(values).dtype)
    for i, tid in ids.items():
        out[i] = values[tid]
    return out


@settings(max_examples=150, **FAST)
@given(workloads(), st.sampled_from(["fluid", "tcp"]))
def test_a_session_with_faults_equals_the_batch_run(w, transport):
    """Sends from on_done and timed callbacks; faults from time 0 on; re-route delays."""
    name, pol, src, dst, size, start, deps, f, delay = w
    t = FABRICS[name]
    opts = dict(transport=transport, reroute_delay_us=delay)
    batch = simulate(t, sched(src, dst, size, start, deps), Routing(t, pol), f, engine="flow",
                     **opts)
    ses = Session(t, routing=Routing(t, pol), faults=f, **opts)
    ids = drive(ses, src, dst, size, start, deps)
    n = len(src)
    # transfers behind a stranded one are never sent
    assert sorted(ids) == np.flatnonzero(~batch.node_extra["blocked"]).tolist()
    res = ses.result()
    # a start reached as now() + (start - now()) may differ from start in the last bit
    np.testing.assert_allclose(by_transfer(res.end, ids, n), batch.end, rtol=1e-12, atol=0)
    np.testing.assert_array_equal(by_transfer(res.node_extra["reroutes"], ids, n, 0),
                                  batch.node_extra["reroutes"])


def test_session_sends_at_time_zero_meet_the_faults_of_time_zero():
    """The diamond's top path is down from time 0: the batch run routes the transfer below
    it at once; the session must too (no re-route, no re-route delay)."""
    f = faults([(0.0, 2, 0.0), (0.0, 3, 0.0)])
    batch = simulate(DIAMOND, Schedule.from_transfers([0], [1], [2 ** 20]), "shortest", f,
                     engine="flow", reroute_delay_us=8.0)
    assert batch.end[0] == MS + 4 * LAT and batch.node_extra["reroutes"][0] == 0
    ses = Session(DIAMOND, routing="shortest", faults=f, reroute_delay_us=8.0)
    ses.send(0, 1, 2 ** 20)
    ses.run()
    r = ses.result()
    assert r.end[0] == batch.end[0]
    assert r.node_extra["reroutes"][0] == 0
    assert r.link_bytes[2] == 0.0


def test_a_down_as_a_child_is_released_routes_it_around_without_a_delay():
    """The parent ends (its tail over) at E, the instant the diamond's top path goes down: the
    child, released at E, is routed below at once (no re-route, no delay), in a batch run and
    when a session sends it from the parent's on_done; the parent, delivered, is untouched."""
    e = MS + 4 * LAT
    f = faults([(e, 2, 0.0), (e, 3, 0.0)])
    r = simulate(DIAMOND, Schedule.from_transfers([0, 0], [1, 1], [2 ** 20] * 2, deps=[[], [0]]),
                 "shortest", f, engine="flow", reroute_delay_us=8.0)
    ses = Session(DIAMOND, routing="shortest", faults=f, reroute_delay_us=8.0)
    ses.send(0, 1, 2 ** 20, on_done=lambda _: ses.send(0, 1, 2 ** 20))
    ses.run()
    for res in (r, ses.result()):
        assert res.end.tolist() == [e, 2 * e]
        assert res.node_extra["reroutes"].tolist() == [0, 0]
        assert res.node_extra["path_link"].tolist() == TOP + BOTTOM


@settings(max_examples=100, **FAST)
@given(workloads(), st.lists(st.integers(0, 96), max_size=6))
def test_a_session_in_small_steps_equals_one_run(w, grid):
    """run_until at grid points, at every fault instant and at every re-route instant, with
    result() / pending() / now() read at each: the same bits as one run()."""
    name, pol, src, dst, size, start, deps, f, delay = w
    t = FABRICS[name]
    stops = sorted(set([g * 2.0 ** -18 for g in grid] + f.time.tolist() +
                       (f.time + delay * 1e-6).tolist()))
    one = Session(t, routing=Routing(t, pol), faults=f, reroute_delay_us=delay)
    ids1 = drive(one, src, dst, size, start, deps)
    many = Session(t, routing=Routing(t, pol), faults=f, reroute_delay_us=delay)
    ids2 = drive(many, src, dst, size, start, deps, stops)
    assert ids1 == ids2
    a, b = one.result(), many.result()
    np.testing.assert_array_equal(a.end, b.end)
    np.testing.assert_array_equal(a.start, b.start)
    np.testing.assert_array_equal(a.link_bytes, b.link_bytes)
    np.testing.assert_array_equal(a.node_extra["reroutes"], b.node_extra["reroutes"])


@settings(max_examples=60, **FAST)
@given(workloads(max_n=5, kinds=("down", "degrade", "up"), zero_at=False),
       st.integers(1, 8))
def test_run_then_more_sends_equals_the_batch_run_with_those_start_times(w, later):
    """Phase 1 runs to completion with run(); faults still to come; phase 2 (the same
    transfers again) is sent at now() and run: as the batch run of both phases with phase
    2 starting at phase 1's end."""
    name, pol, src, dst, size, start, deps, f, delay = w
    t = FABRICS[name]
    n = len(src)
    ses = Session(t, routing=Routing(t, pol), faults=f, reroute_delay_us=delay)
    for i in range(n):
        ses.send(int(src[i]), int(dst[i]), int(size[i]), flow_key=i)
    ses.run()
    first = ses.result()
    # a transfer stranded after the last completion leaves now() at the instant it was
    # stranded (test_run_returns_at_the_instant_the_last_transfer_was_stranded)
    assume(not first.stranded.any())
    t1 = ses.now()
    assert t1 == np.nanmax(first.end, initial=0.0)
    # more faults after phase 1: they must not have struck yet
    f2 = LinkFaults(np.concatenate([f.time, [t1 + later * 2.0 ** -18]]),
                    np.concatenate([f.dlink, [0]]), np.concatenate([f.kind, [DEGRADE]]),
                    np.concatenate([f.factor, [0.5]]))
    ses = Session(t, routing=Routing(t, pol), faults=f2, reroute_delay_us=delay)
    for i in range(n):
        ses.send(int(src[i]), int(dst[i]), int(size[i]), flow_key=i)
    ses.run()
    assert ses.now() == t1
    for i in range(n):
        ses.send(int(src[i]), int(dst[i]), int(size[i]), flow_key=n + i)
    ses.run()
    ses.run_until(ses.now() + 2.0 ** -20)
    batch = simulate(t, sched(np.tile(src, 2), np.tile(dst, 2), np.tile(size, 2),
                              np.r_[np.zeros(n), np.full(n, t1)], [[]] * (2 * n)),
                     Routing(t, pol), f2, engine="flow", reroute_delay_us=delay)
    np.testing.assert_array_equal(ses.result().end, batch.end)


def test_run_returns_at_the_last_completion_with_faults_still_to_come():
    """Faults after the last completion strike later, when the clock gets there; sends after
    run() start at its now()."""
    f = faults([(1.0, 2, 0.5)])  # the diamond's top path at B/2 from 1 s on
    ses = Session(DIAMOND, routing="shortest", faults=f)
    ses.send(0, 1, 2 ** 20)
    assert ses.run() == MS + 4 * LAT
    ses.send(0, 1, 2 ** 20)
    assert ses.run() == 2 * (MS + 4 * LAT)
    ses.run_until(1.0)
    ses.send(0, 1, 2 ** 20)
    assert ses.run() == 1.0 + 2 * MS + 4 * LAT
    assert ses.result().end.tolist() == [MS + 4 * LAT, 2 * (MS + 4 * LAT),
                                         1.0 + 2 * MS + 4 * LAT]


def test_run_returns_at_the_instant_the_last_transfer_was_stranded():
    """Hop 1's forward link dies at T1 for good: the only transfer is stranded then, and
    run() returns at T1 (the engine's clock is there); a send after it starts at T1."""
    ses = Session(chain([B, B], [LAT, LAT]), routing="shortest", faults=faults([(T1, 2, 0.0)]))
    ses.send(0, 1, 2 ** 20)
    assert ses.run() == T1 and ses.pending() == 0
    ses.send(1, 0, 2 ** 20)  # the reverse links are up
    assert ses.run() == T1 + MS + 2 * LAT
    assert ses.result().stranded.tolist() == [True, False]


def _has_packet():
    try:
        import netcore.packet.incremental  # noqa: F401
        from netcore import _packet  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _has_packet(), reason="packet engine not built")
def test_packet_session_run_then_send_more():
    """The same contract on the packet engine, no fault needed: run(), then send."""
    ft4 = build("fat_tree", {"k": 4})
    ses = Session(ft4, engine="packet", routing="dmodk", transport="tcp")
    for i in range(4):
        ses.send(i, (i + 5) % 16, 1_000_000)
    t1 = ses.run()
    ses.send(0, 1, 1000)
    ses.run()
    assert ses.result().start[4] == t1


# ------------------------------------------------------------------ shift, series, bits
@settings(max_examples=150, **FAST)
@given(workloads(), st.sampled_from([2.0 ** -10, 2.0 ** -6]))
def test_a_time_shift_of_every_start_and_fault_shifts_every_end(w, shift):
    name, pol, src, dst, size, start, deps, f, delay = w
    t = FABRICS[name]
    a = simulate(t, sched(src, dst, size, start, deps), Routing(t, pol), f, engine="flow",
                 reroute_delay_us=delay)
    b = simulate(t, sched(src, dst, size, start + shift, deps), Routing(t, pol),
                 shifted(f, shift), engine="flow", reroute_delay_us=delay)
    np.testing.assert_array_equal(np.isnan(a.end), np.isnan(b.end))
    np.testing.assert_allclose(b.end - shift, a.end, rtol=1e-12, atol=1e-18)
    np.testing.assert_allclose(b.link_bytes, a.link_bytes, rtol=1e-12, atol=1e-6)
    np.testing.assert_array_equal(b.node_extra["reroutes"], a.node_extra["reroutes"])


@settings(max_examples=120, **FAST)
@given(workloads(max_n=8))
def test_the_link_series_under_faults_is_the_links_bytes_and_capacity(w):
    name, pol, src, dst, size, start, deps, f, delay = w
    t = FABRICS[name]
    r = simulate(t, sched(src, dst, size, start, deps), Routing(t, pol), f, engine="flow",
                 reroute_delay_us=delay, link_series=True)
    ptr, ts, rate = (r.link_extra[k] for k in ("series_ptr", "series_t", "series_rate"))
    end = max(r.makespan, float(ts.max(initial=0.0)))
    for l in range(t.n_dlinks):
        a, b = ptr[l], ptr[l + 1]
        if a == b:
            assert r.link_bytes[l] == 0 and r.link_busy[l] == 0
            continue
        dt = np.diff(np.append(ts[a:b], end))
        assert (rate[a:b] * dt).sum() == pytest.approx(r.link_bytes[l], rel=1e-9, abs=1e-6)
        assert dt[rate[a:b] > 0].sum() == pytest.approx(r.link_busy[l], rel=1e-12, abs=1e-18)
        assert rate[b - 1] == 0.0
        for tt, rr in zip(ts[a:b], rate[a:b]):
            assert rr <= t.dlink_bw[l] * f.capacity_factor_at(t.n_dlinks, tt)[l] * (1 + 1e-12)
        # right after each fault on the link, the rate in force fits the new capacity
        for tf in f.time[f.dlink == l]:
            k = np.searchsorted(ts[a:b], tf, side="right") - 1
            if k >= 0:
                cap = t.dlink_bw[l] * f.capacity_factor_at(t.n_dlinks, tf)[l]
                assert rate[a + k] <= cap * (1 + 1e-12)


@settings(max_examples=40, **FAST)
@given(workloads(max_n=8), st.sampled_from(["fluid", "tcp"]))
def test_same_inputs_same_bits(w, transport):
    name, pol, src, dst, size, start, deps, f, delay = w
    t = FABRICS[name]
    opts = dict(transport=transport, reroute_delay_us=delay, link_series=True)
    runs = [simulate(t, sched(src, dst, size, start, deps), Routing(t, pol), f, engine="flow",
                     **opts) for _ in range(2)]
    for name_ in ("start", "end", "stranded", "link_bytes", "link_busy"):
        np.testing.assert_array_equal(getattr(runs[0], name_), getattr(runs[1], name_))
    for k in ("path_ptr", "path_link", "path_weight", "reroutes"):
        np.testing.assert_array_equal(runs[0].node_extra[k], runs[1].node_extra[k])
    for k in ("series_ptr", "series_t", "series_rate"):
        np.testing.assert_array_equal(runs[0].link_extra[k], runs[1].link_extra[k])
    sessions = []
    for _ in range(2):
        ses = Session(t, routing=Routing(t, pol), faults=f, **opts)
        drive(ses, src, dst, size, start, deps)
        sessions.append(ses.result())
    np.testing.assert_array_equal(sessions[0].end, sessions[1].end)
    np.testing.assert_array_equal(sessions[0].link_bytes, sessions[1].link_bytes)
