"""Session API (netcore/session.py) over both engines' incremental drivers.

* a ring all-reduce driven step by step (each send issued from its last parent's on_done)
  gives exactly the batch ``simulate`` result, on the flow engine (fluid and tcp) and the packet
  engine;
* schedule / now semantics and the (time, insertion order) rule;
* callbacks issuing sends at the same time stamp behave as the same DAG in batch mode;
* run_until stops at the right time and can resume;
* the worked example (examples/session_pipeline.py) runs and matches the 1F1B DAG computed
  independently when the network adds a known constant delay.
"""
import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

import collectives
from netcore import Schedule, ScheduleBuilder, simulate
from netcore.flow.incremental import FlowIncremental
from netcore.session import Session
from topo.builders import fat_tree
from topo.errors import InputError

from session_helpers import ENGINES, _skip_unavailable

FT4 = fat_tree(4, link_gbps=100, latency_us=1.0)
ROOT = Path(__file__).resolve().parents[1]



def drive(sess: Session, sched: Schedule):
    """Run ``sched`` through ``sess``: every node is issued when its last parent is done
    (transfers as sends, compute/delay nodes as schedule delays). Returns per-node (start,
    end) in the schedule's numbering."""
    cptr, cidx = sched.children()
    left = np.diff(sched.dep_ptr).copy()
    start = np.full(sched.n, np.nan)
    end = np.full(sched.n, np.nan)
    node_of = {}

    def finish(i):
        end[i] = sess.now()
        for c in cidx[cptr[i]:cptr[i + 1]]:
            left[c] -= 1
            if left[c] == 0:
                issue(int(c))

    def issue(i):
        delay = max(0.0, float(sched.start[i]) - sess.now())
        if delay > 0:
            sess.schedule(delay, lambda: issue_now(i))
        else:
            issue_now(i)

    def issue_now(i):
        start[i] = sess.now()
        if sched.kind[i] == 0:
            tid = sess.send(int(sched.src[i]), int(sched.dst[i]), int(sched.size[i]),
                            on_done=lambda tid: finish(node_of[tid]), flow_key=i)
            node_of[tid] = i
        else:
            sess.schedule(float(sched.duration[i]), lambda: finish(i))

    for i in np.flatnonzero(left == 0):
        issue(int(i))
    sess.run()
    return start, end


@pytest.mark.parametrize("routing", ["dmodk", "ecmp"])
@pytest.mark.parametrize("engine, opts", ENGINES)
def test_ring_all_reduce_step_by_step_equals_batch(engine, opts, routing):
    _skip_unavailable(engine)
    sched = collectives.ring_all_reduce(list(range(16)), 4 << 20)
    batch = simulate(FT4, sched, routing, engine=engine, **opts)
    sess = Session(FT4, engine=engine, routing=routing, **opts)
    start, end = drive(sess, sched)
    assert np.array_equal(end, batch.end)  # bit for bit
    assert np.array_equal(start, batch.start)
    # run() leaves the clock at the engine's last event: the last completion on the flow
    # engine, TCP's last ACKs on the packet engine
    if engine == "flow":
        assert sess.now() == batch.makespan
    else:
        assert sess.now() >= batch.makespan
    res = sess.result()
    assert res.makespan == batch.makespan
    assert np.array_equal(np.sort(res.end), np.sort(batch.end))


@pytest.mark.parametrize("engine, opts", ENGINES)
def test_dag_with_compute_and_same_instant_sends_equals_batch(engine, opts):
    """Compute nodes become schedule delays; several sends issued at one instant from
    callbacks (two parents ending together release three transfers) join the same batch."""
    _skip_unavailable(engine)
    b = ScheduleBuilder()
    a = b.add_transfers([0, 4], [8, 12], [2_000_000, 2_000_000])
    c = b.add_compute([8], [5e-6], parents=[[int(a[0]), int(a[1])]])
    d = b.add_transfers([8, 8, 12], [0, 3, 1], [500_000, 1_500_000, 700_000],
                        parents=[[int(c[0])]] * 3)
    b.add_transfers([1], [2], [300_000], parents=[[int(d[1])]], start=[4e-4])
    b.add_transfers([5], [6], [100_000], start=[3e-5])
    sched = b.build()
    batch = simulate(FT4, sched, "dmodk", engine=engine, **opts)
    start, end = drive(Session(FT4, engine=engine, routing="dmodk", **opts), sched)
    if engine == "packet":  # times are picoseconds there: compare at that resolution
        np.testing.assert_allclose(end, batch.end, rtol=0, atol=1e-12)
    else:
        assert np.array_equal(end, batch.end)
        assert np.array_equal(start, batch.start)


