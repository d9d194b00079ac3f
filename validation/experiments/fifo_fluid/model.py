"""Research model (not used by netcosim): a flow-level TCP over FIFO queues, to learn whether
the flow engine could close its gap to ns-3 (issue #6) by modelling queues.

A time-stepped fluid network: every directed link is a FIFO output queue, TCP slow start is
clocked by ACKs that wait behind data on the reverse path (the kernels and the exact model are in
kernels.py). Python sets up, applies the rare fault instants (re-routing needs the routing
object) and collects a netcore Result; every step runs compiled. Options are the flow engine's
(``netcore.flow.options``) with transport = "tcp"; spray/adaptive routing and link series are
refused. Findings: docs/ns3.md, "A flow model with FIFO queues"; run the comparison with
``python -m validation.experiments.fifo_fluid``.
"""
from __future__ import annotations

import time

import numpy as np

from netcore.flow import _kernels as K
from validation.experiments.fifo_fluid import kernels as F
from netcore.flow import options as O
from netcore.result import Result
from netcore.schedule import TRANSFER
from topo.errors import InputError
from topo.faults import DOWN

_COMPILED = False
ACK_RING = 2048  # ACK records per active transfer (when full, the newest absorbs the next)


class FifoState:
    """The arrays the kernels mutate, plus what Python needs at fault instants."""

    def __init__(self, topology, schedule, opts, faults):
        n, L = schedule.n, topology.n_dlinks
        self.n, self.L = n, L
        self.mtu = int(opts["mtu"])
        self.mss = self.mtu - O.TCP_HEADER
        self.pkt = float(self.mtu + O.PPP_HEADER)
        self.iw = int(opts["init_cwnd"])
        self.handshake = bool(opts["handshake"])
        self.bw = topology.dlink_bw.astype(np.float64)
        self.lat = topology.dlink_lat.astype(np.float64)
        self.src, self.dst = schedule.src, schedule.dst
        self.keys = schedule.routing_keys(np.arange(n))  # ECMP hash key, as the engines use
        self.payload = np.asarray(schedule.size, dtype=np.float64)
        # one step = one full data packet serialised on the fastest link
        self.dt = self.pkt / float(self.bw.max()) if L else 1.0
        self.factor = np.ones(L)
        self.capv = self.bw.copy()
        # transit rings must hold the longest hop delay any capacity in the run can give
        fmin = 1.0
        fac = np.asarray(faults.factor, dtype=float)
        if len(fac) and (fac > 0).any():
            fmin = float(fac[fac > 0].min())
        worst = (self.lat + self.pkt / (self.bw * fmin)) / self.dt if L else np.zeros(0)
        need = int(np.ceil(worst.max())) + 2 if L else 3
        self.W = 1 << (need - 1).bit_length()  # a power of two: ring indices are masks
        self.dly = np.zeros(L)
        self._set_delays(np.arange(L))

        self.kind = np.ascontiguousarray(schedule.kind, dtype=np.int64)
        self.dur = np.ascontiguousarray(schedule.duration, dtype=np.float64)
        self.start = np.ascontiguousarray(schedule.start, dtype=np.float64)
        self.left = np.diff(schedule.dep_ptr).astype(np.int64)
        self.state = np.zeros(n, dtype=np.int64)
        self.t_start = np.full(n, np.nan)
        self.t_end = np.full(n, np.nan)
        cptr, cidx = schedule.children()
        self.cptr = np.ascontiguousarray(cptr, dtype=np.int64)
        self.cidx = np.ascontiguousarray(cidx, dtype=np.int64)
        self.hk = np.zeros(n + 1)
        self.hv = np.zeros(n + 1, dtype=np.int64)
        self.wire = K.wire_bytes(np.ascontiguousarray(self.payload), float(self.mss),
                                 float(O.TCP_HEADER + O.PPP_HEADER))
        n0 = self.iw
        if self.handshake:
            n0 = max(1, min(self.iw, O.TCP_FIRST_WINDOW // self.mss))
        self.n0b = np.full(n, n0 * self.pkt)
        self.iwb = np.full(n, self.iw * self.pkt)
        self.hs0 = np.zeros(n)
        self.ackfix = np.zeros(n)
        self.poff = np.zeros(n, dtype=np.int64)
        self.plen = np.zeros(n, dtype=np.int64)
        self.elink = np.zeros(0, dtype=np.int64)
        self.eflow = np.zeros(0, dtype=np.int64)
        self.q = np.zeros(0)
        self.tr = np.zeros((0, self.W))
        self.rel = np.zeros(n)
        self.dlv = np.zeros(n)
        self.ack = np.zeros(n)
        self.aslot = np.full(n, -1, dtype=np.int64)
        self.active = np.zeros(n, dtype=np.int64)
        self.Q = np.zeros(L)
        self.lbytes = np.zeros(L)
        self.lbusy = np.zeros(L)
        self.lact = np.zeros(L, dtype=np.int64)
        self.lin = np.zeros(L, dtype=np.int64)
        self.roff = np.zeros(L, dtype=np.int64)
        self.rcap = np.zeros(L, dtype=np.int64)
        self.rh = np.zeros(L, dtype=np.int64)
        self.rn = np.zeros(L, dtype=np.int64)
        self.fe = np.zeros(4096, dtype=np.int64)
        self.fb = np.zeros(4096)
        self.fs = np.zeros(4096, dtype=np.int64)
        m = 16
        self.ah_t = np.zeros((m, ACK_RING))
        self.ah_v = np.zeros((m, ACK_RING))
        self.ah_h = np.zeros(m, dtype=np.int64)
        self.ah_n = np.zeros(m, dtype=np.int64)
        self.free_slots = np.arange(m, dtype=np.int64)
        self.isc = np.zeros(F.N_ISC, dtype=np.int64)
        self.scratch = np.zeros(n, dtype=np.bool_)
        self.reroutes = np.zeros(n, dtype=np.int64)
        self.moved = np.zeros(n, dtype=bool)
        self.segments: list[tuple] = []  # (nodes, entry offsets, hop counts) per assignment

    def _set_delays(self, links):
        c = self.capv[links]
        ok = c > 0
        d = np.ones(len(links))
        d[ok] = np.maximum(1.0, (self.lat[links][ok] + self.pkt / c[ok]) / self.dt)
        self.dly[links] = d

    def assign(self, flows: np.ndarray, paths) -> np.ndarray:
        """Give ``flows`` the paths (CSR over ``flows``); returns the flows left without one."""
        reach = np.asarray(paths.reachable, dtype=bool)
        weight = np.asarray(paths.weight, dtype=float)
        if (weight != 1.0).any():
            raise InputError("the FIFO model runs each transfer on one path; the routing "
                             "policy splits transfers over several (spray/adaptive)")
        ptr = np.asarray(paths.ptr, dtype=np.int64)
        link = np.asarray(paths.link, dtype=np.int64)
        cnt = np.diff(ptr)
        # each transfer gets its hops plus one entry for the receiver (link -1)
        sizes = np.where(reach, cnt + 1, 0)
        base = len(self.elink)
        offs = base + np.concatenate([[0], np.cumsum(sizes)[:-1]])
        total = int(sizes.sum())
        el = np.full(total, -1, dtype=np.int64)
        ef = np.repeat(flows, sizes).astype(np.int64)
        c = cnt[reach]
        pos = np.repeat(offs[reach] - base, c) + (np.arange(int(c.sum())) -
                                                  np.repeat(np.cumsum(c) - c, c))
        el[pos] = link[np.repeat(reach, cnt)]
        self.elink = np.concatenate([self.elink, el])
        self.eflow = np.concatenate([self.eflow, ef])
        self.q = np.concatenate([self.q, np.zeros(total)])
        self.tr = np.concatenate([self.tr, np.zeros((total, self.W))])
        self.poff[flows] = offs
        self.plen[flows] = np.where(reach, cnt, -1)
        ok = flows[reach]
        if len(ok):
            sub_ptr = np.concatenate([[0], np.cumsum(cnt[reach])]).astype(np.int64)
            sub_link = link[np.repeat(reach, cnt)]
            lat = np.asarray(paths.latency, dtype=np.float64)[reach]
            hops = np.asarray(paths.hops, dtype=np.int64)[reach]
            cap = np.where(self.capv > 0, self.capv, self.bw)
            _tail, hs, _rtt, _c0, _cf, _cm = K.tcp_path_params(
                sub_ptr, sub_link, np.ones(len(sub_link)), cap, lat, hops,
                np.ascontiguousarray(self.payload[ok]), self.mss, O.TCP_HEADER, O.PPP_HEADER,
                O.TCP_ACK_BYTES, O.TCP_SYN_BYTES, self.iw, self.handshake, O.TCP_FIRST_WINDOW)
            self.hs0[ok] = hs
            rev = sub_link ^ 1
            per = self.lat[rev] + (O.TCP_ACK_BYTES + O.PPP_HEADER) / cap[rev]
            self.ackfix[ok] = np.add.reduceat(per, sub_ptr[:-1]) if len(per) else 0.0
            self.segments.append((ok.copy(), offs[reach].copy(), cnt[reach].copy()))
        return flows[~reach]

    def advance(self, t_stop: float) -> int:
        out = F.advance(
            t_stop, self.dt, self.isc, self.kind, self.dur, self.start, self.left, self.state,
            self.t_start, self.t_end, self.cptr, self.cidx, self.hk, self.hv, self.wire,
            self.n0b, self.iwb, self.hs0, self.ackfix, self.poff, self.plen, self.elink,
            self.eflow, self.dly, self.q, self.tr, self.rel, self.dlv, self.ack, self.aslot,
            self.active, self.capv, self.Q, self.lbytes, self.lbusy, self.lact, self.lin,
            self.roff, self.rcap, self.rh, self.rn, self.fe, self.fb, self.fs, self.ah_t,
            self.ah_v, self.ah_h, self.ah_n, self.free_slots)
        (rc, self.fe, self.fb, self.fs, self.ah_t, self.ah_v, self.ah_h, self.ah_n,
         self.free_slots) = out
        return rc

    def start_roots(self):
        roots = np.flatnonzero(self.left == 0).astype(np.int64)
        F.push_ready(roots, np.maximum(0.0, self.start[roots]), self.hk, self.hv, self.isc)

    def transfers_on(self, dead_links: np.ndarray, states) -> np.ndarray:
        """Transfers in one of ``states`` whose current path crosses one of ``dead_links``."""
        hit = np.isin(self.elink, dead_links)
        flows = np.unique(self.eflow[hit])
        if not len(flows):
            return flows
        # an entry belongs to the flow's current path only if it lies inside its block
        cur = []
        for f in flows:  # rare (fault instants), few flows
            o, m = self.poff[f], self.plen[f]
            if m > 0 and np.isin(self.elink[o:o + m], dead_links).any():
                cur.append(f)
        flows = np.array(cur, dtype=np.int64)
        return flows[np.isin(self.state[flows], states)] if len(flows) else flows

    def stall(self, flows: np.ndarray):
        F.stall(flows, self.isc, self.state, self.active, self.poff, self.plen, self.eflow,
                self.q, self.tr, self.rel, self.dlv, self.Q, self.roff, self.rcap, self.rh,
                self.rn, self.fe, self.fb, self.scratch)

    def resume(self, flows: np.ndarray):
        for f in flows:
            self.state[f] = F.ACTIVE
            self.active[self.isc[F.N_ACT]] = f
            self.isc[F.N_ACT] += 1

    def used_paths(self):
        """CSR per node of every path segment it was given, in order."""
        if not self.segments:
            return np.zeros(self.n + 1, np.int64), np.zeros(0, np.int32), np.zeros(0)
        nodes = np.concatenate([s[0] for s in self.segments])
        offs = np.concatenate([s[1] for s in self.segments])
        lens = np.concatenate([s[2] for s in self.segments])
        order = np.argsort(nodes, kind="stable")  # by node, then in the order given
        nodes, offs, lens = nodes[order], offs[order], lens[order]
        cnt = np.bincount(nodes, weights=lens, minlength=self.n).astype(np.int64)
        ptr = np.concatenate([[0], np.cumsum(cnt)]).astype(np.int64)
        starts = np.repeat(offs - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
        link = self.elink[starts + np.arange(int(lens.sum()))]
        return ptr, link.astype(np.int32), np.ones(len(link))


def warm() -> float:
    """Compile (or load from Numba's cache) the kernels once per process."""
    global _COMPILED
    if _COMPILED:
        return 0.0
    t0 = time.perf_counter()
    from netcore.flow.engine import _WarmRouting, warm_case

    topo, sched, faults = warm_case()
    run(topo, sched, _WarmRouting(topo), faults,
        O.check_options({"transport": "tcp", "reroute_delay_us": 1.0}))
    _COMPILED = True
    return time.perf_counter() - t0


def simulate(topology, schedule, routing, faults, **options) -> Result:
    """Run the FIFO model; ``options`` as the flow engine's, transport forced to "tcp"."""
    opts = O.check_options({**options, "transport": "tcp"})
    compile_s = warm()
    return run(topology, schedule, routing, faults, opts, compile_s)


def run(topology, schedule, routing, faults, opts, compile_s: float = 0.0) -> Result:
    wall0 = time.perf_counter()
    if opts["link_series"]:
        raise InputError("engine.link_series: not recorded by the FIFO model (it has no "
                         "piecewise-constant rates)")
    st = FifoState(topology, schedule, opts, faults)
    tr = np.flatnonzero(schedule.kind == TRANSFER).astype(np.int64)
    if len(tr):
        st.assign(tr, routing.paths(st.src[tr], st.dst[tr], flow_id=st.keys[tr]))
    setup_s = time.perf_counter() - wall0
    delay = opts["reroute_delay_us"] * 1e-6
    ftime = np.asarray(faults.time, dtype=np.float64)
    reroute_at: dict[float, list[np.ndarray]] = {}
    fi = 0
    loop0 = time.perf_counter()
    started = False
    while True:
        t_fault = ftime[fi] if fi < len(ftime) else np.inf
        t_rr = min(reroute_at) if reroute_at else np.inf
        t_next = min(t_fault, t_rr)
        if not started and t_next > 0.0:
            st.start_roots()
            started = True
        if started:
            st.advance(t_next)
            if st.isc[F.N_DONE] == st.n:
                break
        if t_next == np.inf:
            break
        fi = _fault_instant(st, routing, faults, fi, t_next, delay, reroute_at)
        if not started:
            st.start_roots()  # faults at time 0 are in place before anything starts
            started = True
    loop_s = time.perf_counter() - loop0
    return _collect(st, opts, compile_s, setup_s, loop_s, time.perf_counter() - wall0)


def _fault_instant(st, routing, faults, fi, t, delay, reroute_at) -> int:
    was_alive = st.factor > 0
    touched, any_up = [], False
    while fi < len(faults.time) and faults.time[fi] == t:
        d = int(faults.dlink[fi])
        st.factor[d] = float(faults.factor[fi])
        any_up |= faults.kind[fi] != DOWN and st.factor[d] > 0 and not was_alive[d]
        touched.append(d)
        fi += 1
    alive = st.factor > 0
    if touched:
        tl = np.unique(np.array(touched, dtype=np.int64))
        st.capv[tl] = st.bw[tl] * st.factor[tl]
        st._set_delays(tl)
        died = tl[was_alive[tl] & ~alive[tl]]
        if len(died):
            hit = st.transfers_on(died, [F.ACTIVE])
            if len(hit):
                st.stall(hit)
                reroute_at.setdefault(t + delay, []).append(hit)
            # not sending yet (waiting, or in the handshake): a new path now
            wait = st.transfers_on(np.flatnonzero(~alive), [F.WAIT, F.TIMED])
            if len(wait):
                st.assign(wait, routing.paths(st.src[wait], st.dst[wait], flow_id=st.keys[wait],
                                              alive=alive))
                st.moved[wait] = True
        if any_up:
            w = np.flatnonzero((st.kind == TRANSFER) & (st.state == F.WAIT) &
                               (st.moved | (st.plen < 0)))
            if len(w):
                st.assign(w, routing.paths(st.src[w], st.dst[w], flow_id=st.keys[w], alive=alive))
    due = reroute_at.pop(t, None)
    if due:
        flows = np.unique(np.concatenate(due))
        flows = flows[st.state[flows] == F.STALLED]
        if len(flows):
            st.reroutes[flows] += 1
            lost = st.assign(flows, routing.paths(st.src[flows], st.dst[flows], flow_id=st.keys[flows],
                                                  alive=alive))
            st.state[lost] = F.STRANDED
            st.resume(np.setdiff1d(flows, lost))
    return fi


def _collect(st, opts, compile_s, setup_s, loop_s, wall_s) -> Result:
    done = st.state == F.DONE
    end = np.where(done, st.t_end, np.nan)
    stranded = ~done
    direct = st.state == F.STRANDED
    makespan = float(np.nanmax(end)) if done.any() else 0.0
    events = int(st.isc[F.EVENTS])
    res = Result(engine="flow", start=st.t_start.copy(), end=end, stranded=stranded,
                 link_bytes=st.lbytes.copy(), link_busy=st.lbusy.copy(), events=events,
                 wall_s=loop_s)
    res.node_extra["stranded_no_path"] = direct
    res.node_extra["blocked"] = stranded & ~direct
    res.node_extra["reroutes"] = st.reroutes
    if opts["record_paths"]:
        ptr, link, weight = st.used_paths()
        res.node_extra["path_ptr"] = ptr
        res.node_extra["path_link"] = link
        res.node_extra["path_weight"] = weight
    span = makespan if makespan > 0 else 1.0
    res.link_extra["utilization"] = (st.lbusy / span if makespan > 0
                                      else np.zeros_like(st.lbusy))
    res.link_extra["throughput_frac"] = res.link_bytes / (st.bw * span)
    steps = int(st.isc[F.STEPS_RUN])
    res.info.update(compile_s=compile_s, setup_s=setup_s, loop_s=loop_s, wall_total_s=wall_s,
                    events=events, model="fifo-fluid", step_s=st.dt, time_steps=steps,
                    events_per_s=events / loop_s if loop_s > 0 else 0.0,
                    stranded=int(stranded.sum()), stranded_no_path=int(direct.sum()))
    return res
