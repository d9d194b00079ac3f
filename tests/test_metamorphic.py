"""Metamorphic and invariant properties: relations between runs that hold by physics or by the
documented model, whatever the numbers (hypothesis draws small fabrics and workloads).

Flow engine (docs/flow_engine.md "The model, exactly"): its times are a function of bytes,
bandwidths and latencies only, so scaling bandwidth by k and every time input (latencies,
start times, fault instants, reroute delay) by 1/k divides every end by k; with no latency,
scaling every size and start by m multiplies every end by m; a fault event that leaves every
capacity as it was, or strikes after the run, changes nothing; relabelling the hosts by an
automorphism of the fabric that the routing policy respects changes nothing; a transfer on
links no one else uses changes no one else's times; a dependency is the same as a start
time at the instant the parents ended; a session driven call by call equals the batch run.
Both engines: the start rule, per-transfer lower bounds, link bytes within capacity x busy
time, bit-for-bit determinism. Collectives: every builder on tiny and odd sizes either
refuses with an InputError or passes the checker, moves at least the bytes the operation
needs, and is deterministic; the alpha-beta estimate equals the flow engine on a
non-blocking star. Serving: more HBM bandwidth or compute never slows an iteration; TP does
not change a dense model's GEMM work; splitting a trace over replicas by hand gives the
replicated run's figures; shifting a trace's clock changes nothing. The scalable form of a
collective equals the full form with a degrade from the start or a fault after it; a training
step is never slower on faster HBM, GPUs or links.
"""
import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import collectives as co
from collectives import check
from netcore.api import simulate
from netcore.schedule import TRANSFER, Schedule
from topo.builders import build
from topo.errors import InputError
from topo.faults import LinkFaults
from topo.routing import Routing
from topo.topology import Topology, gbps, us

from collective_helpers import options_for

FAST = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                   HealthCheck.filter_too_much])

FABRICS = {
    "fat_tree": build("fat_tree", {"k": 4, "latency_us": 1.0}),
    "leaf_spine": build("leaf_spine", {"leaves": 3, "hosts_per_leaf": 3, "spines": 2,
                                       "oversubscription": 1.5, "latency_us": 0.5}),
    "torus": build("torus", {"dims": [3, 4], "latency_us": 0.3}),
    "two_tier": build("two_tier", {"nodes": 2, "gpus_per_node": 4}),
    "fullflat": build("fullflat", {"n_gpus": 8, "planes": 2}),
    "dragonfly": build("dragonfly", {"groups": 3, "routers_per_group": 2,
                                     "hosts_per_router": 2, "global_links": 1}),
}
ZERO_LAT = {k: dataclasses.replace(t, link_lat=np.zeros_like(t.link_lat), params=dict(t.params))
            for k, t in FABRICS.items()}


def scaled(t: Topology, bw: float = 1.0, lat: float = 1.0) -> Topology:
    return dataclasses.replace(t, link_bw=t.link_bw * bw, link_lat=t.link_lat * lat,
                               params=dict(t.params))


@st.composite
def workloads(draw, fabrics=tuple(FABRICS), max_n=8, min_size=0, policies=None):
    """(fabric name, policy, src, dst, size, start, deps) on one of ``fabrics``."""
    name = draw(st.sampled_from(fabrics))
    t = FABRICS[name]
    n = draw(st.integers(1, max_n))
    src = np.array(draw(st.lists(st.integers(0, t.n_hosts - 1), min_size=n, max_size=n)))
    off = np.array(draw(st.lists(st.integers(1, t.n_hosts - 1), min_size=n, max_size=n)))
    dst = (src + off) % t.n_hosts
    size = np.array(draw(st.lists(st.integers(min_size, 3_000_000), min_size=n, max_size=n)),
                    dtype=np.int64)
    start = np.array(draw(st.lists(st.one_of(st.just(0.0), st.integers(0, 100_000).map(
        lambda x: x * 1e-9)), min_size=n, max_size=n)))
    deps = [sorted(draw(st.sets(st.integers(0, i - 1), max_size=3))) if i else []
            for i in range(n)]
    pols = policies or ["ecmp", "shortest", "spray"] + (["dor"] if name == "torus" else [])
    pol = draw(st.sampled_from(pols))
    return name, pol, src, dst, size, start, deps


def sched(src, dst, size, start, deps):
    return Schedule.from_transfers(src, dst, size, start=np.asarray(start, dtype=float),
                                   deps=deps)


def link_rec(t, l, kind, at_us, factor=None):
    rec = {"link": [int(t.link_u[l]), int(t.link_v[l])], "kind": kind, "at_us": at_us}
    if factor is not None:
        rec["factor"] = factor
    return rec


