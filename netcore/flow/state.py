"""The flow engine's flat state: numpy arrays the kernels mutate, plus the Python-side
bookkeeping needed when faults force a return to Python (path assignment, segment history).
"""
from __future__ import annotations

import numpy as np

from netcore.flow import _kernels as K
from netcore.schedule import TRANSFER
from topo.routing import spans

# slots a link is given up front, at most (FlowState.fit_slots); more as flows need them.
# None: room for every transfer that may cross it (tests compare the two)
SLOT_START = 16


class FlowState:
    def __init__(self, topology, schedule, mtu: int | None, link_series: bool,
                 transport: str = "fluid", init_cwnd: int = 10, handshake: bool = True,
                 local_repair: bool = True):
        n = schedule.n
        L = topology.n_dlinks
        self.n, self.L = n, L
        self.mtu = int(mtu or 0)
        self.tcp = transport == "tcp"
        self.init_cwnd = int(init_cwnd)
        self.handshake = bool(handshake)
        self.bw = topology.dlink_bw.astype(np.float64)
        self.src = schedule.src
        self.dst = schedule.dst
        self.payload = np.asarray(schedule.size, dtype=np.float64)
        # serial transfers a node stands for (a collective stream pays its latency per step)
        self.steps = np.asarray(schedule.steps, dtype=np.float64)
        self.NF = np.zeros((n, K.N_NF), dtype=np.float64)
        self.NI = np.zeros((n, K.N_NI), dtype=np.int64)
        NF, NI = self.NF, self.NI
        NF[:, K.SIZE] = self._wire(self.payload)
        NF[:, K.CAP0] = np.inf
        NF[:, K.CAPF] = np.inf
        NF[:, K.CAPMAX] = np.inf
        NI[:, K.CAPEV] = -1
        NF[:, K.DUR] = schedule.duration
        NF[:, K.START] = schedule.start
        NF[:, K.TSTART] = np.nan
        NF[:, K.TEND] = np.nan
        NI[:, K.KIND] = schedule.kind
        NI[:, K.NDEPS] = np.diff(schedule.dep_ptr)
        NI[:, K.PLEN] = 0
        self.dhk = np.zeros(n, dtype=np.float64)  # drain heap: keys by slot
        self.dhi = np.zeros(n, dtype=np.int64)  # flow in each slot
        self.dpos = np.full(n, -1, dtype=np.int64)  # slot of each flow
        # max-heap of active rates (keys are -rate): "is any flow this fast?" in O(1)
        self.rhk = np.zeros(n, dtype=np.float64)
        self.rhi = np.zeros(n, dtype=np.int64)
        self.rpos = np.full(n, -1, dtype=np.int64)
        # min-heap of slow-start caps inside one solve; completions of an incremental advance
        self.chk = np.zeros(n, dtype=np.float64)
        self.chi = np.zeros(n, dtype=np.int64)
        self.cpos = np.full(n, -1, dtype=np.int64)
        self.cbuf = np.zeros(n, dtype=np.int64)
        self.cptr, self.cidx = schedule.children()
        self.cptr = np.ascontiguousarray(self.cptr, dtype=np.int64)
        self.cidx = np.ascontiguousarray(self.cidx, dtype=np.int64)
        self.EI = np.zeros((0, K.N_EI), dtype=np.int64)
        self.ew = np.zeros(0, dtype=np.float64)
        self.n_ent = 0
        self.LF = np.zeros((K.N_LF, L), dtype=np.float64)
        self.LI = np.zeros((K.N_LI, L), dtype=np.int64)
        self.LF[K.CAP] = self.bw
        self.LI[K.LOFF] = 0
        self.LI[K.LCAP] = 0
        self.SI = np.zeros((1, 2), dtype=np.int64)
        self.SD = np.zeros((1, K.N_SD), dtype=np.float64)
        self.lptr = np.zeros(L + 1, dtype=np.int64)
        self.wl = np.zeros(1, dtype=np.int64)
        self.tk = np.zeros(2 * n + 2, dtype=np.float64)
        self.ti = np.zeros(2 * n + 2, dtype=np.int64)
        cap = 4 * L + 1024 if link_series else 1
        self.ls_t = np.zeros(cap, dtype=np.float64)
        self.ls_l = np.zeros(cap, dtype=np.int64)
        self.ls_r = np.zeros(cap, dtype=np.float64)
        self.isc = np.zeros(K.N_ISC, dtype=np.int64)
        self.isc[K.SERIES] = 1 if link_series else 0
        self.isc[K.CAPS] = 1 if self.tcp else 0
        if not local_repair:  # every batch solves its whole component (the back-off never ends)
            self.isc[K.LOCAL_SKIP] = 1 << 62
        self.fsc = np.zeros(K.N_FSC, dtype=np.float64)
        self.factor = np.ones(L, dtype=np.float64)
        # contention model's capacity factor per link (1.0: fluid; netcore/flow/contention.py)
        self.eff = np.ones(L, dtype=np.float64)
        # segments that carried bytes and were then abandoned (re-routes): flow, offset, length
        self.old_segments: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.reroutes = np.zeros(n, dtype=np.int64)
        self.moved = np.zeros(n, dtype=bool)  # WAIT transfers routed around a fault
        self.gave_up = 0  # tcp connections that gave up waiting for a path (recovery.py)
        self.flow_key = None  # routing hash key per node (incremental runs); None: node ids
        self.slot_layouts = 0  # times the slot pool was laid out (first fit and growths)
        self._tables: dict = {}  # shared paths written: key -> (first row, ptr, link, weight)
        self.arena_size = 0  # rows of the arena's last region (FlowState.grow_slots)

    def _wire(self, payload: np.ndarray) -> np.ndarray:
        """Bytes the fluid model moves: the payload, plus per-packet headers under tcp."""
        if not self.tcp:
            return payload.copy()
        from netcore.flow.options import PPP_HEADER, TCP_HEADER

        return K.wire_bytes(np.ascontiguousarray(payload, dtype=np.float64),
                            float(self.mtu - TCP_HEADER), float(TCP_HEADER + PPP_HEADER))

    # ------------------------------------------------------------------ incremental growth
    def append_transfers(self, src, dst, payload, start) -> np.ndarray:
        """Add parentless transfers (incremental driving); returns their node ids. Node
        arrays grow by doubling; rows past ``n`` are inert (state DONE, no path)."""
        k = len(src)
        first = self.n
        if first + k > self.NF.shape[0]:
            self._grow(max(first + k, 2 * self.NF.shape[0], 64))
        ids = np.arange(first, first + k, dtype=np.int64)
        self.n = first + k
        self.src[ids] = src
        self.dst[ids] = dst
        self.payload[ids] = payload
        NF, NI = self.NF, self.NI
        NF[ids] = 0.0
        NI[ids] = 0
        NF[ids, K.SIZE] = self._wire(np.asarray(payload, dtype=np.float64))
        NF[ids, K.START] = start
        NF[ids, K.TSTART] = np.nan
        NF[ids, K.TEND] = np.nan
        NF[ids, K.CAP0] = np.inf
        NF[ids, K.CAPF] = np.inf
        NF[ids, K.CAPMAX] = np.inf
        NI[ids, K.KIND] = TRANSFER
        NI[ids, K.STATE] = K.WAIT
        NI[ids, K.CAPEV] = -1
        return ids

    def _grow(self, cap: int):
        old = self.NF.shape[0]

        def grown(a, fill, rows=cap):
            b = np.full((rows,) + a.shape[1:], fill, dtype=a.dtype)
            b[: a.shape[0]] = a
            return b

        self.NF = grown(self.NF, 0.0)
        self.NI = grown(self.NI, 0)
        self.NI[old:, K.STATE] = K.DONE
        self.NI[old:, K.KIND] = TRANSFER
        self.NF[old:, K.TSTART] = np.nan
        self.NF[old:, K.TEND] = np.nan
        for name in ("dhk", "rhk", "chk"):
            setattr(self, name, grown(getattr(self, name), 0.0))
        for name in ("dhi", "rhi", "chi", "cbuf"):
            setattr(self, name, grown(getattr(self, name), 0))
        for name in ("dpos", "rpos", "cpos"):
            setattr(self, name, grown(getattr(self, name), -1))
        self.tk = grown(self.tk, 0.0, 2 * cap + 2)
        self.ti = grown(self.ti, 0, 2 * cap + 2)
        self.cptr = np.zeros(cap + 1, dtype=np.int64)  # incremental transfers have no children
        self.cidx = np.zeros(0, dtype=np.int64)
        self.src = grown(np.asarray(self.src), 0)
        self.dst = grown(np.asarray(self.dst), 0)
        self.payload = grown(self.payload, 0.0)
        self.steps = grown(self.steps, 1.0)
        self.reroutes = grown(self.reroutes, 0)
        self.moved = grown(self.moved, False)
        if self.flow_key is not None:
            self.flow_key = grown(self.flow_key, 0)

    # ------------------------------------------------------------------ paths
    def _reserve(self, extra: int):
        need = self.n_ent + extra
        have = self.EI.shape[0]
        if need <= have:
            return
        cap = max(need, int(have * 1.5) + 16) if have else need
        EI = np.full((cap, K.N_EI), -1, dtype=np.int64)
        EI[: self.n_ent] = self.EI[: self.n_ent]
        ew = np.zeros(cap, dtype=np.float64)
        ew[: self.n_ent] = self.ew[: self.n_ent]
        self.EI, self.ew = EI, ew

    def _write_entries(self, link, weight, flow_of) -> int:
        """Append entries (``flow_of``: each one's flow, -1 for a shared path's); returns the
        row of the first."""
        m = len(link)
        self._reserve(m)
        base = self.n_ent
        self.EI[base: base + m, K.ELINK] = link
        self.EI[base: base + m, K.EFLOW] = flow_of
        self.EI[base: base + m, K.ESLOT] = -1
        self.ew[base: base + m] = weight
        self.n_ent += m
        return base

    def assign(self, flows: np.ndarray, paths) -> np.ndarray:
        """Give ``flows`` the paths in ``paths`` (a routing.Paths for exactly these flows), a
        private copy each. Unreachable flows get length -1. Returns the unreachable flow ids."""
        flows = np.asarray(flows, dtype=np.int64)
        ptr = np.ascontiguousarray(paths.ptr, dtype=np.int64)
        if len(ptr) != len(flows) + 1:
            raise RuntimeError(f"routing returned {len(ptr) - 1} paths for {len(flows)} flows")
        ptr, link, weight = K.dedupe_entries(ptr, np.ascontiguousarray(paths.link, np.int64),
                                             np.ascontiguousarray(paths.weight, np.float64))
        cnt = np.diff(ptr)
        base = self._write_entries(link, weight, np.repeat(flows, cnt))
        unreachable = self._set_paths(flows, ptr[:-1], ptr[1:], link, weight, base, paths,
                                      None)
        self.NI[flows, K.AOFF] = self.NI[flows, K.POFF]
        return unreachable

    def assign_shared(self, flows: np.ndarray, rows: np.ndarray, table, key) -> np.ndarray:
        """Give ``flows`` the paths ``table`` (a routing.Paths) has in ``rows``, one copy of
        each row shared by every flow naming it (rows of a table are written once per ``key``,
        e.g. the alive mask it was routed under). Returns the unreachable flow ids."""
        flows = np.asarray(flows, dtype=np.int64)
        rows = np.asarray(rows, dtype=np.int64)
        got = self._tables.get(key)
        if got is None:
            ptr, link, weight = K.dedupe_entries(
                np.ascontiguousarray(table.ptr, np.int64),
                np.ascontiguousarray(table.link, np.int64),
                np.ascontiguousarray(table.weight, np.float64))
            base = self._write_entries(link, weight, -1)  # -1: every path's free list empty
            got = self._tables[key] = (base, ptr, link, weight)
        base, ptr, link, weight = got
        unreachable = self._set_paths(flows, ptr[rows], ptr[rows + 1], link, weight, base,
                                      table, rows)
        self.NI[flows, K.AOFF] = -1
        return unreachable

    def _set_paths(self, flows, start, end, link, weight, base, paths, rows) -> np.ndarray:
        """Point ``flows`` at entries ``base + [start, end)`` (``link``, ``weight``: the arrays
        those offsets index, before ``base``) and set what their paths decide: length (-1 when
        unreachable), tail, and the tcp start-up figures. ``paths``: the routing.Paths giving
        reachability, latency, hops and set tails, per flow (``rows`` None) or per row."""
        pick = (lambda a: a) if rows is None else (lambda a: np.asarray(a)[rows])
        start = np.ascontiguousarray(start, dtype=np.int64)
        end = np.ascontiguousarray(end, dtype=np.int64)
        cnt = end - start
        reach = pick(np.asarray(paths.reachable, dtype=bool)) & (cnt > 0)
        self.NI[flows, K.POFF] = base + start
        self.NI[flows, K.PLEN] = np.where(reach, cnt, -1)
        lat = np.ascontiguousarray(pick(paths.latency), dtype=np.float64)
        hops = np.ascontiguousarray(pick(paths.hops), dtype=np.int64)
        if self.tcp:
            from netcore.flow import options as O

            tail, hs, rtt, cap0, capf, capmax = K.tcp_path_params(
                start, end, link, weight, self.bw, lat, hops,
                np.ascontiguousarray(self.payload[flows]), self.mtu - O.TCP_HEADER,
                O.TCP_HEADER, O.PPP_HEADER, O.TCP_ACK_BYTES, O.TCP_SYN_BYTES, self.init_cwnd,
                self.handshake, O.TCP_FIRST_WINDOW)
            self.NF[flows, K.TAIL] = tail * self.steps[flows]
            self.NF[flows, K.HS] = hs * self.steps[flows]
            self.NF[flows, K.RTT] = rtt
            self.NF[flows, K.CAP0] = cap0
            self.NF[flows, K.CAPF] = capf
            self.NF[flows, K.CAPMAX] = capmax
        else:
            per_step = np.ascontiguousarray(self.NF[flows, K.SIZE] / self.steps[flows])
            tail = K.path_tails(start, end, link, weight, self.bw, lat, hops, per_step,
                                self.mtu)
            saf = getattr(paths, "saf", None)
            if saf is not None:  # a member set: its slowest member's tail (member_routing)
                saf = pick(saf)
                has = np.isfinite(saf)
                pkt = np.minimum(per_step, self.mtu) if self.mtu > 0 else np.zeros(len(flows))
                tail = np.where(has, lat + pkt * np.where(has, saf, 0.0), tail)
            self.NF[flows, K.TAIL] = tail * self.steps[flows]
        return flows[~reach]

    def fit_slots(self):
        """Lay the slot pool out for the transfers that may still cross each link (after
        paths changed): room for at most SLOT_START of them per link (all of them if it is
        None), the rest coming from grow_slots when the flows active at once need it (a
        training step's transfers are mostly waiting or done: on DeepSeek-V3 over 2,048 GPUs
        the links hold 73,390 active entries at most, against 17.0 M entries in all). A no-op
        when the current layout already has that room."""
        need = K.slot_demand(self.NI, self.EI, self.L)
        if SLOT_START is not None:
            need = np.minimum(need, SLOT_START)
        if (need <= self.LI[K.LCAP]).all():
            return
        self.relayout(np.maximum(need, self.LI[K.LCAP]))

    def grow_slots(self):
        """Room for the flows waiting in the pending list (the last isc[PACT_N] of ADDL):
        every link that cannot take their entries gets twice its capacity, or its active plus
        pending entries if that is more; the arena gets a fresh region at least as large as
        the blocks their shared paths may need and twice the last one."""
        isc = self.isc
        n_add, npend = int(isc[K.N_ADD]), int(isc[K.PACT_N])
        flows = self.NI[n_add - npend:n_add, K.ADDL]
        plen = self.NI[flows, K.PLEN]
        idx = spans(self.NI[flows, K.POFF], plen)
        need = self.LI[K.NACT] + np.bincount(self.EI[idx, K.ELINK], minlength=self.L)
        cap = self.LI[K.LCAP].copy()
        over = need > cap
        if over.any():
            cap[over] = np.maximum(2 * cap[over], need[over])
            self.relayout(cap)
        blocks = int(plen[self.NI[flows, K.AOFF] < 0].sum())
        if isc[K.ARENA_TOP] + blocks > isc[K.ARENA_END]:
            size = max(blocks, 2 * self.arena_size, 1024)
            self._reserve(size)
            isc[K.ARENA_TOP] = self.n_ent
            isc[K.ARENA_END] = self.n_ent + size
            self.n_ent += size
            self.arena_size = size

    def relayout(self, cap: np.ndarray):
        """Lay the slot pool out again with ``cap[l]`` slots for link l (>= its active flows)."""
        cap = np.ascontiguousarray(cap, dtype=np.int64)
        off = np.concatenate([[0], np.cumsum(cap)[:-1]]).astype(np.int64)
        self.SI, self.SD = K.relayout_slots(off, cap, self.EI, self.SI, self.SD, self.LI)
        self.slot_layouts += 1
        if len(self.wl) < 2 * len(self.SI):  # the solver's two lists (K._fill)
            self.wl = np.zeros(2 * len(self.SI), dtype=np.int64)

    def rebuild_potential(self):
        """After capacities changed: each active slot's share of its link's potential load
        (weight x the flow's solo rate at the new capacities, as K._activate computes it), and
        the links' sums. A raised capacity raises solo rates, so the old shares would no
        longer bound the load. Links that turn slack or stop being slack are seeded: a link
        that turned slack (a flow on it slowed by a lowered capacity elsewhere) may have bound
        flows the next solve must free, and the solve no longer reaches them through it."""
        def slack():  # K._slack of every link (with link series too: an extra seed is harmless)
            return self.LF[K.POT] < self.LF[K.CAP] * K.SLACK_FRAC

        was = slack()
        n = self.LI[K.NACT]
        links = np.repeat(np.arange(len(n), dtype=np.int64), n)
        slots = spans(self.LI[K.LOFF], n)
        f = self.SI[slots, K.SFLOW]
        w = self.SD[slots, K.SW]
        solo = np.full(self.NI.shape[0], np.inf)
        np.minimum.at(solo, f, self.LF[K.CAP, links] / w)
        self.SD[slots, K.SPOT] = w * solo[f]
        self.LF[K.POT] = np.bincount(links, weights=self.SD[slots, K.SPOT], minlength=len(n))
        self.seed_links(np.flatnonzero(was != slack()))

    # ------------------------------------------------------------------ kernel calls
    def advance(self, t_stop: float, mode: int = 0) -> int:
        """K.advance until it stops for a reason of the caller's (RC_STOP, RC_DEFER,
        RC_GROW_SERIES): slot growth is handled here."""
        while True:
            rc = K.advance(t_stop, mode, self.NF, self.NI, self.cptr, self.cidx, self.EI,
                           self.ew, self.SI, self.SD, self.LF, self.LI, self.lptr, self.wl,
                           self.tk, self.ti, self.dhk, self.dhi, self.dpos, self.rhk, self.rhi,
                           self.rpos, self.ls_t, self.ls_l, self.ls_r, self.isc, self.fsc,
                           self.chk, self.chi, self.cpos, self.cbuf)
            if rc != K.RC_GROW_SLOTS:
                return rc
            self.grow_slots()

    def _flush_pending(self, t: float):
        """Flows a call from Python started or resumed at t that found no slot room."""
        if self.isc[K.PACT_N] > 0:
            self.grow_slots()
            K.flush_pending(t, self.NI, self.EI, self.ew, self.SI, self.SD, self.LF, self.LI,
                            self.isc)

    def start_nodes(self, nodes: np.ndarray, t: float):
        K.start_nodes(np.ascontiguousarray(nodes, dtype=np.int64), t, self.NF, self.NI,
                      self.EI, self.ew, self.SI, self.SD, self.LF, self.LI, self.isc,
                      self.fsc, self.tk, self.ti)
        self._flush_pending(t)

    def grow_series(self):
        cap = 2 * len(self.ls_t) + self.L
        for name in ("ls_t", "ls_l", "ls_r"):
            old = getattr(self, name)
            new = np.zeros(cap, dtype=old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)

    def start_roots(self, t: float = 0.0):
        """Every node without parents (ascending ids), before the first advance."""
        self.start_nodes(np.flatnonzero(self.NI[:, K.NDEPS] == 0), t)

    def seed_links(self, links: np.ndarray):
        K.seed_links(np.ascontiguousarray(links, dtype=np.int64), self.LI, self.isc)

    def flows_on(self, links: np.ndarray) -> np.ndarray:
        return K.flows_on_links(np.ascontiguousarray(links, dtype=np.int64), self.SI, self.LI)

    def stop(self, flows: np.ndarray, t: float):
        flows = np.ascontiguousarray(flows, dtype=np.int64)
        if len(flows):
            self.old_segments.append((flows.copy(), self.NI[flows, K.POFF].copy(),
                                      self.NI[flows, K.PLEN].copy()))
        K.stop_flows(flows, t, self.NF, self.NI, self.EI, self.ew, self.SI, self.SD, self.LF,
                     self.LI, self.isc, self.dhk, self.dhi, self.dpos, self.rhk, self.rhi,
                     self.rpos)

    def resume(self, flows: np.ndarray, t: float):
        K.resume_flows(np.ascontiguousarray(flows, dtype=np.int64), t, self.NF, self.NI,
                       self.EI, self.ew, self.SI, self.SD, self.LF, self.LI, self.isc)
        self._flush_pending(t)

    def restart_slow_start(self, flows: np.ndarray, t: float):
        """tcp, after a retransmission timeout: the window is one segment (RFC 5681 section
        3.1; ns-3 ReTxTimeout), so the slow-start rounds start again at t from one full packet
        per RTT of the flow's (new) path, doubling each round. ssthresh (half the flight at the
        timeout) is not modelled: the window doubles until the path's rate binds."""
        from netcore.flow import options as O

        rate = (self.mtu + O.PPP_HEADER) / self.NF[flows, K.RTT]
        self.NF[flows, K.TDATA] = t
        self.NF[flows, K.CAPF] = rate
        self.NF[flows, K.CAP0] = rate
        self.NI[flows, K.CAPEV] = -1  # the cap events queued on the old round clock
        self.NI[flows, K.CAPB] = 0

    def draining_at(self, flows: np.ndarray, t: float) -> np.ndarray:
        """Which of the active ``flows`` send their last byte at t (drain heap key <= t)."""
        pos = self.dpos[flows]
        return (pos >= 0) & (self.dhk[np.maximum(pos, 0)] <= t)

    def waiting_hitting(self, dead: np.ndarray) -> np.ndarray:
        return K.paths_hitting(dead.astype(np.int8), self.NI, self.EI)

    def mark_pending(self, t: float):
        self.isc[K.PEND] = 1
        self.fsc[K.PEND_T] = t

    # ------------------------------------------------------------------ results
    def used_paths(self):
        """CSR (ptr, link, weight) per node of every path segment that carried the transfer,
        in time order (abandoned segments first, then the one it finished on)."""
        NI = self.NI[: self.n]
        started = (NI[:, K.KIND] == TRANSFER) & (NI[:, K.PLEN] > 0) & \
            np.isfinite(self.NF[: self.n, K.TSTART])
        fl = [f for f, _, _ in self.old_segments] + [np.flatnonzero(started)]
        off = [o for _, o, _ in self.old_segments] + [NI[started, K.POFF]]
        ln = [l for _, _, l in self.old_segments] + [NI[started, K.PLEN]]
        fl, off, ln = (np.concatenate(x).astype(np.int64) for x in (fl, off, ln))
        order = np.argsort(fl, kind="stable")
        fl, off, ln = fl[order], off[order], ln[order]
        ptr = np.zeros(self.n + 1, dtype=np.int64)
        np.add.at(ptr, fl + 1, ln)
        np.cumsum(ptr, out=ptr)
        idx = spans(off, ln)
        return ptr, self.EI[idx, K.ELINK].astype(np.int32), self.ew[idx].copy()
