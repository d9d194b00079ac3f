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
from topo.arrays import unique

NONE = np.zeros(0, dtype=np.int64)


class _Waiting:
    """Flows waiting for a try: sorted ids, and per flow the ``columns`` given (name ->
    dtype)."""

    def __init__(self, **columns):
        self.ids = NONE
        self.col = {k: np.zeros(0, dtype=d) for k, d in columns.items()}

    def has(self, flows: np.ndarray) -> np.ndarray:
        return np.isin(flows, self.ids)

    def at(self, flows: np.ndarray) -> np.ndarray:
        """Positions of ``flows`` (all present) in the columns."""
        return np.searchsorted(self.ids, flows)

    def add(self, flows: np.ndarray, **values) -> None:
        """``flows`` (none present yet) with their column ``values``."""
        ids = np.concatenate([self.ids, flows])
        order = np.argsort(ids, kind="stable")
        self.ids = ids[order]
        for k, v in values.items():
            self.col[k] = np.concatenate([self.col[k], v])[order]

    def drop(self, flows: np.ndarray) -> None:
        if len(self.ids) and len(flows):
            keep = ~np.isin(self.ids, flows)
            self.ids = self.ids[keep]
            for k in self.col:
                self.col[k] = self.col[k][keep]


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
        # tcp: cut flows waiting on their retransmission timer: timeouts so far, current RTO
        self.timed = _Waiting(tries=np.int64, rto=np.float64)
        # transfers that became ready without a path with a try due: tcp, on their SYN timer
        # (SYN retransmissions so far); fluid, the re-route after a link came back
        self.starters = _Waiting(tries=np.int64)
        self.gave_up = 0  # tcp: connections stranded after data_retries / syn_retries
        # whether a link dead at the current fault instant comes back later (at_instant)
        self.due_back = False

    def at_instant(self, st, fi: int) -> None:
        """The faults of an instant are in place (``fi``: the index of the next one): note once
        whether a dead link is due back, which every decision of the instant reads."""
        self.due_back = self.link_due_back(st, fi)

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
        self.timed.drop(flows)

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
        if not self.tcp or not len(self.timed.ids):
            return flows, NONE
        timed = self.timed.has(flows)
        return flows[~timed], flows[timed]

    def timeouts(self, st, timed: np.ndarray) -> np.ndarray:
        """Count one timeout for each of ``timed``; strand those past ``data_retries`` and
        return the rest (which retransmit now, with the timer doubled)."""
        if not len(timed):
            return timed
        pos = self.timed.at(timed)
        tries, rto = self.timed.col["tries"], self.timed.col["rto"]
        tries[pos] += 1
        rto[pos] = np.minimum(self.max_rto, 2.0 * rto[pos])
        over = tries[pos] > self.retries
        self._give_up(st, timed[over])
        return timed[~over]

    def no_path(self, st, flows: np.ndarray, rtt: np.ndarray, t: float) -> None:
        """``flows`` found no path at t (``rtt``: their RTT before, the tcp estimator's).
        They wait, or are stranded when no dead link is due to come back."""
        if not len(flows):
            return
        if not self.due_back:
            self._strand(st, flows)
            return
        if not self.tcp:
            self.parked = unique_ids([self.parked, flows])
            return
        known = self.timed.has(flows)
        old = flows[known]
        if len(old):  # timed out again: the next timeout after the doubled RTO
            self.schedule_each(t + self.timed.col["rto"][self.timed.at(old)], old)
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
            self._give_up(st, new[gone])
            new, rto, at, tries = new[~gone], rto[~gone], at[~gone], tries[~gone]
            self.timed.add(new, tries=tries, rto=rto)
            self.schedule_each(at, new)

    def resumed(self, flows: np.ndarray) -> None:
        """``flows`` found a path: no timer is running for them any more."""
        self.timed.drop(flows)

    def schedule_each(self, at: np.ndarray, flows: np.ndarray) -> None:
        for when in unique(at):
            self.schedule(float(when), flows[at == when])

    # ------------------------------------------------------------------ never started
    def waiting_starters(self, st, t: float, link_back: bool) -> None:
        """At fault instant t: the transfers that became ready without a path (NOPATH) wait
        for their next try (fluid: the re-route after a dead link came back at t; tcp: their
        next SYN timeout), or are stranded when no dead link is due back."""
        ids = np.flatnonzero(st.NI[: st.n, K.STATE] == K.NOPATH)
        if not len(ids):
            return
        # the ones not seen yet (the others wait for a try already due, as a cut flow waits
        # for the re-route it has)
        new = np.setdiff1d(ids, self.starters.ids)
        if not self.tcp and link_back:  # they try once the routing converged
            self.schedule(t + self.delay, new)
            self.starters.add(new, tries=np.zeros(len(new), dtype=np.int64))
            return
        if not len(new):
            return
        if not link_back and not self.due_back:
            self._strand(st, new)  # the links they found no path over stay as they are
            return
        if not self.tcp:
            return  # they try after the next link that comes back
        # SYN timeouts at ready + c (2^j - 1): the ones before t found the same dead links
        ready = st.NF[new, K.TSTART]
        j = np.ones(len(new), dtype=np.int64)
        at = self._syn_at(ready, j)
        late = at < t
        while late.any():  # (at doubles: a few rounds)
            j[late] += 1
            at[late] = self._syn_at(ready[late], j[late])
            late = at < t
        gone = j > self.syn_retries
        self._give_up(st, new[gone])
        new, j, at = new[~gone], j[~gone], at[~gone]
        self.starters.add(new, tries=j - 1)
        self.schedule_each(at, new)

    def starters_due(self, st, flows: np.ndarray) -> np.ndarray:
        """tcp: count the SYN timeout of each of ``flows`` (NOPATH), strand those past
        ``syn_retries``; returns the ones that try now."""
        if not self.tcp:
            self.starters.drop(flows)  # a fluid one tries once per link back
            return flows
        if not len(flows):
            return flows
        flows = flows[self.starters.has(flows)]
        pos = self.starters.at(flows)
        tries = self.starters.col["tries"]
        tries[pos] += 1
        over = tries[pos] > self.syn_retries
        self._give_up(st, flows[over])
        return flows[~over]

    def starters_no_path(self, st, flows: np.ndarray, t: float) -> None:
        """``flows`` (NOPATH) tried at t and found no path: the next SYN timeout (tcp), the
        next link back (fluid), or stranded when no dead link is due back."""
        if not len(flows):
            return
        if not self.due_back:
            self._strand(st, flows)
            return
        if self.tcp:
            j = self.starters.col["tries"][self.starters.at(flows)] + 1
            self.schedule_each(self._syn_at(st.NF[flows, K.TSTART], j), flows)

    def started(self, flows: np.ndarray) -> None:
        self.starters.drop(flows)

    def _syn_at(self, ready: np.ndarray, j: np.ndarray) -> np.ndarray:
        """The j-th SYN timeout (j >= 1) of connections that became ready at ``ready``: each
        waits twice the one before, the first ``conn_timeout_s``."""
        return ready + self.conn_timeout * (2.0 ** j - 1)

    # ------------------------------------------------------------------ helpers
    def link_due_back(self, st, fi: int) -> bool:
        """Does a link dead now come back (up, or degraded from down) at fault index fi or
        later? (Its last event leaving it up is there.)"""
        if fi >= len(self.faults.time):
            return False
        dead = np.flatnonzero(st.factor[: len(self.last_up)] <= 0)
        return bool(np.any(self.last_up[dead] >= fi))

    def _give_up(self, st, flows: np.ndarray) -> None:
        """tcp: ``flows`` ran out of retries."""
        self.gave_up += len(flows)
        self._strand(st, flows)

    def _strand(self, st, flows: np.ndarray) -> None:
        st.NI[flows, K.STATE] = K.STRANDED
        self.timed.drop(flows)
        self.starters.drop(flows)


def unique_ids(parts) -> np.ndarray:
    return unique(np.concatenate(parts).astype(np.int64)) if len(parts) else NONE