def same_result(a, b):
    for name in ("start", "end", "stranded", "link_bytes", "link_busy"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


# ------------------------------------------------------------------ flow engine: scaling
@settings(max_examples=120, **FAST)
@given(workloads(), st.sampled_from([0.25, 0.5, 2.0, 4.0, 10.0]),
       st.sampled_from([{}, {"mtu": 1500}, {"mtu": 9000}, {"transport": "tcp"},
                        {"reroute_delay_us": 3.0}]),
       st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(["down", "degrade"]),
                          st.integers(0, 300), st.booleans()), max_size=2))
def test_flow_time_scale_invariance(w, k, opts, faults):
    """bandwidth x k with latencies, starts, fault times and reroute delay / k: ends / k."""
    name, pol, src, dst, size, start, deps = w
    t = FABRICS[name]
    recs = []
    for l, kind, at, comes_back in faults:
        l %= t.n_links
        recs.append(link_rec(t, l, kind, float(at), 0.5 if kind == "degrade" else None))
        if comes_back:
            recs.append(link_rec(t, l, "up", float(at) + 40.0))
    r1 = simulate(t, sched(src, dst, size, start, deps), Routing(t, pol),
                  LinkFaults.from_records(t, recs), engine="flow", **opts)
    t2 = scaled(t, bw=k, lat=1 / k)
    opts2 = dict(opts)
    if "reroute_delay_us" in opts:
        opts2["reroute_delay_us"] = opts["reroute_delay_us"] / k
    recs2 = [dict(r, at_us=r["at_us"] / k) for r in recs]
    r2 = simulate(t2, sched(src, dst, size, start / k, deps), Routing(t2, pol),
                  LinkFaults.from_records(t2, recs2), engine="flow", **opts2)
    np.testing.assert_array_equal(np.isnan(r1.end), np.isnan(r2.end))
    np.testing.assert_allclose(r2.end * k, r1.end, rtol=1e-9, atol=0)
    np.testing.assert_allclose(r2.link_bytes, r1.link_bytes, rtol=1e-9, atol=1e-6)


@settings(max_examples=90, **FAST)
@given(workloads(), st.sampled_from([2, 3, 7]), st.sampled_from(["fluid", "tcp"]))
def test_flow_zero_latency_size_scaling(w, m, transport):
    """No latency, fluid: sizes and start times x m give every end x m (bandwidth-bound)."""
    name, pol, src, dst, size, start, deps = w
    t = ZERO_LAT[name]
    r1 = simulate(t, sched(src, dst, size, start, deps), Routing(t, pol), engine="flow")
    r2 = simulate(t, sched(src, dst, size * m, start * m, deps), Routing(t, pol),
                  engine="flow")
    np.testing.assert_allclose(r2.end, r1.end * m, rtol=1e-9, atol=0)
    np.testing.assert_allclose(r2.link_busy, r1.link_busy * m, rtol=1e-9, atol=1e-18)
    if transport == "fluid":  # the busiest link bounds the makespan from below
        load = r1.link_bytes / t.dlink_bw
        assert r1.makespan >= load.max() * (1 - 1e-9)


# ------------------------------------------------------------------ faults that change nothing
def _no_op_fault(t, l, frac, makespan_s, variant):
    """Fault records on link l (mod the links) that leave every capacity as it was while the
    run lasts: a down after it ends, a degrade by 1.0, a down and an up at one instant, or an
    up of a link at nominal rate, at frac of the makespan."""
    l %= t.n_links
    when = frac * makespan_s * 1e6
    return {"after": [link_rec(t, l, "down", makespan_s * 1e6 * 1.01 + 1.0)],
            "degrade_1": [link_rec(t, l, "degrade", when, 1.0)],
            "down_up_same_instant": [link_rec(t, l, "down", when), link_rec(t, l, "up", when)],
            "up_at_nominal": [link_rec(t, l, "up", when)]}[variant]


@settings(max_examples=90, **FAST)
@given(workloads(), st.integers(0, 10**6), st.floats(0.0, 1.0),
       st.sampled_from(["after", "degrade_1", "down_up_same_instant", "up_at_nominal"]),
       st.sampled_from(["fluid", "tcp"]))
def test_flow_no_op_faults_change_nothing(w, l, frac, variant, transport):
    name, pol, src, dst, size, start, deps = w
    t = FABRICS[name]
    s = sched(src, dst, size, start, deps)
    base = simulate(t, s, Routing(t, pol), engine="flow", transport=transport)
    recs = _no_op_fault(t, l, frac, base.makespan, variant)
    r = simulate(t, s, Routing(t, pol), LinkFaults.from_records(t, recs), engine="flow",
                 transport=transport)
    np.testing.assert_array_equal(r.end, base.end)
    np.testing.assert_array_equal(r.start, base.start)
    assert not r.stranded.any()


