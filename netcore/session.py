"""A network session another simulator drives call by call (the plugin role, docs/session.md).

In the spirit of ASTRA-sim's network API (``sim_send`` / ``sim_recv`` / ``sim_schedule`` /
``sim_get_time``):

    s = Session(topology, engine="flow", routing="ecmp")
    def done(tid):                      # runs at the simulated time the bytes have arrived
        s.schedule(5e-6, lambda: s.send(1, 2, 1 << 20))   # 5 us of compute, then send on
    s.send(0, 1, 1 << 20, tag="act", on_done=done)
    s.run()
    print(s.now(), s.result().makespan)

Callbacks (``on_done(transfer_id)`` and ``schedule``d ones, no arguments) run at their
simulated time, in (time, insertion order): the order in which ``send``/``schedule`` were
called. They may call ``send`` and ``schedule`` (a send from a callback starts at that instant,
in the same batch as the events that triggered it, so a DAG driven through a session runs as
the same DAG given to ``simulate``). Batch mode (``netcore.simulate`` with a whole Schedule)
remains the fast path: a session pays a Python round trip per completion instant.
"""
from __future__ import annotations

import heapq
import math
from typing import Callable

import numpy as np

from netcore.packet.limits import PS, TIME_LIMIT_PS, TIME_LIMIT_TEXT
from netcore.sizes import MAX_BYTES
from topo.errors import InputError, is_finite

ENGINES = ("flow", "packet")


def _incremental(engine: str):
    if engine == "flow":
        from netcore.flow.incremental import FlowIncremental

        return FlowIncremental
    if engine == "packet":
        from netcore.api import EngineUnavailable

        try:
            from netcore.packet.incremental import PacketIncremental
        except ModuleNotFoundError as e:
            raise EngineUnavailable(f"engine = 'packet' has no incremental driver in this build "
                                    f"({e})") from None
        return PacketIncremental
    raise InputError(f"engine = {engine!r}: expected one of {', '.join(ENGINES)}")


