"""Flow-level engine: weighted max-min fair fluid flows over a dependency DAG, with link faults
in time. The event loop and the solver are compiled (``_kernels``); Python only sets up,
handles the rare fault instants (re-routing needs the routing object) and collects results.
See docs/flow_engine.md for the exact model.
"""
from __future__ import annotations

import os
import time

import numpy as np

from netcore.flow import _kernels as K
from netcore.flow import limits
from netcore.flow.memory import ENTRY_BYTES, NODE_STATE_BYTES, schedule_bytes
from netcore.flow.options import check_options
from netcore.flow.recovery import Recovery
from netcore.flow.state import FlowState
from netcore.result import Result
from netcore.schedule import TRANSFER
from topo.errors import InputError, OverBudget
from topo.faults import DOWN
from topo.arrays import union1d, unique
from topo.routing import spans

_COMPILE_S: float | None = None


def warm() -> float:
    """Compile (or load from the cache) every kernel once per process; returns the seconds
    it took the first time and 0.0 afterwards."""
    global _COMPILE_S
    if _COMPILE_S is not None:
        return 0.0
    t0 = time.perf_counter()
    from netcore.schedule import Schedule
    from topo.faults import LinkFaults

    topo, sched, faults = warm_case()
    _run(topo, sched, _WarmRouting(topo), faults, check_options({"link_series": True,
                                                                  "mtu": 500,
                                                                  "reroute_delay_us": 0.2}))
    _run(topo, Schedule.from_transfers([0, 1], [1, 0], [300_000, 0]), _WarmRouting(topo),
         LinkFaults.none(), check_options({"transport": "tcp"}))
    # many flows starting together on one link outgrow its first slot block, which reaches
    # the slot-growth kernels (flush_pending, relayout) the runs above do not
    many = 256
    _run(topo, Schedule.from_transfers(np.zeros(many, dtype=np.int64),
                                       np.ones(many, dtype=np.int64),
                                       np.full(many, 1000, dtype=np.int64)),
         _WarmRouting(topo), LinkFaults.none(), check_options({}))
    _run(topo, sched, _WarmRouting(topo), LinkFaults.none(), check_options({"contention": "tcp"}))
    _COMPILE_S = time.perf_counter() - t0
    return _COMPILE_S


def warm_case():
    """(topology, schedule, faults) of the warm-up run: two hosts on one switch, a transfer
    with a dependent, and a link that goes down and comes back; small enough to run in
    microseconds, rich enough to reach every kernel."""
    from netcore.schedule import Schedule
    from topo.faults import LinkFaults
    from topo.topology import Topology

    topo = Topology("warm", 2, 1, np.array([0, 1]), np.array([2, 2]), np.array([1e9, 1e9]),
                    np.array([1e-6, 1e-6]), np.zeros(2))
    sched = Schedule.from_transfers([0, 1, 0], [1, 0, 1], [1000, 1000, 0],
                                    deps=[[], [], [0]])
    faults = LinkFaults(np.array([2e-7, 3e-7]), np.array([0, 0]), np.array([DOWN, 2]),
                        np.array([0.0, 1.0]))
    return topo, sched, faults


class _WarmRouting:
    """Star routing for the warm-up fabric (two hosts on one switch)."""

    def __init__(self, topo):
        self.topo = topo

    def paths(self, src, dst, flow_id=None, alive=None):
        from types import SimpleNamespace

        src = np.atleast_1d(src)
        dst = np.atleast_1d(dst)
        n = len(src)
        links = np.stack([self.topo.dlink_ids(src, np.full(n, 2)),
                          self.topo.dlink_ids(np.full(n, 2), dst)], axis=1)
        ok = np.ones(n, bool) if alive is None else alive[links].all(axis=1)
        cnt = np.where(ok, 2, 0)
        return SimpleNamespace(ptr=np.concatenate([[0], np.cumsum(cnt)]),
                               link=links[ok].ravel().astype(np.int32),
                               weight=np.ones(int(cnt.sum())), reachable=ok,
                               latency=np.where(ok, 2e-6, np.inf), hops=cnt.astype(np.int32))


