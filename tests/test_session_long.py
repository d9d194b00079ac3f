"""A long Session's per-step bookkeeping (docs/session.md, "Long sessions").

``pending()`` and the search for new sends whose path crosses a dead link used to scan every
transfer sent so far; both incremental drivers now keep counts and look at the new or live
transfers only. These tests check that nothing else changed:

* chains of transfers (each sent from its predecessor's on_done) with a link going down and
  back up mid-run give the batch ``simulate`` result bit for bit, on the flow engine (fluid,
  tcp) and the packet engine, with sends during the outage whose first path crossed the dead
  link;
* ``pending()`` equals the full scan the drivers used to do (added, minus finished, minus
  stranded) after every callback of a session whose traffic strands at a partition (a host's
  only link down, then back), and at every step of a transfer left without a path that
  becomes ready later;
* at the end every transfer sent either called on_done or is stranded, and pending() is 0.
"""
import numpy as np
import pytest

from netcore import Schedule, simulate
from netcore.flow import _kernels as K
from netcore.session import Session
from session_helpers import ENGINES, _skip_unavailable, drive
from topo.builders import fat_tree
from topo.faults import LinkFaults
from topo.routing import Routing


FT4 = fat_tree(4, link_gbps=100, latency_us=1.0)



def chains(n_chains: int, length: int, nbytes: int = 1 << 16):
    """``n_chains`` chains of ``length`` transfers walking the fabric's hosts (as
    benchmarks/bench_session_long.py): (src, dst, size, start, deps)."""
    h = FT4.n_hosts
    src, dst, deps = [], [], []
    for c in range(n_chains):
        for j in range(length):
            s = (c * 5 + j * 3) % h
            src.append(s)
            dst.append((s + 1 + (j * 7 + c) % (h - 1)) % h)
            deps.append([len(src) - 2] if j else [])
    n = len(src)
    return (np.array(src), np.array(dst), np.full(n, nbytes), np.zeros(n), deps)


def scan_pending(eng) -> int:
    """What the drivers' pending() computed before: a scan of every transfer added."""
    if hasattr(eng, "_st"):  # flow
        st = eng._st
        return int(st.n - eng._done - np.count_nonzero(st.NI[: st.n, K.STATE] == K.STRANDED))
    core = int(eng._sim.pending())
    if eng._striped is None or not core:
        return core
    return min(core, int(np.count_nonzero(eng._user.left)))


def both_ways(u: int, v: int) -> list[int]:
    """The two directed links between nodes u and v."""
    return [int(d) for d in np.flatnonzero(((FT4.dlink_src == u) & (FT4.dlink_dst == v)) |
                                           ((FT4.dlink_src == v) & (FT4.dlink_dst == u)))]


@pytest.mark.parametrize("engine,opts", ENGINES)
def test_chains_with_a_link_down_and_up_equal_batch(engine, opts):
    _skip_unavailable(engine)
    src, dst, size, start, deps = chains(4, 40)
    sched = Schedule.from_transfers(src, dst, size, start=start, deps=deps)
    plain = simulate(FT4, sched, "ecmp", engine="flow", **({} if engine == "packet" else opts))
    # the edge-to-aggregation hop of the first transfer leaving its edge switch, down for
    # the middle third of the fault-free run (there is another way round it)
    ptr, link = plain.node_extra["path_ptr"], plain.node_extra["path_link"]
    first = int(np.flatnonzero(np.diff(ptr) >= 4)[0])
    hop = int(link[ptr[first] + 1])
    u, v = int(FT4.dlink_src[hop]), int(FT4.dlink_dst[hop])
    t_down, t_up = plain.makespan / 3, plain.makespan * 2 / 3
    faults = LinkFaults.from_records(FT4, [
        {"link": [u, v], "kind": "down", "at_us": t_down * 1e6},
        {"link": [u, v], "kind": "up", "at_us": t_up * 1e6}])
    # transfers started during the outage whose fault-free path crossed the dead link: the
    # session routes them around it when they are sent (the check looks at new sends only)
    during = np.flatnonzero((plain.start > t_down) & (plain.start < t_up))
    crossed = [i for i in during if set(link[ptr[i]:ptr[i + 1]]) & set(both_ways(u, v))]
    assert len(crossed) >= 2

    batch = simulate(FT4, sched, "ecmp", faults=faults, engine=engine, **opts)
    assert not np.array_equal(batch.end, simulate(FT4, sched, "ecmp", engine=engine,
                                                  **opts).end)  # the fault matters
    ses = Session(FT4, engine=engine, routing="ecmp", faults=faults, **opts)
    # (drive looks at result() at its stops: the packet engine's runs the core to its end)
    ids = drive(ses, src, dst, size, start, deps,
                stops=[] if engine == "packet" else [t_down / 2, t_down, (t_down + t_up) / 2,
                                                     t_up])
    assert batch.n_stranded == 0
    order = np.array([ids[i] for i in range(len(src))])
    res = ses.result()
    assert np.array_equal(res.start[order], batch.start)
    assert np.array_equal(res.end[order], batch.end)
    assert ses.pending() == 0