@settings(max_examples=45, **FAST)
@given(workloads(max_n=6, policies=["ecmp", "shortest"]), st.integers(0, 10**6),
       st.floats(0.0, 1.0), st.sampled_from(["after", "degrade_1", "up_at_nominal"]),
       st.sampled_from(["ideal", "tcp", "dcqcn"]))
def test_packet_no_op_faults_change_nothing(w, l, frac, variant, transport):
    """(A down then up at one instant is not a no-op in the packet engine: `down` drops the
    queue and the packets on the wire, docs/packet_engine.md "Faults".)"""
    name, pol, src, dst, size, start, deps = w
    t = FABRICS[name]
    s = sched(src, dst, size, start, deps)
    base = simulate(t, s, Routing(t, pol), engine="packet", transport=transport)
    recs = _no_op_fault(t, l, frac, base.makespan, variant)
    r = simulate(t, s, Routing(t, pol), LinkFaults.from_records(t, recs), engine="packet",
                 transport=transport)
    np.testing.assert_array_equal(r.end, base.end)


# ------------------------------------------------------------------ symmetry
FT4 = FABRICS["fat_tree"]
TORUS = FABRICS["torus"]


@st.composite
def fat_tree_automorphisms(draw):
    """A host relabelling of fat_tree(4) by permuting pods, edge switches inside a pod and
    hosts under an edge switch (host id = pod * 4 + edge * 2 + host)."""
    pods = draw(st.permutations(range(4)))
    edges = [draw(st.permutations(range(2))) for _ in range(4)]
    hosts = [[draw(st.permutations(range(2))) for _ in range(2)] for _ in range(4)]
    sigma = np.empty(16, dtype=np.int64)
    for p in range(4):
        for e in range(2):
            for h in range(2):
                sigma[p * 4 + e * 2 + h] = pods[p] * 4 + edges[p][e] * 2 + hosts[p][e][h]
    return sigma


@st.composite
def torus_automorphisms(draw):
    """A translation (with dor) or a translation and reflection (with spray) of the 3x4 torus."""
    a, b = draw(st.integers(0, 2)), draw(st.integers(0, 3))
    fa, fb = draw(st.booleans()), draw(st.booleans())
    sigma = np.empty(12, dtype=np.int64)
    for i in range(3):
        for j in range(4):
            sigma[i * 4 + j] = (((-i if fa else i) + a) % 3) * 4 + ((-j if fb else j) + b) % 4
    return sigma, ["spray"] + ([] if fa or fb else ["dor"])


@settings(max_examples=90, **FAST)
@given(st.data(), st.sampled_from(["fluid", "tcp"]))
def test_flow_host_relabelling_by_a_fabric_symmetry(data, transport):
    if data.draw(st.booleans()):
        t, sigma, pols = FT4, data.draw(fat_tree_automorphisms()), ["spray", "shortest"]
        name = "fat_tree"
    else:
        t, name = TORUS, "torus"
        sigma, pols = data.draw(torus_automorphisms())
    _, _, src, dst, size, start, deps = data.draw(workloads(fabrics=(name,), max_n=10))
    for pol in pols:
        a = simulate(t, sched(src, dst, size, start, deps), Routing(t, pol), engine="flow",
                     transport=transport)
        b = simulate(t, sched(sigma[src], sigma[dst], size, start, deps), Routing(t, pol),
                     engine="flow", transport=transport)
        np.testing.assert_allclose(b.end, a.end, rtol=1e-9, atol=0, err_msg=pol)
        assert b.link_bytes.sum() == pytest.approx(a.link_bytes.sum(), rel=1e-12)


# ------------------------------------------------------------------ independence, dependencies
@settings(max_examples=120, **FAST)
@given(workloads(max_n=6, min_size=1, policies=["ecmp", "shortest"]),
       st.sampled_from(["flow", "packet"]), st.integers(0, 3))