def run(topology, schedule, routing, faults, seed: int = 0, **options) -> Result:
    """Simulate ``schedule`` on ``topology``; see the module and docs for the model."""
    opts = check_options(options)
    _check_faults(topology, faults)
    # starts and durations past the clock's end are refused here too, not only by the scenario
    # layer: through the Python API a transfer starting at 1e17 s took no time at all
    limits.check(schedule)
    compile_s = warm()
    if not schedule.has_members:
        return _run(topology, schedule, routing, faults, opts, compile_s)
    from netcore.flow import fault_split, uneven_split
    from netcore.flow.member_routing import MemberPathMemo, MemberRouting

    rss0 = _rss_bytes()
    n0, origin = schedule.n, None
    memo = MemberPathMemo(routing)  # members are routed once, whatever asks for their paths
    # members behind a fault, and members that routing leaves slower than their set's others,
    # move on their own
    uneven = uneven_split.outlier_members(schedule, routing, memo=memo)
    uneven_nodes = _naming_uneven_sets(schedule, uneven)
    affected = fault_split.affected_members(schedule, routing, faults, memo=memo)
    if uneven is not None:
        affected = uneven if affected is None else affected | uneven
    if affected is not None:
        if opts["memory_budget"] is not None:
            _check_split(schedule, affected, opts["memory_budget"], rss0)
        schedule, origin = fault_split.split(schedule, affected)
    mr = MemberRouting(topology, routing, schedule, faults, memo)
    if opts["memory_budget"] is not None:
        _check_entries(mr, schedule, opts["memory_budget"], rss0)
    res = _run(topology, schedule, mr, faults, opts, compile_s)
    if origin is not None:
        pieces = int(np.count_nonzero(schedule.kind[n0:] == TRANSFER))  # the rest are joins
        res = fault_split.fold_back(res, origin, n0, pieces)
    if uneven_nodes is not None:
        res.node_extra["uneven_set"] = uneven_nodes
    return res


def _naming_uneven_sets(schedule, uneven) -> np.ndarray | None:
    """bool per node: a transfer whose member set routing left uneven (``uneven``: per member
    of ``schedule.sets``, uneven_split.outlier_members). A set that stands for the same send
    of several folded replicas ends with its slowest member, which callers may need to say
    (compute/training.py's symmetry)."""
    if uneven is None:
        return None
    sizes = np.asarray(schedule.sets.sizes, dtype=np.int64)
    bad = np.repeat(np.arange(sizes.size), sizes)[np.asarray(uneven, dtype=bool)]
    m = np.asarray(schedule.mset, dtype=np.int64)
    return (schedule.kind == TRANSFER) & (m >= 0) & np.isin(m, unique(bad))


