"""When the flow engine's transfers cut off by a link failure try their path again
(docs/flow_engine.md, "Faults in time").

A flow on a link that goes down stops and is re-routed ``reroute_delay_us`` later. If no path
is left then, it waits (rate 0) instead of being stranded while a dead link may still come
back:

* fluid: it is re-routed again ``reroute_delay_us`` after every instant a dead link comes
  back, until a path exists;
* tcp: its connection's retransmission timer decides, as in ns-3 and the packet engine: the
  first timeout one RTO after the cut (RTO = RTT + clock granularity, between the minimum and
  maximum RTO: the estimator of a connection whose RTT samples were all alike), each next one
  after twice the last; at each timeout it is re-routed, and on a path it starts again from a
  window of one segment (slow start, ``FlowState.restart_slow_start``); after ``data_retries``
  timeouts it gives up (stranded).

A transfer that becomes ready while it has no path (state NOPATH, set by the event loop while
``isc[WAITOK]`` says a dead link is due back) waits likewise: fluid, until the re-route after
a dead link comes back; tcp, for its SYN retransmissions (``conn_timeout_s`` after it became
ready, then doubling; ``syn_retries`` of them), starting (handshake, then data) at the first
that finds a path.

Either way it is stranded as soon as no dead link is due to come back (then nothing could
give it a path), so a run, or an incremental session's ``pending()``, always ends.
"""
from __future__ import annotations

import numpy as np

from netcore.flow import _kernels as K

NONE = np.zeros(0, dtype=np.int64)