def test_schedule_now_and_insertion_order():
    s = Session(FT4)
    log = []
    s.schedule(2e-6, lambda: log.append(("b", s.now())))
    s.schedule(1e-6, lambda: log.append(("a", s.now())))
    s.schedule(2e-6, lambda: log.append(("c", s.now())))

    def nested():
        log.append(("d", s.now()))
        s.schedule(0.0, lambda: log.append(("e", s.now())))  # same instant, runs after d
        s.schedule(1e-6, lambda: log.append(("f", s.now())))

    s.schedule(2e-6, nested)
    assert s.now() == 0.0
    s.run()
    assert log == [("a", 1e-6), ("b", 2e-6), ("c", 2e-6), ("d", 2e-6), ("e", 2e-6),
                   ("f", 2e-6 + 1e-6)]
    assert s.now() == 3e-6 and s.pending() == 0


def test_on_done_and_scheduled_callbacks_at_one_instant_run_in_insertion_order():
    """A transfer's on_done and a schedule callback due at the same time: the one registered
    first runs first."""
    s = Session(FT4, routing="dmodk")
    order = []
    tid = s.send(0, 1, 1_000_000, on_done=lambda t: order.append("done"))
    s.run()
    t_end = s.result().end[tid]
    s2 = Session(FT4, routing="dmodk")
    s2.schedule(t_end, lambda: order.append("early-registered timer"))
    s2.send(0, 1, 1_000_000, on_done=lambda t: order.append("done2"))
    s2.schedule(t_end, lambda: order.append("late-registered timer"))
    s2.run()
    assert order == ["done", "early-registered timer", "done2", "late-registered timer"]


@pytest.mark.parametrize("engine, opts", ENGINES)
def test_run_until_stops_and_resumes(engine, opts):
    _skip_unavailable(engine)
    pairs = [(0, 4), (5, 9), (10, 14), (15, 3)]
    full = Session(FT4, engine=engine, routing="dmodk", **opts)
    for k, (a, b) in enumerate(pairs):
        full.send(a, b, 1_000_000 * (k + 1))
    full.run()
    ends = full.result().end

    s = Session(FT4, engine=engine, routing="dmodk", **opts)
    seen = []
    for k, (a, b) in enumerate(pairs):
        s.send(a, b, 1_000_000 * (k + 1), on_done=lambda t: seen.append((t, s.now())))
    e = np.sort(ends)
    assert e[1] < e[2]
    t_mid = float(e[1] + e[2]) / 2  # between the 2nd and the 3rd completion
    assert s.run_until(t_mid) == t_mid == s.now()
    assert len(seen) == 2 and all(now <= t_mid for _, now in seen)
    assert s.pending() == 2
    s.run_until(t_mid)  # no time passes: nothing happens
    assert len(seen) == 2
    s.run()
    assert len(seen) == 4
    assert np.array_equal(s.result().end, ends)  # stopping and resuming changed nothing
    with pytest.raises(InputError, match="run_until"):
        s.run_until(t_mid)


def test_send_after_run_until_starts_then():
    s = Session(FT4, routing="dmodk")
    s.run_until(1e-5)
    tid = s.send(0, 15, 1_000_000)
    s.run()
    r = s.result()
    assert r.start[tid] == 1e-5
    one = simulate(FT4, Schedule.from_transfers([0], [15], [1_000_000]), "dmodk")
    assert r.end[tid] == pytest.approx(1e-5 + one.end[0], rel=1e-12)