def _partition_session(engine, opts, ticks: int = 60, every_us: float = 4.0):
    """Host 5's only link is down from 60 us to 150 us (transfers to or from it strand), a
    core link from 100 us on. Transfers come from 4 chains (each from its predecessor's
    on_done: a stranded one ends its chain) and from a timer every ``every_us`` (two sends
    each, one of them touching host 5). Checks pending() against the full scan after every
    callback; returns (session, sent, completed)."""
    edge = int(FT4.dlink_dst[np.flatnonzero(FT4.dlink_src == 5)[0]])
    core = next(int(d) for d in range(FT4.n_dlinks)
                if FT4.dlink_src[d] >= FT4.n_hosts and FT4.dlink_dst[d] >= FT4.n_hosts)
    faults = LinkFaults.from_records(FT4, [
        {"link": [5, edge], "kind": "down", "at_us": 60.0},
        {"link": [int(FT4.dlink_src[core]), int(FT4.dlink_dst[core])], "kind": "down",
         "at_us": 100.0},
        {"link": [5, edge], "kind": "up", "at_us": 150.0}])
    ses = Session(FT4, engine=engine, routing="ecmp", faults=faults, **opts)
    eng = ses._eng
    sent, completed = [0], [0]

    def check():
        assert eng.pending() == scan_pending(eng)
        assert ses.pending() == scan_pending(eng) + len(ses._buf) + len(ses._q)

    def send(s, d, then=None):
        sent[0] += 1
        ses.send(s, d, 1 << 16, on_done=lambda _tid: done(then))

    def done(then):
        completed[0] += 1
        check()
        if then is not None:
            then()

    def chain(c, j):
        if j < 30:
            send((c * 5 + j * 3) % 16, (c * 5 + j * 3 + 1 + (j * 7 + c) % 15) % 16,
                 lambda: chain(c, j + 1))

    def tick(i):
        check()
        send((3 * i) % 16 if (3 * i) % 16 != 5 else 6, 5)
        send(5, (7 * i + 1) % 16 if (7 * i + 1) % 16 != 5 else 9)
        check()
        if i + 1 < ticks:
            ses.schedule(every_us * 1e-6, lambda: tick(i + 1))

    for c in range(4):
        chain(c, 0)
    ses.schedule(0.0, lambda: tick(0))
    for t_us in (30.0, 61.0, 100.0, 101.0, 149.0, 151.0):
        ses.run_until(t_us * 1e-6)
        check()
    ses.run()
    check()
    return ses, sent[0], completed[0]


@pytest.mark.parametrize("engine,opts", ENGINES + [
    pytest.param("packet", {"transport": "dcqcn"}, id="packet-dcqcn")])
def test_pending_counts_live_transfers_through_a_partition(engine, opts):
    """Packet engine: rate-based (dcqcn) connections cut by the partition are stranded when
    re-routed; tcp ones retry; sends into the partition are stranded when they become ready.
    Flow engine: both wait for the link, which comes back (docs/flow_engine.md, "Faults in
    time"; until session 36 they were stranded too)."""
    _skip_unavailable(engine)
    ses, sent, completed = _partition_session(engine, opts)
    res = ses.result()
    if engine == "flow":
        assert res.n_stranded == 0 and completed == sent
    else:
        assert res.n_stranded > 0  # the partition stranded transfers
    assert completed + res.n_stranded == sent
    assert ses.pending() == 0


