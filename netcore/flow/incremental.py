"""Incremental driving of the flow engine, for co-simulation (docs/session.md).

Same contract as ``netcore.packet.incremental.PacketIncremental``:

    inc = FlowIncremental(topology, routing, faults, transport="tcp")
    ids = inc.add_transfers(src, dst, size, start_s=0.0)
    while inc.pending():
        t, done = inc.advance(t_limit)      # stops at the first completion time stamp
        ...inc.add_transfers(..., start_s=t) for what `done` releases...
    res = inc.result()

The compiled event loop runs until the next instant the caller needs (a completion, or
``t_limit``) and stops there *before* that instant's re-allocation; transfers the caller adds
at that instant are started by the next ``advance`` as part of the same batch. So a DAG driven
step by step gives the same batches, in the same order, as the DAG handed to ``run`` at once
(tests/test_session.py checks bit-for-bit equality on a ring all-reduce). Python is entered
once per ``advance`` call and at fault instants, never per flow event.
"""
from __future__ import annotations

import math
import time

import numpy as np

from netcore.flow import _kernels as K
from netcore.flow.engine import _check_faults, _collect, _fault_instant, warm
from netcore.flow.options import check_options
from netcore.flow.recovery import Recovery
from netcore.flow.state import FlowState
from netcore.schedule import Schedule
from netcore.incremental_input import check_new_transfers
from topo.errors import InputError
from topo.routing import spans