def test_run_until_lands_on_an_event_instant():
    """run_until(t) with a completion exactly at t runs that on_done before returning."""
    one = simulate(FT4, Schedule.from_transfers([0], [15], [1_000_000]), "dmodk")
    s = Session(FT4, routing="dmodk")
    got = []
    s.send(0, 15, 1_000_000, on_done=got.append)
    s.run_until(float(one.end[0]))
    assert got == [0]


def test_bad_input():
    with pytest.raises(InputError, match="engine"):
        Session(FT4, engine="magic")
    s = Session(FT4)
    with pytest.raises(InputError, match="src"):
        s.send(99, 1, 10)
    with pytest.raises(InputError, match="differ"):
        s.send(1, 1, 10)
    with pytest.raises(InputError, match="nbytes"):
        s.send(0, 1, 1.5)
    with pytest.raises(InputError, match="delay"):
        s.schedule(-1.0, lambda: None)
    with pytest.raises(InputError, match="callback"):
        s.schedule(1.0, "not callable")
    with pytest.raises(InputError, match="engine.mtu"):
        Session(FT4, mtu=-3)


def test_flow_incremental_contract():
    inc = FlowIncremental(FT4, "dmodk")
    ids = inc.add_transfers([0, 1], [15, 14], [1_000_000, 2_000_000], start_s=0.0)
    assert ids.tolist() == [0, 1] and inc.pending() == 2
    t1, d1 = inc.advance()
    assert d1.tolist() == [0] and inc.now() == t1
    t, d = inc.advance(t1 + 1e-6)  # nothing completes: the clock moves to the limit
    assert t == t1 + 1e-6 and len(d) == 0
    with pytest.raises(InputError, match="start_s"):
        inc.add_transfers([2], [3], [10], start_s=0.0)
    with pytest.raises(InputError, match="t_limit"):
        inc.advance(0.0)
    t2, d2 = inc.advance()
    assert d2.tolist() == [1] and t2 > t1 and inc.pending() == 0
    t3, d3 = inc.advance()  # nothing left: the clock stays
    assert t3 == t2 and len(d3) == 0
    r = inc.result()
    assert r.end.tolist() == [t1, t2]