def _rss_bytes() -> int:
    """Resident memory of this process (Linux /proc/self/statm), 0 where it cannot be read."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return 0


def _check_entries(mr, schedule, budget: float, rss0: int) -> None:
    """OverBudget when the path entries and node state of ``schedule`` (member sets, routed by
    ``mr``; netcore/flow/memory.py), with what splitting and routing it took since the run
    began, would exceed ``budget`` bytes."""
    tr = np.flatnonzero(schedule.kind == TRANSFER)
    entries = mr.entry_count(tr)
    # the node state counts too: on the 1.8T MoE step on 32,768 FullFlat GPUs (4.28 M nodes,
    # 38,912 entries) it is 1.9 GB of the run, the entries 3 MB
    _refuse(_grown(rss0) + entries * ENTRY_BYTES + schedule.n * NODE_STATE_BYTES, budget,
            f"the flow engine's paths and state for this schedule are {entries:,} entries "
            f"({len(tr):,} flows over {mr.n_classes:,} link classes) and {schedule.n:,} "
            f"nodes, and")


def _check_split(schedule, affected, budget: float, rss0: int) -> None:
    """OverBudget when splitting the ``affected`` members off their sets (fault_split.split)
    would exceed ``budget`` bytes: the nodes it adds (fault_split.added_nodes), each with its
    node state and a path entry, and the split's copy of the schedule, which the caller's
    schedule is held beside. Checked before the copy is made: the training guard leaves the
    split out (only routing tells which sets are uneven; netcosim/memory_guard.py)."""
    from netcore.flow.fault_split import added_nodes

    new = added_nodes(schedule, affected)
    n = schedule.n
    copy = schedule_bytes(schedule) * (n + new) // max(n, 1)
    _refuse(_grown(rss0) + (n + new) * NODE_STATE_BYTES + new * ENTRY_BYTES + copy, budget,
            f"splitting {new:,} nodes off the member sets routing leaves uneven or faults touch "
            f"(beside the schedule's {n:,}), with the flow engine's copy of the schedule and "
            f"their state, would")


def _grown(rss0: int) -> int:
    """Memory this process took since ``rss0`` (0 where it cannot be read)."""
    return max(_rss_bytes() - rss0, 0) if rss0 else 0


def _refuse(need: int, budget: float, lead: str) -> None:
    """OverBudget "<lead> need about <need> of memory, but ..." when ``need`` > ``budget``."""
    if need > budget:
        gib = lambda b: f"{b / (1 << 30):.1f} GiB"  # noqa: E731
        raise OverBudget(
            f"{lead} need about {gib(need)} of memory, but this run may use {gib(budget)} more "
            f"(engine.memory_budget); use fewer GPUs, fewer pipeline stages or micro-batches, "
            f"or a machine with more memory")


def _check_faults(topology, faults):
    """LinkFaults built by hand bypass ``from_records``' checks; an engine must not index past
    its arrays, so re-check what it relies on."""
    d = np.asarray(faults.dlink)
    bad = np.flatnonzero((d < 0) | (d >= topology.n_dlinks))
    if bad.size:
        raise InputError(f"faults[{int(bad[0])}].link: directed link {int(d[bad[0]])} does not "
                         f"exist (the fabric has {topology.n_dlinks} directed links)")
    t = np.asarray(faults.time, dtype=float)
    bad = np.flatnonzero(~np.isfinite(t) | (t < 0))
    if bad.size:
        raise InputError(f"faults[{int(bad[0])}].at_us = {t[bad[0]] * 1e6!r}: expected a time >= 0")
    faults.check_factors()


def _assign(routing, st: FlowState, flows: np.ndarray, alive) -> np.ndarray:
    """Route ``flows`` (under ``alive``; None: every link up) and give them their paths.
    Returns the unreachable ones."""
    if hasattr(routing, "node_paths"):  # member sets (netcore/flow/member_routing.py)
        single, single_paths, grouped, rows, table, key = routing.node_paths(flows, alive)
        lost = [st.assign(flows[single], single_paths)] if single.size else []
        if grouped.size:  # the flows of one set share its path
            lost.append(st.assign_shared(flows[grouped], rows, table, key))
        return np.concatenate(lost) if lost else np.zeros(0, dtype=np.int64)
    key = flows if st.flow_key is None else st.flow_key[flows]
    return st.assign(flows, routing.paths(st.src[flows], st.dst[flows], flow_id=key,
                                          alive=alive))


def _run(topology, schedule, routing, faults, opts, compile_s: float = 0.0) -> Result:
    wall0 = time.perf_counter()
    st = FlowState(topology, schedule, opts["mtu"], opts["link_series"], opts["transport"],
                   opts["init_cwnd"], opts["handshake"], opts["local_repair"])
    if (schedule.conn >= 0).any():  # connection-keyed transfers hash by connection
        st.flow_key = schedule.routing_keys(np.arange(schedule.n))
    tr = np.flatnonzero(schedule.kind == TRANSFER).astype(np.int64)
    if len(tr):
        _assign(routing, st, tr, None)
    st.fit_slots()
    if opts["contention"] != "fluid":
        from netcore.flow.contention import link_efficiency

        st.eff = link_efficiency(st, topology, opts["contention"])
        st.LF[K.CAP] = st.bw * st.eff
    setup_s = time.perf_counter() - wall0

    rec = Recovery(faults, opts)
    ftime = np.asarray(faults.time, dtype=np.float64)
    fi = 0
    loop0 = time.perf_counter()
    started = False
    while True:
        t_fault = ftime[fi] if fi < len(ftime) else np.inf
        t_next = min(t_fault, rec.next_time())
        if not started and t_next > 0.0:
            st.start_roots(0.0)
            started = True
        if started:
            while st.advance(t_next) == K.RC_GROW_SERIES:
                st.grow_series()
        if t_next == np.inf:
            break
        fi = _fault_instant(st, topology, routing, faults, fi, t_next, rec)
        if not started:
            # faults at time 0 are in place before anything starts
            st.start_roots(0.0)
            started = True
    loop_s = time.perf_counter() - loop0
    st.gave_up = rec.gave_up
    folded = getattr(routing, "rep", None)
    if folded is not None:
        opts = dict(opts, record_paths=False)  # paths over representative links mean nothing
    res = _collect(st, topology, schedule, opts, compile_s, setup_s, loop_s,
                   time.perf_counter() - wall0)
    if folded is not None:
        _unfold_links(res, routing)
    return res


def _unfold_links(res: Result, mr) -> None:
    """Give every directed link its representative's figures (member_routing's classes)."""
    rep = mr.rep
    res.link_bytes = res.link_bytes[rep]
    res.link_busy = res.link_busy[rep]
    for k in ("utilization", "throughput_frac"):
        if k in res.link_extra:
            res.link_extra[k] = res.link_extra[k][rep]
    if "series_ptr" in res.link_extra:
        ptr = res.link_extra["series_ptr"]
        cnt = np.diff(ptr)[rep]
        new_ptr = np.concatenate([[0], np.cumsum(cnt)])
        pos = np.repeat(ptr[rep] - new_ptr[:-1], cnt) + np.arange(int(new_ptr[-1]))
        res.link_extra["series_ptr"] = new_ptr
        res.link_extra["series_t"] = res.link_extra["series_t"][pos]
        res.link_extra["series_rate"] = res.link_extra["series_rate"][pos]
    res.info.update(link_classes=mr.n_classes, links_used=mr.n_used_links,
                    member_sets=int(len(mr.used_sets)))


def _fault_instant(st, topology, routing, faults, fi, t, rec: Recovery) -> int:
    """Apply every fault event and due re-route at instant t. Returns the next fault index."""
    was_alive = st.factor > 0
    touched = []
    any_up = False
    while fi < len(faults.time) and faults.time[fi] == t:
        d = int(faults.dlink[fi])
        st.factor[d] = float(faults.factor[fi])
        any_up |= faults.kind[fi] != DOWN and st.factor[d] > 0 and not was_alive[d]
        touched.append(d)
        fi += 1
    alive = st.factor > 0
    rec.at_instant(st, fi)
    if touched:
        tl = unique(np.array(touched, dtype=np.int64))
        st.LF[K.CAP, tl] = st.bw[tl] * st.factor[tl] * st.eff[tl]
        st.rebuild_potential()
        st.seed_links(tl)
        died = tl[was_alive[tl] & ~alive[tl]]
        if len(died):
            # a flow whose last byte leaves at t (its drain is due at t) has nothing left to
            # stop: the batch of instant t drains it. Stopping it re-routed 0 bytes, which
            # stranded it (end NaN) when no other path existed, or delivered it a re-route
            # delay late
            hit = st.flows_on(died)
            hit = hit[~st.draining_at(hit, t)]
            if len(hit):
                st.stop(hit, t)
                rec.schedule(t + rec.delay, hit)
        # transfers not started yet: route them around dead links now; after an `up`, give
        # the ones routed around earlier faults a fresh decision with the current links
        wait = st.waiting_hitting(~alive)
        if any_up:
            moved = np.flatnonzero(st.moved & (st.NI[:, K.STATE] == K.WAIT))
            wait = union1d(wait, moved)
            unr = np.flatnonzero((st.NI[:, K.KIND] == TRANSFER) & (st.NI[:, K.STATE] == K.WAIT) &
                                 (st.NI[:, K.PLEN] < 0))
            wait = union1d(wait, unr)
        if len(wait):
            _assign(routing, st, wait, alive)
            st.moved[wait] = True
            st.fit_slots()
    if any_up and rec.reroute_at:
        # a flow stopped by a down whose whole path is alive again (the link came back within
        # reroute_delay_us) resumes now on that path, as the packet engine's connections do:
        # it waited for the re-route although its path was back (chain, down at 244 us, up
        # at 488, delay 488: resumed at 732, against 488 in the packet engine)
        back = _stalled_on_live_paths(st, alive)
        if len(back):
            # the segment stop() set aside as abandoned is the one they continue on
            st.old_segments = [(fl[keep], of[keep], ln[keep]) for fl, of, ln in st.old_segments
                               for keep in [~(np.isin(fl, back) & (of == st.NI[fl, K.POFF]))]]
            st.resume(back, t)
            rec.cancel(back)  # their pending re-route no longer applies
    if any_up:
        rec.link_back(t)
    rec.waiting_starters(st, t, any_up)
    due = rec.pop_due(t)
    if due is not None:
        _start_waiting(st, routing, rec, due[st.NI[due, K.STATE] == K.NOPATH], alive, t)
        flows = due[st.NI[due, K.STATE] == K.STALLED]
        first, timed = rec.split_due(flows)
        timed = rec.timeouts(st, timed)  # tcp: past data_retries they give up
        flows = union1d(first, timed)
        if len(flows):
            rtt = st.NF[flows, K.RTT].copy()  # the old path's: the estimator's RTT
            st.reroutes[flows] += 1
            lost = _assign(routing, st, flows, alive)
            ok = np.setdiff1d(flows, lost)
            st.fit_slots()
            again = np.intersect1d(ok, timed)
            if len(again):  # back after a timeout: one segment, slow start again
                st.restart_slow_start(again, t)
            rec.resumed(ok)
            st.resume(ok, t)
            rec.no_path(st, lost, rtt[np.searchsorted(flows, lost)], t)
    st.isc[K.WAITOK] = rec.due_back  # (isc[WAITOK]: 1 or 0)
    st.mark_pending(t)
    return fi


def _start_waiting(st, routing, rec, flows, alive, t) -> None:
    """Transfers that became ready without a path try again at t: those with one start now
    (handshake, then data), the rest wait on (netcore/flow/recovery.py)."""
    flows = rec.starters_due(st, flows)
    if not len(flows):
        return
    lost = _assign(routing, st, flows, alive)
    ok = np.setdiff1d(flows, lost)
    st.fit_slots()
    rec.started(ok)
    st.NI[ok, K.STATE] = K.WAIT
    st.start_nodes(ok, t)
    rec.starters_no_path(st, lost, t)


def _stalled_on_live_paths(st, alive) -> np.ndarray:
    """Flows stopped by a down (waiting for their re-route) whose current path has every link
    alive."""
    NI = st.NI[: st.n]
    # (flows left without a path, waiting for one, have none to check: netcore/flow/recovery)
    f = np.flatnonzero((NI[:, K.KIND] == TRANSFER) & (NI[:, K.STATE] == K.STALLED) &
                       (NI[:, K.PLEN] > 0))
    if not len(f):
        return f
    off, ln = NI[f, K.POFF], NI[f, K.PLEN]
    owner = np.repeat(np.arange(len(f)), ln)
    edges = np.repeat(off - np.cumsum(ln) + ln, ln) + np.arange(int(ln.sum()))
    dead = ~alive[st.EI[edges, K.ELINK]]
    bad = np.zeros(len(f), dtype=bool)
    bad[owner[dead]] = True
    return f[~bad]


def _collect(st, topology, schedule, opts, compile_s, setup_s, loop_s, wall_s,
             clock: float | None = None) -> Result:
    """The Result of ``st``. ``clock`` (incremental runs): the time reached, which may be
    before the end: links still carrying flows count as busy up to it, and the bytes those
    flows have sent so far are on their links."""
    NF, NI = st.NF[: st.n], st.NI[: st.n]  # incremental runs keep spare rows past n
    state = NI[:, K.STATE]
    done = state == K.DONE
    end = np.where(done, NF[:, K.TEND], np.nan)
    start = NF[:, K.TSTART].copy()
    stranded = ~done
    direct = (state == K.STRANDED) | (state == K.NOPATH)  # (NOPATH: a session not at its end)
    LF, LI = st.LF, st.LI
    busy = LF[K.BUSY].copy()
    link_bytes = LF[K.BYTES].copy()
    makespan = float(np.nanmax(end)) if done.any() else 0.0
    # links still carrying traffic cannot exist at the end of a batch run (closed defensively
    # at the makespan); an incremental run looked at before its end closes them at its clock
    # (at the makespan they got negative busy times when they had started after it)
    t_close = makespan if clock is None else max(makespan, float(clock))
    open_ = LI[K.NACT] > 0
    busy[open_] += t_close - LF[K.BUSY_SINCE, open_]
    if clock is not None:
        # bytes reach link_bytes when a flow drains or stops; the active ones' so far
        act = np.flatnonzero((NI[:, K.KIND] == TRANSFER) & (state == K.ACTIVE) &
                             (NI[:, K.PLEN] > 0))
        if len(act):
            rem = np.where(NI[act, K.ISNEW] == 1, NF[act, K.REM], np.maximum(
                NF[act, K.REM] - NF[act, K.RATE] * (t_close - NF[act, K.TLAST]), 0.0))
            plen = NI[act, K.PLEN]
            idx = spans(NI[act, K.POFF], plen)
            np.add.at(link_bytes, st.EI[idx, K.ELINK],
                      st.ew[idx] * np.repeat(NF[act, K.SEG0] - rem, plen))
    events = int(st.isc[K.EVENTS])
    res = Result(engine="flow", start=start, end=end, stranded=stranded,
                 link_bytes=link_bytes, link_busy=busy, events=events, wall_s=loop_s)
    res.node_extra["stranded_no_path"] = direct
    res.node_extra["blocked"] = stranded & ~direct
    res.node_extra["reroutes"] = st.reroutes[: st.n]
    if opts["record_paths"]:
        ptr, link, weight = st.used_paths()
        res.node_extra["path_ptr"] = ptr
        res.node_extra["path_link"] = link
        res.node_extra["path_weight"] = weight
    # a look before the end spans up to the clock even when no link is open: a transfer whose
    # last byte has left but not yet arrived holds no link, and over the makespan of the done
    # ones its links' busy time (up to its drain) gave utilization 1.076
    running = clock is not None and bool(np.any((state != K.DONE) & ~direct))
    if open_.any() or running:
        makespan = t_close  # the span the busy times above are within
        if clock is not None:
            res.span = t_close
    span = makespan if makespan > 0 else 1.0
    res.link_extra["utilization"] = busy / span if makespan > 0 else np.zeros_like(busy)
    # a link of 1e299 Gb/s over a long run: bw * span overflows to inf, the fraction is 0
    with np.errstate(over="ignore"):
        res.link_extra["throughput_frac"] = res.link_bytes / (st.bw * span)
    if opts["link_series"]:
        n = int(st.isc[K.LS_N])
        lk, tt, rr = st.ls_l[:n], st.ls_t[:n], st.ls_r[:n]
        order = np.lexsort((tt, lk))  # stable: by link, then time (recording order)
        ptr = np.zeros(st.L + 1, dtype=np.int64)
        np.add.at(ptr, lk + 1, 1)
        np.cumsum(ptr, out=ptr)
        res.link_extra["series_ptr"] = ptr
        res.link_extra["series_t"] = tt[order].copy()
        res.link_extra["series_rate"] = rr[order].copy()
    res.info.update(compile_s=compile_s, setup_s=setup_s, loop_s=loop_s, wall_total_s=wall_s,
                    events=events, time_steps=int(st.isc[K.STEPS]),
                    recomputes=int(st.isc[K.RECOMP]), solved_flows=int(st.isc[K.CF_TOTAL]),
                    skipped_recomputes=int(st.isc[K.SKIPPED]),
                    local_repairs=int(st.isc[K.LOCAL_OK]),
                    local_repairs_given_up=int(st.isc[K.LOCAL_FAIL]),
                    local_repair_rounds=int(st.isc[K.LOCAL_ROUNDS]),
                    cap_events=int(st.isc[K.CAPEVENTS]),
                    slot_layouts=st.slot_layouts, slots=int(st.LI[K.LCAP].sum()),
                    events_per_s=events / loop_s if loop_s > 0 else 0.0,
                    stranded=int(stranded.sum()), stranded_no_path=int(direct.sum()),
                    gave_up_no_path=st.gave_up)
    return res


def max_min_rates(ptr, link, weight, cap, caps=None) -> np.ndarray:
    """Weighted max-min fair rates of flows given as CSR (``link[ptr[f]:ptr[f+1]]`` with
    ``weight``) over link capacities ``cap``, computed by the engine's own compiled solver.
    ``caps`` (optional, per flow, +inf for none): a private upper bound on each flow's rate."""
    ptr = np.ascontiguousarray(ptr, dtype=np.int64)
    link = np.ascontiguousarray(link, dtype=np.int64)
    weight = np.ascontiguousarray(weight, dtype=np.float64)
    cap = np.ascontiguousarray(cap, dtype=np.float64)
    ptr, link, weight = K.dedupe_entries(ptr, link, weight)
    n, L = len(ptr) - 1, len(cap)
    NF = np.zeros((n, K.N_NF))
    NI = np.zeros((n, K.N_NI), dtype=np.int64)
    NF[:, K.SIZE] = 1.0
    NI[:, K.POFF] = ptr[:-1]
    NI[:, K.AOFF] = ptr[:-1]
    NI[:, K.PLEN] = np.diff(ptr)
    EI = np.full((len(link), K.N_EI), -1, dtype=np.int64)
    EI[:, K.ELINK] = link
    EI[:, K.EFLOW] = np.repeat(np.arange(n), np.diff(ptr))
    LF = np.zeros((K.N_LF, L))
    LF[K.CAP] = cap
    LI = np.zeros((K.N_LI, L), dtype=np.int64)
    cnt = np.bincount(link, minlength=L).astype(np.int64)
    LI[K.LCAP] = cnt
    LI[K.LOFF] = np.concatenate([[0], np.cumsum(cnt)[:-1]])
    m = max(len(link), 1)
    SI = np.zeros((m, 2), dtype=np.int64)
    SD = np.zeros((m, K.N_SD))
    isc = np.zeros(K.N_ISC, dtype=np.int64)
    z = np.zeros(1)
    NF[:, K.CAPMAX] = np.inf
    if caps is None:
        NF[:, K.CAP0] = np.inf
        NF[:, K.CAPF] = np.inf
    else:
        # a cap of flow f is slow-start round 0 of a flow that started at 0 (any RTT > 0)
        NF[:, K.CAP0] = np.asarray(caps, dtype=np.float64)
        NF[:, K.CAPF] = NF[:, K.CAP0]
        NF[:, K.RTT] = 1.0
        isc[K.CAPS] = 1
    NI[:, K.CAPEV] = -1
    K.solve_all(NF, NI, EI, weight, SI, SD, LF, LI, np.zeros(L + 1, dtype=np.int64),
                np.zeros(2 * m, dtype=np.int64), isc, np.zeros(n), np.zeros(n, dtype=np.int64),
                np.full(n, -1, dtype=np.int64), np.zeros(n), np.zeros(n, dtype=np.int64),
                np.full(n, -1, dtype=np.int64), z, np.zeros(1, dtype=np.int64), z,
                np.zeros(n), np.zeros(n, dtype=np.int64), np.full(n, -1, dtype=np.int64),
                np.zeros(2 * n + 2), np.zeros(2 * n + 2, dtype=np.int64))
    return NF[:, K.RATE].copy()