class Session:
    """Drive ``engine`` ("flow" | "packet") on ``topology`` with sends and timed callbacks.

    ``routing`` is a policy name or a ``topo.routing.Routing``; ``faults`` a
    ``topo.faults.LinkFaults``; ``options`` are the engine's options (``transport``, ``mtu``,
    ...), checked by the engine."""

    def __init__(self, topology, engine: str = "flow", routing="ecmp", faults=None,
                 seed: int = 0, **options):
        from topo.routing import Routing

        cls = _incremental(engine)
        if isinstance(routing, str):
            routing = Routing(topology, routing, seed=seed)
        self.engine = engine
        self.topology = topology
        self._eng = cls(topology, routing, faults, seed=seed, **options)
        self._q: list = []  # (time, seq, callback, arg)
        self._seq = 0
        self._on_done: dict[int, tuple[int, Callable]] = {}
        self._tags: dict[int, object] = {}
        self._now = 0.0
        self._buf: list[tuple[int, int, int, int]] = []
        self._n_sent = 0
        self._in_loop = False  # run()/run_until() is running (callbacks may not call them)
        self.calls = {"send": 0, "schedule": 0, "callbacks": 0, "advance": 0}

    def _flush(self):
        if self._buf:
            src, dst, size, key = (np.array(c, dtype=np.int64) for c in zip(*self._buf))
            first = self._n_sent - len(self._buf)
            self._buf = []
            ids = self._eng.add_transfers(src, dst, size, start_s=self._now, flow_ids=key)
            if len(ids) and int(ids[0]) != first:
                raise RuntimeError(f"engine numbered transfers from {int(ids[0])}, "
                                   f"expected {first}")

    # ------------------------------------------------------------------ API
    def now(self) -> float:
        """Current simulated time in seconds (ASTRA-sim ``sim_get_time``)."""
        return self._now

    def send(self, src: int, dst: int, nbytes: int, tag=None,
             on_done: Callable[[int], None] | None = None, flow_key: int | None = None) -> int:
        """Start a transfer of ``nbytes`` from host ``src`` to host ``dst`` now; returns its
        id. ``on_done(id)`` runs when the last byte has arrived (``sim_send`` + the matching
        ``sim_recv``'s handler). ``flow_key`` (optional, default the id) is what hash-based
        routing (ecmp) hashes: pass a schedule's node id to reproduce its batch paths."""
        for name, v in (("src", src), ("dst", dst), ("nbytes", nbytes)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                raise InputError(f"send {name} = {v!r}: expected an integer")
        src, dst, nbytes = int(src), int(dst), int(nbytes)
        h = self.topology.n_hosts
        if not (0 <= src < h and 0 <= dst < h):
            raise InputError(f"send src = {src}, dst = {dst}: expected host ids in [0, {h})")
        if src == dst:
            raise InputError(f"send src = dst = {src}: a transfer's ends must differ")
        if nbytes < 0:
            raise InputError(f"send nbytes = {nbytes}: expected bytes >= 0")
        if nbytes > MAX_BYTES:  # an OverflowError at the next run(), far from the send
            raise InputError(f"send nbytes = {nbytes}: larger than the {MAX_BYTES} bytes an "
                             f"int64 holds")
        if on_done is not None and not callable(on_done):
            raise InputError(f"send on_done = {on_done!r}: expected a callable or None")
        if flow_key is not None and (not isinstance(flow_key, (int, np.integer)) or
                                     isinstance(flow_key, bool)):
            raise InputError(f"send flow_key = {flow_key!r}: expected an integer or None")
        if not self._now * PS < TIME_LIMIT_PS:  # run_until() took the clock past its end
            raise InputError(f"send at now() = {self._now!r} s: beyond the engines' clock, "
                             f"which ends at {TIME_LIMIT_TEXT}")
        # sends of one instant reach the engine together, in one vectorised call, before it
        # runs again (routing and set-up per call cost far more than per transfer); the engine
        # numbers transfers 0, 1, ... in order of adding, so the id is known now
        tid = self._n_sent
        self._n_sent += 1
        self._buf.append((src, dst, nbytes, tid if flow_key is None else int(flow_key)))
        if tag is not None:
            self._tags[tid] = tag
        if on_done is not None:
            self._on_done[tid] = (self._seq, on_done)
        self._seq += 1
        self.calls["send"] += 1
        return tid

    def schedule(self, delay: float, callback: Callable[[], None]) -> None:
        """Run ``callback()`` ``delay`` seconds from now (``sim_schedule``)."""
        if isinstance(delay, bool) or not isinstance(delay, (int, float, np.integer,
                                                             np.floating)) or \
                not is_finite(delay) or delay < 0:
            raise InputError(f"schedule delay = {delay!r}: expected seconds >= 0")
        self._push(self._now + float(delay), callback, f"schedule delay = {delay!r}")

    def schedule_at(self, t: float, callback: Callable[[], None]) -> None:
        """Run ``callback()`` at the absolute time ``t`` (seconds, >= now()). A driver that
        replays timestamps gets them exactly: ``schedule(t - now(), cb)`` cannot always land
        on t in floating point (8.000000000000001e-06 + 4.2e-05 is 4.9999999999999996e-05,
        and no delay from there gives 5e-05)."""
        if isinstance(t, bool) or not isinstance(t, (int, float, np.integer, np.floating)) or \
                not is_finite(t) or t < self._now:
            raise InputError(f"schedule_at t = {t!r}: expected seconds >= now() = "
                             f"{self._now!r}")
        self._push(float(t), callback, f"schedule_at t = {t!r}")

    def _push(self, at: float, callback, what: str) -> None:
        if not callable(callback):
            raise InputError(f"schedule callback = {callback!r}: expected a callable")
        if not at * PS < TIME_LIMIT_PS:
            # past it float64 seconds no longer resolve a transfer's duration: a send there
            # took no time at all (flow engine), silently
            raise InputError(f"{what}: the callback would run at {at!r} s, beyond the "
                             f"engines' clock, which ends at {TIME_LIMIT_TEXT}")
        heapq.heappush(self._q, (at, self._seq, callback, None))
        self._seq += 1
        self.calls["schedule"] += 1

    def tag(self, tid: int):
        """The tag given to ``send`` for transfer ``tid`` (None if none)."""
        return self._tags.get(int(tid))

    def pending(self) -> int:
        """Transfers in the network plus callbacks not yet run."""
        return int(self._eng.pending()) + len(self._buf) + len(self._q)

    def run_until(self, t: float) -> float:
        """Advance to time ``t`` (running everything due at or before ``t``); returns now()."""
        t = float(t)
        if not (t >= self._now):
            raise InputError(f"run_until t = {t!r}: must be >= now() = {self._now!r}")
        self._run(t)
        return self._now

    def run(self) -> float:
        """Run until no transfer is in flight and no callback is queued; returns now()."""
        self._run(math.inf)
        return self._now

    def result(self):
        """The engine's ``Result`` over every transfer sent (ids are the send ids). Before the
        end it is a look at now() that runs nothing (the packet engine's last ACKs included),
        so the run goes on exactly as if nobody had looked."""
        self._flush()
        return self._eng.result(run_out=False)

    # ------------------------------------------------------------------ loop
    def _run(self, t_end: float):
        if self._in_loop:
            # a nested loop ran every later event inside the callback, which then went on at
            # a later time than the one it was called at (its sends started there)
            raise InputError("run() / run_until() called from a callback: callbacks run "
                             "inside the session's loop; send or schedule and return instead")
        self._in_loop = True
        try:
            self._loop(t_end)
        finally:
            self._in_loop = False

    def _loop(self, t_end: float):
        q = self._q
        eng = self._eng
        while True:
            t_cb = q[0][0] if q else math.inf
            lim = min(t_cb, t_end)
            self._flush()
            self.calls["advance"] += 1
            t, ids = eng.advance(None if lim == math.inf else lim)
            if lim == math.inf and len(ids) == 0:
                # nothing in flight and nothing queued: the clock is the engine's, which may
                # have run past the last completion (a fault stranding the last transfer; the
                # packet engine's last ACKs), else the next send was refused as in the past
                if t > self._now:
                    self._now = t
                return
            if t > self._now:
                self._now = t
            for tid in ids.tolist():
                cb = self._on_done.pop(tid, None)
                if cb is not None:
                    heapq.heappush(q, (t, cb[0], cb[1], tid))
            # every callback due by now, in (time, insertion order); ones they add for this
            # same instant (schedule(0, ...)) run in this loop too
            while q and q[0][0] <= self._now:
                _, _, fn, arg = heapq.heappop(q)
                self.calls["callbacks"] += 1
                if arg is None:
                    fn()
                else:
                    fn(arg)
            if self._now >= t_end:
                self._now = t_end
                return