# ------------------------------------------------------------------ the worked example
def _load_example():
    spec = importlib.util.spec_from_file_location("session_pipeline",
                                                  ROOT / "examples" / "session_pipeline.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _one_f_one_b_dag_time(mod, stages, micro, fwd, bwd, comm):
    """Independent: the 1F1B DAG's finish time when every stage-to-stage hand-over takes a
    constant ``comm`` seconds (earliest start = after the stage's previous op and the input)."""
    orders = [mod.one_f_one_b(s, stages, micro) for s in range(stages)]
    end = {}
    changed = True
    while changed:  # relax until every op has a time (the DAG is acyclic)
        changed = False
        for s in range(stages):
            t_free = 0.0
            for kind, m in orders[s]:
                if kind == "F":
                    dep = (s - 1, "F", m) if s > 0 else None
                else:
                    dep = (s + 1, "B", m) if s < stages - 1 else None
                if dep is not None and dep not in end:
                    break
                t0 = max(t_free, end[dep] + comm if dep else 0.0)
                t1 = t0 + (fwd if kind == "F" else bwd)
                if end.get((s, kind, m)) != t1:
                    end[(s, kind, m)] = t1
                    changed = True
                t_free = t1
    return max(end.values())


def test_pipeline_example_matches_the_1f1b_dag():
    mod = _load_example()
    out = mod.pipeline_step("flow", act_bytes=0)  # zero-byte hand-overs: latency only
    comm = simulate(FT4, Schedule.from_transfers([0], [4], [0]), "dmodk").end[0]  # 6 us
    expect = _one_f_one_b_dag_time(mod, 4, 8, 2e-3, 4e-3, comm)
    assert out["step_time_s"] == pytest.approx(expect, rel=1e-12)
    assert out["transfers"] == 2 * 3 * 8
    # with real activations the network stretches the step beyond compute alone
    big = mod.pipeline_step("flow")
    assert big["step_time_s"] > expect > big["compute_only_s"]
    assert math.isclose(big["compute_only_s"], (8 + 4 - 1) * 6e-3)


def test_pipeline_example_main_prints(capsys):
    mod = _load_example()
    mod.main(["--engine", "flow", "--transport", "tcp"])
    assert "pipeline step (flow, tcp)" in capsys.readouterr().out


@pytest.mark.parametrize("opts", [{}, {"transport": "tcp"}, {"reroute_delay_us": 3.0}])
def test_faults_in_a_session_equal_batch(opts):
    """A core link fails mid-run and comes back: flows are stopped, re-routed, later sends are
    routed around the dead link and routed again after the `up`, as in a batch run."""
    from topo.faults import LinkFaults

    sched = collectives.ring_all_reduce(list(range(16)), 8 << 20)
    plain = simulate(FT4, sched, "ecmp", **opts)
    # a switch-to-switch hop of step 0's cross-pod transfer 3 -> 4, taken down mid-step
    ptr, link = plain.node_extra["path_ptr"], plain.node_extra["path_link"]
    hop = int(link[ptr[3] + 2])
    u, v = int(FT4.dlink_src[hop]), int(FT4.dlink_dst[hop])
    t_down = float(plain.start[3] + plain.end[3]) / 2 * 1e6
    faults = LinkFaults.from_records(FT4, [
        {"link": [17, 25], "kind": "degrade", "factor": 0.5, "at_us": 10.0},
        {"link": [u, v], "kind": "down", "at_us": t_down},
        {"link": [u, v], "kind": "up", "at_us": 3 * t_down}])
    batch = simulate(FT4, sched, "ecmp", faults=faults, **opts)
    assert batch.node_extra["reroutes"].sum() > 0  # the fault really hit flows
    start, end = drive(Session(FT4, routing="ecmp", faults=faults, **opts), sched)
    assert np.array_equal(end, batch.end)
    assert np.array_equal(start, batch.start)


@pytest.mark.parametrize("engine", ["flow", "packet"])
def test_start_times_after_dependencies_are_met_exactly_with_schedule_at(engine):
    """A transfer that waits for a parent and for its own start time, driven through a session
    as its parent's on_done: schedule(start - now(), cb) lands an ulp early or late in floating
    point (8.000000000000001e-06 + 4.2e-05 is 4.9999999999999996e-05), so the session's run
    differed from the batch run; schedule_at(start, cb) lands on the start itself, and the
    whole DAG equals the batch run bit for bit."""
    import sys
    sys.path.insert(0, str(ROOT / "tests"))
    from session_helpers import drive
    rng = np.random.default_rng(39)  # a draw where a delay from the parent's end missed
    n = 12
    src = rng.integers(0, 16, n)
    dst = (src + rng.integers(1, 16, n)) % 16
    size = rng.integers(1_000, 200_000, n)
    start = np.round(rng.random(n) * 60, 3) * 1e-6  # every node, children too
    deps = [[j for j in range(i) if rng.random() < 0.3] for i in range(n)]
    batch = simulate(FT4, Schedule.from_transfers(src, dst, size, start=start, deps=deps),
                     "ecmp", engine=engine)
    ses = Session(FT4, engine=engine, routing="ecmp")
    ids = drive(ses, src, dst, size, start, deps)
    got = ses.result()
    order = [ids[i] for i in range(n)]
    assert np.array_equal(got.start[order], batch.start)
    assert np.array_equal(got.end[order], batch.end)
    with pytest.raises(InputError, match="schedule_at t"):
        ses.schedule_at(ses.now() - 1e-9, lambda: None)
    with pytest.raises(InputError, match="schedule_at t"):
        ses.schedule_at(float("nan"), lambda: None)
    for call in (ses.schedule, ses.schedule_at):  # an int past float's range: OverflowError
        with pytest.raises(InputError, match="schedule"):
            call(10 ** 400, lambda: None)