class FlowIncremental:
    """The flow engine driven step by step: ``add_transfers``, ``advance``, ``now``,
    ``pending``, ``result``. Options are the flow engine's (``netcore.flow.options``)."""

    def __init__(self, topology, routing, faults=None, seed: int = 0, **options):
        from topo.faults import LinkFaults
        from topo.routing import Routing

        self.topology = topology
        self.routing = Routing(topology, routing, seed=seed) if isinstance(routing, str) \
            else routing
        self.faults = LinkFaults.none() if faults is None else faults
        self.opts = check_options(options)
        if self.opts["contention"] != "fluid":
            # the model's link efficiencies come from the whole traffic, known only at the end
            raise InputError(f"engine.contention = {self.opts['contention']!r}: the contention "
                             f"model needs the whole schedule up front; incremental (session) "
                             f"runs of the flow engine use 'fluid'")
        _check_faults(topology, self.faults)
        self._compile_s = warm()
        o = self.opts
        st = FlowState(topology, Schedule.empty(), o["mtu"], o["link_series"], o["transport"],
                       o["init_cwnd"], o["handshake"], o["local_repair"])
        st.src = np.zeros(0, dtype=np.int64)
        st.dst = np.zeros(0, dtype=np.int64)
        st.flow_key = np.zeros(0, dtype=np.int64)
        self._st = st  # its slot pool grows as transfers start (FlowState.grow_slots)
        self._rec = Recovery(self.faults, o)
        self._ftime = np.asarray(self.faults.time, dtype=np.float64)
        self._fi = 0
        self._now = 0.0
        self._done = 0
        # pending() without scanning every transfer added (a session calling it once per step
        # went quadratic): stranded transfers are counted as they strand. A transfer strands
        # only with no path (PLEN < 0: at its start, or at the end of its handshake) or at a
        # fault instant, and only add_transfers and fault instants assign paths, so the ones
        # that may strand later are the few left without a path (_maybe_stranded)
        self._stranded = 0
        self._maybe_stranded = np.zeros(0, dtype=np.int64)
        self._wall = 0.0
        self._setup = 0.0
        # faults at time 0 are in place before anything is sent, as in a batch run (engine._run
        # applies them before starting the roots). Left to the first advance(), they found the
        # sends of time 0 routed over links down from the start and already sending: stopped,
        # re-routed and delayed by reroute_delay_us, which the batch run does not do
        if len(self._ftime) and self._ftime[0] <= 0.0:
            self._fault_instant(0.0)

    def _fault_instant(self, t: float):
        st = self._st
        self._fi = _fault_instant(st, self.topology, self.routing, self.faults, self._fi, t,
                                  self._rec)
        # it may strand any transfer, or leave it without a path: count them again (a fault
        # instant scans every transfer already, in engine._fault_instant)
        state = st.NI[: st.n, K.STATE]
        self._stranded = int(np.count_nonzero(state == K.STRANDED))
        self._maybe_stranded = np.flatnonzero((st.NI[: st.n, K.PLEN] < 0) &
                                              (state != K.STRANDED) & (state != K.DONE))

    # ------------------------------------------------------------------ API
    def now(self) -> float:
        """Simulated time reached, in seconds."""
        return self._now

    def pending(self) -> int:
        """Transfers added and neither finished nor stranded."""
        st = self._st
        m = self._maybe_stranded
        if len(m):  # the ones stranded since the last call count; those given a path do not
            state = st.NI[m, K.STATE]
            gone = state == K.STRANDED
            self._stranded += int(np.count_nonzero(gone))
            self._maybe_stranded = m[~gone & (state != K.DONE) & (st.NI[m, K.PLEN] < 0)]
        return int(st.n - self._done - self._stranded)

    def add_transfers(self, src, dst, size, start_s=None, flow_ids=None) -> np.ndarray:
        """Add transfers src[i] -> dst[i] of size[i] bytes that become ready at ``start_s``
        (scalar or per transfer, seconds, >= now(); default now()). ``flow_ids`` (optional)
        is the key routing hashes (default: the returned ids, as ``run`` uses node ids).
        Returns the transfer ids (0, 1, ... in order of adding)."""
        t0 = time.perf_counter()
        src, dst, size, start = check_new_transfers(self.topology.n_hosts, self._now, src,
                                                    dst, size, start_s, "flow")
        n = len(src)
        st = self._st
        ids = st.append_transfers(src.astype(np.int64), dst.astype(np.int64),
                                  size.astype(np.float64), start)
        st.flow_key[ids] = ids if flow_ids is None else np.broadcast_to(
            np.asarray(flow_ids, np.int64), (n,))
        if n:
            # as in a batch run: routed on the whole fabric, and routed again around dead
            # links only if that path crosses one (then an `up` re-routes them once more)
            key = st.flow_key[ids]
            st.assign(ids, self.routing.paths(st.src[ids], st.dst[ids], flow_id=key))
            alive = st.factor > 0
            if not alive.all():
                # only these transfers' paths are new (the others' were checked when added
                # or at the fault instant): searching every transfer added so far made each
                # send while a link was down cost as much as all the sends before it
                plen = np.maximum(st.NI[ids, K.PLEN], 0)
                dead = ~alive[st.EI[spans(st.NI[ids, K.POFF], plen), K.ELINK]]
                hit = np.unique(np.repeat(ids, plen)[dead])
                if len(hit):
                    st.assign(hit, self.routing.paths(st.src[hit], st.dst[hit],
                                                      flow_id=st.flow_key[hit], alive=alive))
                    st.moved[hit] = True
            no_path = ids[st.NI[ids, K.PLEN] < 0]
            if len(no_path):  # they strand when they start
                self._maybe_stranded = np.concatenate([self._maybe_stranded, no_path])
            st.start_nodes(ids, self._now)
        self._setup += time.perf_counter() - t0
        return ids

    def advance(self, t_limit: float | None = None):
        """Run until ``t_limit`` (seconds; None: no limit) or the first time stamp at which
        transfers complete, whichever is first. Returns (t, ids): that time stamp and every
        transfer completing at it (in id order), or (t_limit, empty) if none did (with no
        limit: (now, empty) once nothing is left to do; fault instants after that are not
        run through). Events at exactly ``t_limit`` are processed (their completions are
        returned)."""
        if t_limit is not None:
            t_limit = float(t_limit)
            if not (t_limit >= self._now):
                raise InputError(f"t_limit must be >= now() = {self._now!r} s; got {t_limit!r}")
        lim = math.inf if t_limit is None else t_limit
        st = self._st
        t0 = time.perf_counter()
        try:
            while True:
                t_f = self._ftime[self._fi] if self._fi < len(self._ftime) else math.inf
                t_f = min(t_f, self._rec.next_time())
                if lim < t_f:
                    rc = st.advance(lim, K.M_STOPC | K.M_INCL)
                else:
                    rc = st.advance(t_f, K.M_STOPC)
                if rc == K.RC_GROW_SERIES:
                    st.grow_series()
                    continue
                if rc == K.RC_DEFER:
                    self._now = float(st.fsc[K.CLOCK])
                    nd = int(st.isc[K.NDONE])
                    done = np.sort(st.cbuf[:nd])
                    self._done += nd
                    return self._now, done
                if t_f == math.inf:  # nothing left at all
                    return self._now, np.zeros(0, dtype=np.int64)
                if t_limit is None and self.pending() == 0:
                    # nothing left to move: the faults still to come wait for a call that
                    # reaches them. Running through them moved the clock to the last one, past
                    # the caller's now(), so that its next sends were refused as in the past
                    return self._now, np.zeros(0, dtype=np.int64)
                self._now = float(t_f)
                self._fault_instant(t_f)
        finally:
            self._wall += time.perf_counter() - t0

    def result(self, run_out: bool = True):
        """The ``Result`` over every transfer added so far (unfinished ones are stranded).
        ``run_out`` is the drivers' common interface (the packet engine's last ACKs): nothing
        of the flow engine is in flight once a transfer's last byte has arrived."""
        st = self._st
        st.gave_up = self._rec.gave_up
        return _collect(st, self.topology, None, self.opts, self._compile_s, self._setup,
                        self._wall, self._wall + self._setup, clock=self._now)
