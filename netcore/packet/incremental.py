"""Incremental driving of the packet engine, for co-simulation (docs/packet_engine.md).

A caller adds transfers while the simulation runs and advances it to the next completion:

    inc = PacketIncremental(topology, routing, faults, transport="tcp")
    ids = inc.add_transfers(src, dst, size, start_s=0.0)
    while inc.pending():
        t, done = inc.advance(t_limit)      # stops at the first completion time stamp
        ...inc.add_transfers(..., start_s=t) for what `done` releases...
    res = inc.result()

The C++ core runs every event; Python is entered once per `advance` call (plus once per
reroute), never per event. Transfers added at the completion time of the ones they follow run
exactly as the same DAG handed to `run` in one batch (tests/test_packet_incremental.py):
`advance` returns after every event of that time stamp has run, and new transfers get their
start events with the next sequence numbers, as the DAG's release of a child would.
"""
from __future__ import annotations

import time

import numpy as np

from netcore.packet import limits, plane_split
from netcore.packet.engine import PS, _collect, _config, per_hop_paths, single_path, two_way
from netcore.packet.options import check_options
from netcore.incremental_input import check_new_transfers
from topo.errors import InputError

_NEVER = (1 << 63) - 1


def _ps_scalar(seconds: float) -> int:
    return int(round(float(seconds) * PS))


def _on_the_clock(start_s, now_ps: int) -> np.ndarray:
    """Start times that round to the clock's picosecond or later, raised to at least now() in
    seconds. The clock stops on whole picoseconds: ``advance(t)`` to t = 5.27 * 1e-6 s
    (5.2699999999999995e-06) stops at 5,270,000 ps, whose seconds (5.27e-06) are one ulp
    above t, so a caller sending at the t it asked for (Session.run_until(t), a callback at t)
    was refused as starting before now(). Starts that round below the clock stay as given
    (check_new_transfers refuses them); non-numbers are left for it to name."""
    try:
        s = np.array(np.asarray(start_s, dtype=np.float64), dtype=np.float64, ndmin=1)
    except (TypeError, ValueError):
        return start_s
    with np.errstate(invalid="ignore", over="ignore"):
        on = np.isfinite(s) & (np.rint(s * PS) >= now_ps)
    return np.where(on, np.maximum(s, now_ps / PS), s)


class _Columns:
    """Arrays of one length that grow by appending rows. Capacity doubles, so adding k rows
    costs O(k) amortised: a np.concatenate per add_transfers copied every row added before, a
    cost per send growing with the transfers already sent. ``cols.name`` is a view of the rows
    so far (writes to it stay)."""

    def __init__(self, **dtypes):
        self.n = 0
        self._a = {name: np.zeros(64, dtype) for name, dtype in dtypes.items()}

    def append(self, **rows):
        end = self.n + len(next(iter(rows.values())))
        for name, a in self._a.items():
            if end > len(a):
                a = self._a[name] = np.concatenate([a[: self.n],
                                                    np.zeros(max(end, 2 * len(a)) - self.n,
                                                             a.dtype)])
            a[self.n: end] = rows[name]
        self.n = end

    def __getattr__(self, name):
        try:
            return self.__dict__["_a"][name][: self.__dict__["n"]]
        except KeyError:
            raise AttributeError(name) from None


def _core(fn, *args):
    """A call into the core, with its range guards (clock, event numbers) as PacketLimit."""
    try:
        return fn(*args)
    except OverflowError as e:
        raise (limits.from_core(e) or e) from None