@pytest.mark.parametrize("engine", ["flow", "packet"])
def test_pending_of_a_transfer_without_a_path_that_starts_later(engine):
    """A transfer added while its destination is cut off, starting later: pending until it
    becomes ready (and strands), then not; the others are unaffected."""
    _skip_unavailable(engine)
    if engine == "flow":
        from netcore.flow.incremental import FlowIncremental as Inc
    else:
        from netcore.packet.incremental import PacketIncremental as Inc
    edge = int(FT4.dlink_dst[np.flatnonzero(FT4.dlink_src == 5)[0]])
    faults = LinkFaults.from_records(FT4, [{"link": [5, edge], "kind": "down", "at_us": 1.0}])
    inc = Inc(FT4, Routing(FT4, "ecmp"), faults)
    inc.add_transfers(np.array([0]), np.array([1]), np.array([1 << 16]), start_s=0.0)
    seen = [inc.pending()]
    assert seen == [1] == [scan_pending(inc)]
    t, done = inc.advance(50e-6)  # past the down (and the packet engine's re-route)
    assert list(done) == [0]
    # to the cut-off host, ready at 80 us; and one that runs
    inc.add_transfers(np.array([2, 3]), np.array([5, 4]), np.array([1 << 16, 1 << 16]),
                      start_s=np.array([80e-6, t]))
    while True:
        seen.append(inc.pending())
        assert seen[-1] == scan_pending(inc)
        t, done = inc.advance(min(t + 10e-6, 120e-6))
        if t >= 120e-6:
            break
    seen.append(inc.pending())
    assert seen[-1] == scan_pending(inc) == 0
    assert 2 in seen and 1 in seen  # both pending, then only the one not ready
    res = inc.result()
    assert res.n_stranded == 1
    assert inc.pending() == scan_pending(inc) == 0


def test_pending_after_tcp_gives_up():
    """A tcp transfer under way when its destination's only link fails for good retries, then
    gives up (stranded): pending() drops it then, as the scan does."""
    _skip_unavailable("packet")
    from netcore.packet.incremental import PacketIncremental

    edge = int(FT4.dlink_dst[np.flatnonzero(FT4.dlink_src == 5)[0]])
    faults = LinkFaults.from_records(FT4, [{"link": [5, edge], "kind": "down", "at_us": 20.0}])
    inc = PacketIncremental(FT4, Routing(FT4, "ecmp"), faults, transport="tcp",
                            data_retries=2, min_rto_s=1e-4, init_rto_s=1e-4, max_rto_s=1e-3)
    inc.add_transfers(np.array([0, 1]), np.array([5, 2]), np.array([4 << 20, 1 << 16]))
    seen = []
    t = 0.0
    while t < 0.05:
        seen.append(inc.pending())
        assert seen[-1] == scan_pending(inc)
        t, done = inc.advance(t + 2e-4)
        if t > 1e-3 and inc.pending():  # more work after the give-up is counted too
            inc.add_transfers(np.array([3]), np.array([4]), np.array([1 << 16]))
    assert inc._sim.tcp_gave_up == 1
    assert seen[0] == 2 and seen[-1] == 0
    res = inc.result()
    assert res.n_stranded == 1 and inc.pending() == 0


def test_pending_with_plane_pieces():
    """On fullflat a transfer is one connection per plane: pending() counts the caller's
    transfers with a piece still running (as the scan), at every callback."""
    _skip_unavailable("packet")
    from topo.builders import build

    t = build("fullflat", {"n_gpus": 8, "planes": 4, "switch_radix": 8, "gpu_gbps": 800})
    ses = Session(t, engine="packet", routing=Routing(t, "ecmp", seed=3), transport="tcp")
    eng = ses._eng
    counts = []

    def done(i, j):
        counts.append(eng.pending())
        assert counts[-1] == scan_pending(eng)
        if j < 20:
            send(i, j + 1)

    def send(i, j):
        ses.send(i, (i + 1 + j) % 8 if (i + 1 + j) % 8 != i else (i + 2) % 8,
                 1_000_003 if j % 3 else 2, on_done=lambda _tid: done(i, j))

    for i in range(4):
        send(i, 0)
    ses.run()
    assert eng._striped is not None and max(counts) >= 2 and counts[-1] == 0