def test_a_transfer_on_links_no_one_else_uses_changes_no_one_else(w, engine, tr):
    """The last transfer is the added one; it has no dependencies and no one depends on it."""
    name, pol, src, dst, size, start, deps = w
    assume(len(src) >= 2)
    t = FABRICS[name]
    n = len(src) - 1
    deps = deps[:n] + [[]]
    p = Routing(t, pol).paths(src, dst, flow_id=np.arange(n + 1))
    # physical links for the packet engine (ACKs ride the reverse direction)
    key = (lambda x: x // 2) if engine == "packet" else (lambda x: x)
    others = set(key(p.link[:p.ptr[n]]).tolist())
    assume(not others & set(key(p.link[p.ptr[n]:p.ptr[n + 1]]).tolist()))
    transport = (["fluid", "tcp"] if engine == "flow" else ["ideal", "tcp", "dcqcn", "dctcp"])
    opts = {"transport": transport[tr % len(transport)]}
    alone = simulate(t, sched(src[:n], dst[:n], size[:n], start[:n], deps[:n]),
                     Routing(t, pol), engine=engine, **opts)
    both = simulate(t, sched(src, dst, size, start, deps), Routing(t, pol), engine=engine,
                    **opts)
    np.testing.assert_array_equal(both.end[:n], alone.end)
    np.testing.assert_array_equal(both.start[:n], alone.start)


@settings(max_examples=120, **FAST)
@given(workloads(max_n=8), st.sampled_from([("flow", "fluid"), ("flow", "tcp"),
                                            ("packet", "ideal"), ("packet", "dcqcn")]))
def test_a_dependency_equals_a_start_time_at_the_parents_end(w, how):
    """(The packet engine's tcp is left out: its ties at one picosecond are broken by event
    order, which a start time and a parent's end enter differently.)"""
    name, pol, src, dst, size, start, deps = w
    engine, transport = how
    if engine == "packet" and pol == "spray":
        pol = "ecmp"  # per-packet spraying draws from a seeded stream shared by all flows
    # the packet engine's plane split on fullflat included: a child's plane pieces wait for
    # every piece of the parent (netcore.schedule.piece_edges), not its plane-0 piece alone
    t = FABRICS[name]
    a = simulate(t, sched(src, dst, size, start, deps), Routing(t, pol), engine=engine,
                 transport=transport)
    ready = np.array([max([start[i]] + [a.end[j] for j in deps[i]]) for i in range(len(src))])
    if engine == "packet":
        # likewise a dependent released at the picosecond another transfer starts (a
        # zero-byte parent ends where it starts): which queues first is event order. Found
        # in CI-like random runs: two 1-byte transfers 0 -> 1, one after a zero-byte parent,
        # swapped their ends (2.0088 / 2.0132 us)
        dep = np.flatnonzero([bool(d) for d in deps])
        assume(not any((ready[i] == np.delete(ready, i)).any() for i in dep))
    b = simulate(t, sched(src, dst, size, ready, [[] for _ in deps]), Routing(t, pol),
                 engine=engine, transport=transport)
    np.testing.assert_array_equal(b.end, a.end)


@settings(max_examples=60, **FAST)
@given(workloads(fabrics=("fat_tree", "torus", "leaf_spine"), max_n=7, min_size=1,
                 policies=["ecmp", "shortest"]),
       st.sampled_from([("flow", "fluid"), ("flow", "tcp"), ("packet", "ideal"),
                        ("packet", "dcqcn")]))
def test_a_session_driven_call_by_call_equals_the_batch_run(w, how):
    from netcore.session import Session
    from session_helpers import drive

    name, pol, src, dst, size, start, deps = w
    engine, transport = how
    t = FABRICS[name]
    batch = simulate(t, sched(src, dst, size, start, deps), Routing(t, pol), engine=engine,
                     transport=transport)
    ses = Session(t, engine=engine, routing=Routing(t, pol), transport=transport)
    n = len(src)
    ids = drive(ses, src, dst, size, start, deps)
    got = ses.result().end[[ids[i] for i in range(n)]]
    # a start time reached as now() + (start - now()) may differ from start in the last bit
    np.testing.assert_allclose(got, batch.end, rtol=1e-12, atol=1e-18)


# ------------------------------------------------------------------ invariants of one run
@settings(max_examples=120, **FAST)
@given(workloads(max_n=8), st.sampled_from([("flow", "fluid"), ("flow", "tcp"),
                                            ("packet", "ideal"), ("packet", "tcp"),
                                            ("packet", "dcqcn")]),
       st.one_of(st.none(), st.tuples(st.integers(0, 10**6), st.integers(0, 60))))
def test_run_invariants_and_determinism(w, how, degrade):
    name, pol, src, dst, size, start, deps = w
    engine, transport = how
    if engine == "packet" and pol == "spray":
        pol = "ecmp"
    # not asserted: the packet engine's plane split on fullflat breaks dependencies between
    # split transfers (see test_a_dependency_equals_a_start_time_at_the_parents_end)
    assume(not (engine == "packet" and name == "fullflat" and any(deps)))
    t = FABRICS[name]
    recs = [] if degrade is None else [link_rec(t, degrade[0] % t.n_links, "degrade",
                                                float(degrade[1]), 0.5)]
    f = LinkFaults.from_records(t, recs)
    s = sched(src, dst, size, start, deps)
    r = simulate(t, s, Routing(t, pol), f, engine=engine, transport=transport)
    same_result(r, simulate(t, s, Routing(t, pol), f, engine=engine, transport=transport))
    assert r.finished.all() and not r.stranded.any()
    # the packet engine's clock is in integer picoseconds
    tick = 1e-12 if engine == "packet" else 0.0
    n = len(src)
    for i in range(n):
        ready = max([start[i]] + [r.end[j] for j in deps[i]])
        assert r.start[i] >= ready - tick - 1e-15 * ready
    # every transfer needs at least its bytes over its path's bottleneck, plus the latency
    p = Routing(t, pol).paths(src, dst, flow_id=np.arange(n))
    for i in range(n):
        links, wgt = p.link[p.ptr[i]:p.ptr[i + 1]], p.weight[p.ptr[i]:p.ptr[i + 1]]
        lower = size[i] / np.min(t.dlink_bw[links] / wgt)
        if pol != "spray" and not (engine == "packet" and size[i] == 0):
            lower += p.latency[i]  # (the packet engine ends a size-0 transfer at once)
        assert r.end[i] - r.start[i] >= lower * (1 - 1e-9) - 2 * tick
    # a link never carries more than its bandwidth over the time it was busy (packet: every
    # packet's serialisation is rounded to the picosecond, half a picosecond at most, and a
    # packet has at least 54 bytes of headers), and is never busy past the end
    slack = 0.5e-12 * t.dlink_bw * (r.link_bytes / 54 + 1) if engine == "packet" else 0.0
    assert (r.link_bytes <= t.dlink_bw * r.link_busy * (1 + 1e-9) + slack + 1e-6).all()
    assert (r.link_busy <= r.makespan * (1 + 1e-12) + tick).all()
    # bytes: the fluid model moves exactly the payload over every link of every path; the
    # packet engine at least that (headers, retransmissions)
    payload = sum(size[i] * p.weight[p.ptr[i]:p.ptr[i + 1]].sum() for i in range(n))
    if engine == "flow" and transport == "fluid":
        assert r.link_bytes.sum() == pytest.approx(payload, rel=1e-9, abs=1e-6)
    else:
        assert r.link_bytes.sum() >= payload * (1 - 1e-9)


@settings(max_examples=75, **FAST)
@given(st.lists(st.sampled_from([25, 100, 400]), min_size=1, max_size=4),
       st.lists(st.sampled_from([0.0, 0.5, 2.0]), min_size=4, max_size=4),
       st.integers(100_000, 20_000_000), st.sampled_from([1500, 4096, 9000]))
def test_single_transfer_on_an_idle_path_packet_against_fluid(bws, lats, nbytes, mtu):
    """Alone on a chain of links: the fluid end S / B + latency is a lower bound of the
    packet engine's (ideal transport), which adds headers and store-and-forward only:
    at most wire bytes / B + latency + one packet per hop at the slowest rate."""
    h = len(bws)
    nodes = [0] + [2 + i for i in range(h - 1)] + [1]
    t = Topology("custom", 2, h - 1, nodes[:-1], nodes[1:], [gbps(b) for b in bws],
                 [us(x) for x in lats[:h]], [0] * h)
    s = Schedule.from_transfers([0], [1], [nbytes])
    fl = simulate(t, s, "shortest", engine="flow").end[0]
    pk = simulate(t, s, "shortest", engine="packet", transport="ideal", mtu=mtu).end[0]
    B, lat = gbps(min(bws)), us(sum(lats[:h]))
    assert fl == pytest.approx(nbytes / B + lat, rel=1e-12)
    packets = -(-nbytes // (mtu - 52))
    wire = nbytes + 54 * packets
    assert fl <= pk + 1e-12
    assert pk <= wire / B + lat + h * (mtu + 2) / B + 1e-9


# ------------------------------------------------------------------ collectives
CASES = [(op, algo) for op, algos in co.ALGORITHMS.items() for algo in algos]
NAMED = ("nbytes", "chunks", "protocol", "group_size", "dims", "ranks")


def _sent_received(s, n):
    """Bytes each of ranks 0..n-1 sends and receives (switches, ids above, left out)."""
    t = s.kind == TRANSFER
    m = max(n, int(s.src[t].max(initial=0)) + 1, int(s.dst[t].max(initial=0)) + 1)
    return (np.bincount(s.src[t], weights=s.size[t], minlength=m)[:n],
            np.bincount(s.dst[t], weights=s.size[t], minlength=m)[:n])


@settings(max_examples=750, **FAST)
@given(st.sampled_from(CASES), st.integers(2, 9), st.data(),
       st.sampled_from([None, "ll", "ll128", "simple"]), st.sampled_from([None, 1, 2, 3]))
def test_collective_builders_on_tiny_and_odd_sizes(case, n, data, protocol, chunks):
    op, algo = case
    opts = options_for(op, algo, n)
    assume(opts is not None)
    if op == "all_to_all_v":
        nbytes = np.array(data.draw(st.lists(st.integers(0, 5), min_size=n * n,
                                             max_size=n * n))).reshape(n, n)
        S = None
    else:
        S = data.draw(st.sampled_from(sorted({1, 2, n - 1, n, n + 1, 2 * n - 1, 97, 1009})))
        assume(S >= 1)
        nbytes = S
    kw = dict(opts)
    if protocol:
        kw["protocol"] = protocol
    if chunks:
        kw["chunks"] = chunks
    try:
        s = co.build(op, algo, list(range(n)), nbytes, **kw)
    except InputError as e:  # a refusal names what it refuses
        assert str(e).startswith(NAMED), str(e)
        return
    check(s)
    again = co.build(op, algo, list(range(n)), nbytes, **kw)
    for f in ("kind", "src", "dst", "size", "duration", "start", "dep_ptr", "dep_idx"):
        np.testing.assert_array_equal(getattr(again, f), getattr(s, f), err_msg=f)
    assert (np.repeat(np.arange(s.n), np.diff(s.dep_ptr)) > s.dep_idx).all()
    sent, recv = _sent_received(s, n)
    innet = algo in co.IN_NETWORK or algo == "nvls_tree"
    if op == "all_reduce" and not innet:
        # every rank's contribution must leave it and the result must reach it, whole
        assert (sent >= S).all() and (recv >= S).all()
    if op in ("all_reduce", "reduce_scatter", "all_gather") and algo == "ring" and \
            protocol is None:
        # a ring moves each block once per step it travels: (n-1) or 2(n-1) times S in all
        assert s.total_bytes == (2 if op == "all_reduce" else 1) * (n - 1) * S
    if op == "all_to_all" and algo == "direct" and protocol is None:
        blocks = np.asarray(s.meta["block_bytes"]).reshape(n, n, -1).sum(axis=2)
        assert s.total_bytes == blocks.sum() - np.trace(blocks)
    if op == "all_to_all_v" and algo in ("direct", "pairwise") and protocol is None:
        assert s.total_bytes == nbytes.sum() - np.trace(nbytes)


def _star(n, link_gbps, lat_us):
    return Topology("custom", n, 1, np.arange(n), np.full(n, n), np.full(n, gbps(link_gbps)),
                    np.full(n, us(lat_us)), np.zeros(n))


ESTIMATE_EXACT = [("all_reduce", "ring"), ("all_reduce", "bidirectional_ring"),
                  ("all_reduce", "recursive_halving_doubling"), ("all_reduce", "direct"),
                  ("all_reduce", "hierarchical"), ("all_reduce", "torus"),
                  ("all_gather", "ring"), ("all_gather", "direct"),
                  ("reduce_scatter", "ring"), ("reduce_scatter", "direct"),
                  ("all_to_all", "direct"), ("all_to_all", "pairwise"),
                  ("broadcast", "ring"), ("reduce", "ring"), ("send_recv", "direct")]


@settings(max_examples=180, **FAST)
@given(st.sampled_from(ESTIMATE_EXACT), st.integers(2, 9),
       st.sampled_from([12_345, 1_000_003, 1 << 20, 1 << 26]),
       st.sampled_from([25, 100, 400]), st.sampled_from([0.0, 0.5, 2.0]),
       st.sampled_from([None, "simple", "ll128", "ll"]))
def test_estimate_equals_the_flow_engine_on_a_non_blocking_star(case, n, S, bw, lat, protocol):
    """docs/collectives.md: on one switch the alpha-beta estimate equals the engine (one
    chunk; the chains with the chunks given). send_recv with LL found the estimate dividing
    LL's cap by n - 1 (fixed in a10d22b)."""
    from collectives.analytical import estimate

    op, algo = case
    opts = options_for(op, algo, n)
    assume(opts is not None)
    if op in ("broadcast", "reduce"):
        opts["chunks"] = 4
    if protocol:
        opts["protocol"] = protocol
    t = _star(n, bw, lat)
    try:
        s = co.build(op, algo, n, S, **opts)
    except InputError:
        return
    flow = simulate(t, s, routing="shortest", engine="flow").makespan
    est = estimate(t, op, algo, n, S, **opts)
    # the estimate prices S / n per piece, the schedule whole bytes (blocks a byte apart):
    # allow a few wire bytes per step at the link rate beside the relative 1e-4
    assert est == pytest.approx(flow, rel=1e-4, abs=8 * n * 2 / gbps(bw))


# ------------------------------------------------------------------ serving
@settings(max_examples=180, **FAST)
@given(st.sampled_from([("llama3-8b", 1), ("llama3-8b", 4), ("llama3-70b", 8),
                        ("mixtral-8x7b", 2), ("mixtral-8x7b", 8)]),
       st.sampled_from([800.0, 3350.0, 8000.0]), st.sampled_from(["bf16", "fp8"]),
       st.lists(st.integers(1, 8000), max_size=24),
       st.lists(st.tuples(st.integers(0, 4000), st.integers(1, 4000)), max_size=3),
       st.integers(1, 8000))
def test_serving_iteration_is_monotone_in_hardware_and_work(mt, hbm, precision, dec, pf, extra):
    from compute.inference import ServingLayout, batch_compute, cost_model

    model, tp = mt
    assume(dec or pf)

    def cm(hbm_GBps, peak=None):
        gpu = {"base": "h100_sxm", "hbm_GBps": hbm_GBps}
        if peak:
            gpu.update(peak_tflops_bf16=peak, peak_tflops_fp8=2 * peak)
        return cost_model(model, gpu, ServingLayout(tp=tp), precision)

    base = batch_compute(cm(hbm), pf, dec)
    assert batch_compute(cm(2 * hbm), pf, dec) <= base * (1 + 1e-12)  # faster HBM
    assert batch_compute(cm(hbm, peak=2500.0), pf, dec) <= base * (1 + 1e-12)  # more FLOP/s
    assert batch_compute(cm(hbm), pf, dec + [extra]) >= base * (1 - 1e-12)  # one more request
    if dec:
        longer = [dec[0] + extra] + dec[1:]
        assert batch_compute(cm(hbm), pf, longer) >= base * (1 - 1e-12)  # a longer context


@pytest.mark.parametrize("model", ["llama3-8b", "llama3-70b", "gpt3-175b"])
def test_tensor_parallel_split_keeps_a_dense_models_gemm_work_and_kv_cache(model):
    from compute.inference import ServingLayout, cost_model
    from compute.model import get_model

    g = get_model(model).g
    work, kv = set(), set()
    for tp in (1, 2, 4, 8):
        if tp > g:
            continue
        cm = cost_model(model, "h100_sxm", ServingLayout(tp=tp))
        work.add(float((cm.gemm_n * cm.gemm_k * cm.gemm_c).sum()) * tp)
        kv.add(cm.kv_bytes_per_token * tp)
    assert len(work) == 1 and len(kv) == 1


_SERVE_FAB = build("two_tier", {"nodes": 1, "gpus_per_node": 4})


def _serve(rows, dp, path, offset=0.0, mbt=2048):
    from netcosim.workloads import build_workload

    with open(path, "w") as f:
        f.write("arrival_s,input_tokens,output_tokens\n")
        for a, i, o in rows:
            f.write(f"{a + offset!r},{i},{o}\n")
    spec = {"kind": "inference", "model": "llama3-8b", "gpu": "h100_sxm",
            "parallel": {"tp": 2, "pp": 1, "ep": 1, "dp": dp}, "max_batch_tokens": mbt,
            "max_seqs": 16, "requests": {"arrival": "trace", "trace": str(path)}}
    return build_workload(_SERVE_FAB, spec, engine="flow").meta["inference"]


@settings(max_examples=12, **FAST)
@given(st.lists(st.tuples(st.integers(0, 4096), st.integers(1, 1500), st.integers(1, 40)),
                min_size=2, max_size=12),
       st.sampled_from([512, 2048]), st.integers(1, 10**6))
def test_serving_replicas_split_the_trace_and_its_clock_origin_is_free(tmp_path_factory, rows,
                                                                       mbt, offset):
    """Request i goes to replica i mod dp (docs/inference.md): two replicas on a symmetric
    node serve what two one-replica runs on the even and odd requests serve; adding a whole
    number of seconds to every arrival changes no figure."""
    d = tmp_path_factory.mktemp("trace")
    rows = sorted(((a / 1024.0, i, o) for a, i, o in rows), key=lambda r: r[0])
    both = _serve(rows, 2, d / "all.csv", mbt=mbt)
    even = _serve(rows[0::2], 1, d / "even.csv", mbt=mbt)
    odd = _serve(rows[1::2], 1, d / "odd.csv", mbt=mbt)
    ne, no = len(rows[0::2]), len(rows[1::2])
    for key in ("ttft_mean_s", "e2e_mean_s"):
        assert both[key] == pytest.approx((ne * even[key] + no * odd[key]) / (ne + no),
                                          rel=1e-9)
    assert both["output_tokens"] == even["output_tokens"] + odd["output_tokens"]
    assert both["iterations"] == even["iterations"] + odd["iterations"]
    shifted = _serve(rows, 2, d / "shifted.csv", offset=float(offset), mbt=mbt)
    for key, v in both.items():
        if key != "comm_curves":
            assert shifted[key] == v, key


# ------------------------------------------------------------------ the scalable form
_STREAM_FABRICS = {
    "fat_tree": build("fat_tree", {"k": 4}),
    "two_tier_2x4": build("two_tier", {"nodes": 2, "gpus_per_node": 4}),
    "two_tier_4x2": build("two_tier", {"nodes": 4, "gpus_per_node": 2}),
    "torus_4x4": build("torus", {"dims": [4, 4]}),
    "leaf_spine": build("leaf_spine", {"leaves": 4, "hosts_per_leaf": 2, "spines": 2}),
}


@settings(max_examples=60, **FAST)
@given(st.sampled_from(sorted(_STREAM_FABRICS)),
       st.sampled_from([("all_reduce", "ring"), ("reduce_scatter", "ring"),
                        ("all_gather", "ring"), ("all_reduce", "composed")]),
       st.sampled_from([1 << 16, 1 << 20]), st.sampled_from(["simple", "ll128", "ll"]),
       st.integers(0, 10**6), st.sampled_from(["degrade_from_start", "down_after",
                                                "degrade_after"]),
       st.sampled_from([0.1, 0.25, 0.5]))
def test_stream_form_equals_full_form_with_a_fault_from_the_start_or_after(
        name, case, per_rank, protocol, l, when, factor):
    """docs/scale.md, "Faults": a fault present from the start, or after the collective,
    gives the same makespan in both forms (sizes that split evenly). Checked here for
    degrades from the start and for any fault after the collective. Not asserted: a link
    *down* from the start whose detour lands on links other ring connections use (4x4 torus,
    ring reduce-scatter of 64 KiB, link (12, 13) down: auto 54.8 us, full 50.2 us)."""
    from netcosim.workloads import build_workload

    t = _STREAM_FABRICS[name]
    op, algo = case
    if algo == "composed":
        algo = ("hierarchical" if name.startswith("two_tier") else
                "torus" if name.startswith("torus") else "ring")
    l %= t.n_links
    spec = {"kind": "collective", "op": op, "algorithm": algo, "bytes": t.n_hosts * per_rank,
            "protocol": protocol}
    clean = build_workload(t, dict(spec, network_detail="full"), engine="flow")
    after_us = simulate(t, clean, Routing(t, "ecmp"), engine="flow").makespan * 1e6 * 1.01 + 1
    rec = {"degrade_from_start": link_rec(t, l, "degrade", 0.0, factor),
           "down_after": link_rec(t, l, "down", after_us),
           "degrade_after": link_rec(t, l, "degrade", after_us, factor)}[when]
    f = LinkFaults.from_records(t, [rec])
    got = {}
    for detail in ("auto", "full"):
        s = build_workload(t, dict(spec, network_detail=detail), engine="flow", faults=f)
        assert s.meta["network_detail_used"] == detail
        got[detail] = simulate(t, s, Routing(t, "ecmp"), f, engine="flow").makespan
    assert got["auto"] == pytest.approx(got["full"], rel=1e-9)


# ------------------------------------------------------------------ training step
_STEP_FABRICS = [build("two_tier", {"nodes": 2, "gpus_per_node": 4, "nic_gbps": 100,
                                    "scaleup_gbps": 1200}),
                 build("fat_tree", {"k": 4}),
                 build("two_tier", {"nodes": 4, "gpus_per_node": 2, "nic_gbps": 100,
                                    "scaleup_gbps": 1200})]
_SMALL = dict(layers=8, hidden=256, heads=8, seq=128, vocab=512)


@settings(max_examples=45, **FAST)
@given(st.integers(0, 2), st.sampled_from([1, 2, 4]), st.sampled_from([1, 2]),
       st.sampled_from([1, 2, 4]), st.sampled_from([None, 0.1, 0.5]),
       st.sampled_from([500.0, 2000.0]), st.sampled_from([50.0, 300.0]),
       st.sampled_from(["full", "auto"]))
def test_training_step_never_slower_on_faster_hardware(fab, tp, pp, mb, bucket, hbm, peak,
                                                       detail):
    """Twice the HBM bandwidth, twice the FLOP/s or twice every link's bandwidth never makes
    a training step (flow engine) longer."""
    from compute.training import build_step

    topo = _STEP_FABRICS[fab]
    dp = topo.n_hosts // (tp * pp)
    par = dict(tp=tp, pp=pp, global_batch=dp * mb)
    if bucket:
        par["bucket_mb"] = bucket

    def step(h, p, bw=1.0):
        gpu = {"base": "a100_80gb", "hbm_GBps": h, "peak_tflops_bf16": p,
               "peak_tflops_fp16": p}
        t = scaled(topo, bw=bw)
        return simulate(t, build_step(_SMALL, par, gpu, t, network_detail=detail), "ecmp",
                        engine="flow").makespan

    base = step(hbm, peak)
    assert step(2 * hbm, peak) <= base * (1 + 1e-9)
    assert step(hbm, 2 * peak) <= base * (1 + 1e-9)
    assert step(hbm, peak, 2.0) <= base * (1 + 1e-9)