class PacketIncremental:
    """The packet engine driven step by step: `add_transfers`, `advance`, `now`, `pending`,
    `result`. Options are the packet engine's (`netcore.packet.options`)."""

    def __init__(self, topology, routing, faults=None, seed: int = 0, **options):
        from netcore import _packet

        self.topology = topology
        self.routing = single_path(routing)
        self.opts = check_options(options)
        # a fabric a single-path policy stripes over (fullflat): every transfer of at least
        # `planes` bytes becomes one connection per plane, as `run` splits it
        # (plane_split.py); the caller sees its own transfers only
        self._planes = int(getattr(routing, "planes", 0) or 0)
        self._striped = routing if self._planes >= 2 and \
            not self.opts["warm_connections"] else None
        limits.check_fabric(topology, self.opts)
        limits.check_faults(topology, faults)
        policy = getattr(routing, "policy", "ecmp")
        self.per_hop = policy in ("spray", "adaptive")
        cfg = _config(self.opts, self.per_hop, policy == "adaptive")
        ptr, _nbr, adj_link = topology.adjacency
        nf = len(faults) if faults is not None else 0
        e32, e64 = np.zeros(0, np.int32), np.zeros(0, np.int64)
        self._sim = _packet.Sim(
            cfg, int(topology.n_hosts), bool(topology.hosts_forward),
            int(seed) & ((1 << 64) - 1), topology.dlink_src, topology.dlink_dst,
            topology.dlink_bw, np.rint(np.asarray(topology.dlink_lat) * PS).astype(np.int64),
            ptr.astype(np.int64), adj_link.astype(np.int32),
            np.zeros(0, np.int8), e32, e32, e64, e64, e64, np.zeros(1, np.int64), e64, e32,
            np.rint(np.asarray(faults.time) * PS).astype(np.int64) if nf else e64,
            faults.dlink.astype(np.int32) if nf else e32,
            faults.kind.astype(np.int8) if nf else np.zeros(0, np.int8),
            faults.factor if nf else np.zeros(0))
        self._sim.log_done = True
        # per core transfer: ends, routing key, plane (-1 not split), the caller's transfer id
        self._core = _Columns(src=np.int32, dst=np.int32, flow=np.int64, plane=np.int64,
                              owner=np.int64)
        self._user = _Columns(left=np.int64)  # per caller's transfer: pieces not done yet
        # pending() from counts, not the core's scan of every transfer added (a session
        # calling it once per step went quadratic): core transfers not finished nor stranded,
        # and the caller's transfers with a piece not finished. The core strands a transfer
        # only when it becomes ready without a path, when a re-route leaves a rate-based
        # connection without one, when tcp gives up, or in a deadlock; after any of these
        # _core_pending is taken again from the core (_count_pending)
        self._core_pending = 0
        self._user_left = 0
        self._no_path = np.zeros(0, np.int64)  # given no path, perhaps not ready yet
        self._recount = False  # a re-route ran: the core may have stranded some
        self._gave_up = 0  # sim.tcp_gave_up when last counted
        self._drained = False  # result() ran the core to the end: its scan from then on
        self._alive = None  # None until a link fails: routing over the full fabric
        self._reroutes = 0
        self._route_s = 0.0
        self._wall = 0.0
        if self.per_hop:
            # per-packet next hops need hop distances to every host (any may become an end)
            hosts = np.arange(topology.n_hosts, dtype=np.int32)
            self._rows = np.full(topology.n_nodes, -1, dtype=np.int32)
            self._rows[hosts] = np.arange(len(hosts), dtype=np.int32)
            self._hosts = hosts
            self._set_distances(None)

    # ------------------------------------------------------------------ routing
    def _set_distances(self, alive):
        dist = np.ascontiguousarray(self.routing.distances(self._hosts, alive=alive), np.int32)
        self._sim.set_distances(self._rows, dist.ravel(), len(self._hosts))
        self._dist = dist

    def _paths(self, src, dst, flow, alive, plane=None):
        if self.per_hop:
            reach = self._dist[self._rows[dst], src] >= 0
            return per_hop_paths(self.routing, self.topology, src, dst, flow, alive, reach)
        alive = two_way(alive)  # a path carries the connection both ways
        if self._striped is not None:
            p = plane_split.paths(self._striped, src, dst, flow, plane, alive)
        else:
            p = self.routing.paths(src, dst, flow_id=flow, alive=alive)
        return (np.asarray(p.ptr, np.int64), np.asarray(p.link, np.int32),
                np.asarray(p.reachable, bool))

    def _reroute(self):
        r0 = time.perf_counter()
        alive = self._sim.alive().astype(bool)
        self._alive = alive
        if self.per_hop:
            self._set_distances(alive)
        nodes = self._sim.dead_transfers().astype(np.int32)
        c = self._core
        ptr, links, reach = self._paths(c.src[nodes], c.dst[nodes], c.flow[nodes], alive,
                                        c.plane[nodes])
        self._sim.set_paths(nodes, ptr, links, reach.astype(np.uint8))
        self._recount = True
        self._no_path = np.concatenate([self._no_path, nodes[~reach].astype(np.int64)])
        self._route_s += time.perf_counter() - r0
        self._reroutes += 1

    # ------------------------------------------------------------------ API
    def now(self) -> float:
        """Simulated time reached, in seconds."""
        return float(self._sim.now) / PS

    def pending(self) -> int:
        """Transfers added and neither finished nor stranded (with plane pieces: transfers with
        a piece still running)."""
        scan = self._drained or self._sim.deadlock_at >= 0
        # scan: the core's own count, after it finished transfers without reporting them
        # (result()) or after a deadlock's strandings (a later deadlock may leave no trace)
        core = int(self._sim.pending()) if scan else self._count_pending()
        if self._striped is None or not core:
            return core
        return min(core, int(np.count_nonzero(self._user.left)) if scan else self._user_left)

    def _count_pending(self) -> int:
        """Core transfers not finished nor stranded: the running count, taken again from the
        core's scan after something that may have stranded transfers."""
        sim = self._sim
        if self._recount or len(self._no_path) or sim.tcp_gave_up != self._gave_up:
            self._core_pending = int(sim.pending())
            self._recount = False
            self._gave_up = sim.tcp_gave_up
            if len(self._no_path):
                # once ready they are stranded or under way (then only a signal above strands
                # them): only those not ready yet may still strand unseen
                self._no_path = self._no_path[sim.node_start()[self._no_path] < 0]
        return self._core_pending

    def add_transfers(self, src, dst, size, start_s=None, flow_ids=None) -> np.ndarray:
        """Adds transfers src[i] -> dst[i] of size[i] bytes that become ready at start_s
        (scalar or per transfer, seconds, >= now(); default now()). `flow_ids` (optional) is
        the key routing hashes for ECMP-like policies (default: the returned ids, as `run`
        uses the schedule's node ids). Returns the transfer ids (0, 1, ... in order of adding)."""
        now = int(self._sim.now)
        if start_s is not None:
            start_s = _on_the_clock(start_s, now)
        src, dst, size, start = check_new_transfers(self.topology.n_hosts, now / PS, src, dst,
                                                    size, start_s)
        n = len(src)
        limits.check_segments(self.topology, src, dst, np.asarray(size, np.int64),
                              np.arange(n), self.opts)
        # picoseconds; a start at now() must stay exactly now (no rounding below it)
        st = np.maximum(np.rint(start * PS).astype(np.int64), now)
        first_user = self._user.n
        ids = np.arange(first_user, first_user + n, dtype=np.int64)
        flow = ids if flow_ids is None else np.broadcast_to(
            np.asarray(flow_ids, np.int64), (n,)).copy()
        size = np.asarray(size, np.int64)
        owner, plane, left = ids, np.full(n, -1, np.int64), np.ones(n, np.int64)
        if self._striped is not None:
            # the transfers keep plane 0 and their pieces follow them, as `run` orders them
            cut = (src != dst) & (size >= self._planes)
            size, orig, pplane, psize = plane_split.pieces_of(size, self._planes, cut)
            plane = np.where(cut, 0, -1)
            left = np.where(cut, self._planes, 1)
            src, dst = np.concatenate([src, src[orig]]), np.concatenate([dst, dst[orig]])
            size, st = np.concatenate([size, psize]), np.concatenate([st, st[orig]])
            flow, owner = np.concatenate([flow, flow[orig]]), np.concatenate([ids, ids[orig]])
            plane = np.concatenate([plane, pplane])
        first = self._core.n
        if first + len(src) > limits.MAX_NODES:
            raise limits.PacketLimit(f"{first + len(src):,} transfers in all: the packet engine "
                                     f"numbers at most {limits.MAX_NODES:,} (int32)")
        src32, dst32 = src.astype(np.int32), dst.astype(np.int32)
        ptr, links, reach = self._paths(src32, dst32, flow, self._alive, plane)
        got = _core(self._sim.add_transfers, src32, dst32, size, st, ptr, links,
                    reach.astype(np.uint8))
        assert got == first
        self._core.append(src=src32, dst=dst32, flow=flow, plane=plane, owner=owner)
        self._user.append(left=left)
        self._core_pending += len(src32)
        self._user_left += n
        if not reach.all():  # they strand when they become ready
            self._no_path = np.concatenate([self._no_path, first + np.flatnonzero(~reach)])
        return ids

    def advance(self, t_limit: float | None = None):
        """Runs events until t_limit (seconds; None: no limit) or until the first time stamp at
        which transfers complete, whichever is first. Returns (t, ids): that time stamp and every
        transfer completing at it (in completion order), or (t_limit, empty) if none did."""
        if t_limit is not None and not float(t_limit) <= float("inf"):
            raise InputError(f"t_limit must be a time in seconds; got {t_limit!r}")
        if t_limit is None or float(t_limit) == float("inf"):
            limit = _NEVER
        else:
            limit = min(_ps_scalar(t_limit), _NEVER)  # beyond the clock: no limit
            if limit < int(self._sim.now):
                raise InputError(f"t_limit must be >= now() = {self.now()!r} s; got {t_limit!r}")
        t0 = time.perf_counter()
        try:
            while True:
                code = _core(self._sim.advance, limit, True)
                if code == 1:  # a link failed reroute_delay ago: new paths over what survives
                    self._reroute()
                    continue
                if code == 2:
                    core_ids = self._sim.take_done().astype(np.int64)
                    self._core_pending -= len(core_ids)
                    done = self._finished(core_ids)
                    self._user_left -= len(done)
                    if len(done):
                        return float(self._sim.now) / PS, done
                    continue  # only pieces of unfinished transfers: on to the next time

                t = self.now() if t_limit is None else float(t_limit)
                return t, np.zeros(0, np.int64)
        finally:
            self._wall += time.perf_counter() - t0

    def _finished(self, core_ids: np.ndarray) -> np.ndarray:
        """The caller's transfers whose last piece is among ``core_ids`` (in that order)."""
        owners = self._core.owner[core_ids]
        left = self._user.left
        np.subtract.at(left, owners, 1)
        last = left[owners] == 0
        # a transfer once, at its last piece
        _, first = np.unique(owners[last][::-1], return_index=True)
        keep = np.zeros(int(last.sum()), dtype=bool)
        keep[int(last.sum()) - 1 - first] = True
        return owners[last][keep]

    def result(self, run_out: bool = True):
        """The `Result` over every transfer added.

        At the end (every transfer finished or stranded, with ``run_out``; or nothing left
        for the core to run) the packets still in flight, the ACKs of the last segments, run
        out first, as `run` runs them, and the statistics close at the last activity: the
        batch run's figures. Otherwise no event runs: a look at now(), after which the run
        goes on as if nobody had looked (unfinished transfers have no end and count as
        stranded; link figures as closed at now(), packets that started serialising by then
        counted whole). A session looks with ``run_out=False``: running the last ACKs out
        would take the engine's clock past the session's now()."""
        sim = self._sim
        if not (sim.idle() or (run_out and self.pending() == 0)):
            return self._fold(_collect(sim, self.topology, None, self.opts, self._wall,
                                       self._route_s, self._reroutes, upto=int(sim.now)))
        t0 = time.perf_counter()
        self._drained = True
        while _core(sim.run) == 1:
            self._reroute()
        self._wall += time.perf_counter() - t0
        sim.finish()
        return self._fold(_collect(sim, self.topology, None, self.opts, self._wall,
                                   self._route_s, self._reroutes))

    def _fold(self, res):
        """The caller's transfers: plane pieces folded back into the transfers they cut."""
        if self._striped is None:
            return res
        return plane_split.fold_back(res, self._core.owner, self._user.n)