class Recovery:
    """The re-routes due (time -> flow ids) and the flows waiting for a path."""

    def __init__(self, faults, opts: dict):
        self.faults = faults
        # per directed link, the index of its last event that leaves it up (factor > 0), -1
        # for none: a link dead now comes back later iff that index is past the instant's
        up = np.flatnonzero(np.asarray(faults.factor) > 0)
        self.last_up = np.full(int(np.max(faults.dlink, initial=-1)) + 1, -1, dtype=np.int64)
        np.maximum.at(self.last_up, np.asarray(faults.dlink)[up], up)
        self.delay = opts["reroute_delay_us"] * 1e-6
        self.reroute_at: dict[float, list[np.ndarray]] = {}
        self.tcp = opts["transport"] == "tcp"
        if self.tcp:
            self.min_rto, self.max_rto = opts["min_rto_s"], opts["max_rto_s"]
            self.granularity = opts["clock_granularity_s"]
            self.retries = opts["data_retries"]
            self.conn_timeout, self.syn_retries = opts["conn_timeout_s"], opts["syn_retries"]
        self.parked = NONE  # fluid: flows waiting for a dead link to come back
        # tcp: flows waiting on their timer (sorted ids), timeouts so far, current RTO (s)
        self.timer_ids = NONE
        self.timer_tries = NONE
        self.timer_rto = np.zeros(0)
        self.gave_up = 0  # tcp: connections stranded after data_retries timeouts
        # tcp: transfers that became ready without a path, waiting on their SYN timer (sorted
        # ids), SYN retransmissions so far
        self.syn_ids = NONE
        self.syn_tries = NONE
        # fluid: transfers that became ready without a path and have a try scheduled
        self.start_pending = NONE

    def next_time(self) -> float:
        return min(self.reroute_at) if self.reroute_at else np.inf

    def schedule(self, t: float, flows: np.ndarray) -> None:
        self.reroute_at.setdefault(t, []).append(flows)

    def pop_due(self, t: float):
        due = self.reroute_at.pop(t, None)
        return unique_ids(due) if due else None

    def cancel(self, flows: np.ndarray) -> None:
        """Flows that resumed on their own path (it came back): nothing is due for them."""
        for k in self.reroute_at:
            self.reroute_at[k] = [np.setdiff1d(a, flows) for a in self.reroute_at[k]]
        self._drop_timers(flows)

    def link_back(self, t: float) -> None:
        """A dead link came back at t: the fluid flows waiting for a path try again once the
        routing has converged (tcp ones wait for their timers)."""
        if len(self.parked):
            self.schedule(t + self.delay, self.parked)
            self.parked = NONE

    # ------------------------------------------------------------------ a due re-route
    def split_due(self, flows: np.ndarray):
        """(first, timed out): flows re-routed for the first time since their cut, and tcp
        flows whose retransmission timer fired."""
        if not self.tcp or not len(self.timer_ids):
            return flows, NONE
        timed = np.isin(flows, self.timer_ids)
        return flows[~timed], flows[timed]

    def timeouts(self, st, timed: np.ndarray) -> np.ndarray:
        """Count one timeout for each of ``timed``; strand those past ``data_retries`` and
        return the rest (which retransmit now, with the timer doubled)."""
        if not len(timed):
            return timed
        pos = np.searchsorted(self.timer_ids, timed)
        self.timer_tries[pos] += 1
        self.timer_rto[pos] = np.minimum(self.max_rto, 2.0 * self.timer_rto[pos])
        over = self.timer_tries[pos] > self.retries
        if over.any():
            self.gave_up += int(over.sum())
            self._strand(st, timed[over])
        return timed[~over]

    def no_path(self, st, flows: np.ndarray, rtt: np.ndarray, t: float, fi: int) -> None:
        """``flows`` found no path at t (``rtt``: their RTT before, the tcp estimator's).
        They wait, or are stranded when no dead link is due to come back."""
        if not len(flows):
            return
        if not self._link_due_back(st, fi):
            self._strand(st, flows)
            return
        if not self.tcp:
            self.parked = unique_ids([self.parked, flows])
            return
        known = np.isin(flows, self.timer_ids)
        old = flows[known]
        if len(old):  # timed out again: the next timeout after the doubled RTO
            pos = np.searchsorted(self.timer_ids, old)
            self.schedule_each(t + self.timer_rto[pos], old)
        new = flows[~known]
        if len(new):  # cut: the first timeout one RTO after the cut, RTO from the RTT
            rto = np.clip(rtt[~known] + self.granularity, self.min_rto, self.max_rto)
            at = st.NF[new, K.TLAST] + rto  # stop() set TLAST to the cut
            tries = np.zeros(len(new), dtype=np.int64)
            # a re-route delay longer than the RTO: the timeouts before it found no route
            late = at <= t
            while late.any():
                tries[late] += 1
                rto[late] = np.minimum(self.max_rto, 2.0 * rto[late])
                at[late] += rto[late]
                late = at <= t
            gone = tries > self.retries
            if gone.any():
                self.gave_up += int(gone.sum())
                self._strand(st, new[gone])
                new, rto, at, tries = new[~gone], rto[~gone], at[~gone], tries[~gone]
            ids = np.concatenate([self.timer_ids, new])
            order = np.argsort(ids, kind="stable")
            self.timer_ids = ids[order]
            self.timer_tries = np.concatenate([self.timer_tries, tries])[order]
            self.timer_rto = np.concatenate([self.timer_rto, rto])[order]
            self.schedule_each(at, new)

    def resumed(self, flows: np.ndarray) -> None:
        """``flows`` found a path: no timer is running for them any more."""
        self._drop_timers(flows)

    def schedule_each(self, at: np.ndarray, flows: np.ndarray) -> None:
        for when in np.unique(at):
            self.schedule(float(when), flows[at == when])

    # ------------------------------------------------------------------ never started
    def waiting_starters(self, st, t: float, fi: int, link_back: bool) -> None:
        """At fault instant t: the transfers that became ready without a path (NOPATH) wait
        for their next try (fluid: the re-route after a dead link came back at t; tcp: their
        next SYN timeout), or are stranded when no dead link is due back."""
        ids = np.flatnonzero(st.NI[: st.n, K.STATE] == K.NOPATH)
        if not len(ids):
            return
        if not self.tcp and link_back:  # they try once the routing converged (unless a try
            # is due already, as a cut flow waits for the re-route it has)
            ids = np.setdiff1d(ids, self.start_pending)
            self.schedule(t + self.delay, ids)
            self.start_pending = unique_ids([self.start_pending, ids])
            return
        # the ones not seen yet (the others wait for a try already due)
        new = np.setdiff1d(ids, self.syn_ids if self.tcp else self.start_pending)
        if not len(new):
            return
        if not link_back and not self._link_due_back(st, fi):
            self._strand(st, new)  # the links they found no path over stay as they are
            return
        if not self.tcp:
            return  # they try after the next link that comes back
        # SYN timeouts at ready + c (2^j - 1): the ones before t found the same dead links
        ready = st.NF[new, K.TSTART]
        j = np.ones(len(new), dtype=np.int64)
        at = ready + self.conn_timeout
        late = at < t
        while late.any():  # (at doubles: a few rounds)
            j[late] += 1
            at[late] = ready[late] + self.conn_timeout * (2.0 ** j[late] - 1)
            late = at < t
        gone = j > self.syn_retries
        if gone.any():
            self.gave_up += int(gone.sum())
            self._strand(st, new[gone])
            new, j, at = new[~gone], j[~gone], at[~gone]
        ids = np.concatenate([self.syn_ids, new])
        order = np.argsort(ids, kind="stable")
        self.syn_ids = ids[order]
        self.syn_tries = np.concatenate([self.syn_tries, j - 1])[order]
        self.schedule_each(at, new)

    def starters_due(self, st, flows: np.ndarray) -> np.ndarray:
        """tcp: count the SYN timeout of each of ``flows`` (NOPATH), strand those past
        ``syn_retries``; returns the ones that try now."""
        if not self.tcp:
            self.start_pending = np.setdiff1d(self.start_pending, flows)
            return flows
        if not len(flows):
            return flows
        flows = flows[np.isin(flows, self.syn_ids)]
        pos = np.searchsorted(self.syn_ids, flows)
        self.syn_tries[pos] += 1
        over = self.syn_tries[pos] > self.syn_retries
        if over.any():
            self.gave_up += int(over.sum())
            self._strand(st, flows[over])
        return flows[~over]

    def starters_no_path(self, st, flows: np.ndarray, t: float, fi: int) -> None:
        """``flows`` (NOPATH) tried at t and found no path: the next SYN timeout (tcp), the
        next link back (fluid), or stranded when no dead link is due back."""
        if not len(flows):
            return
        if not self._link_due_back(st, fi):
            self._strand(st, flows)
            return
        if self.tcp:
            pos = np.searchsorted(self.syn_ids, flows)
            j = self.syn_tries[pos] + 1
            self.schedule_each(st.NF[flows, K.TSTART] + self.conn_timeout * (2.0 ** j - 1),
                               flows)

    def started(self, flows: np.ndarray) -> None:
        if self.tcp and len(self.syn_ids) and len(flows):
            keep = ~np.isin(self.syn_ids, flows)
            self.syn_ids, self.syn_tries = self.syn_ids[keep], self.syn_tries[keep]
        if not self.tcp and len(self.start_pending) and len(flows):
            self.start_pending = np.setdiff1d(self.start_pending, flows)

    # ------------------------------------------------------------------ helpers
    def _link_due_back(self, st, fi: int) -> bool:
        """Does a link dead now come back (up, or degraded from down) at fault index fi or
        later? (Its last event leaving it up is there.)"""
        if fi >= len(self.faults.time):
            return False
        dead = np.flatnonzero(st.factor[: len(self.last_up)] <= 0)
        return bool(np.any(self.last_up[dead] >= fi))

    def due_back(self, st, fi: int) -> int:
        """1 if a dead link is due to come back after fault index fi (isc[WAITOK])."""
        return 1 if self._link_due_back(st, fi) else 0

    def _strand(self, st, flows: np.ndarray) -> None:
        st.NI[flows, K.STATE] = K.STRANDED
        self._drop_timers(flows)
        self.started(flows)

    def _drop_timers(self, flows: np.ndarray) -> None:
        if self.tcp and len(self.timer_ids) and len(flows):
            keep = ~np.isin(self.timer_ids, flows)
            self.timer_ids = self.timer_ids[keep]
            self.timer_tries = self.timer_tries[keep]
            self.timer_rto = self.timer_rto[keep]


def unique_ids(parts) -> np.ndarray:
    return np.unique(np.concatenate(parts).astype(np.int64)) if len(parts) else NONE
