"""Write a Schedule as a Chakra execution trace: one ``<prefix>.<rank>.et`` file per rank.

Mapping (the inverse of chakra_to_schedule for point-to-point schedules):

* TRANSFER i (s -> d, b bytes) -> a ``COMM_SEND_NODE`` on rank s (``comm_dst = d``) and a
  ``COMM_RECV_NODE`` on rank d (``comm_src = s``), both with ``comm_size = b`` and
  ``comm_tag = i`` (the schedule node index, so pairing back is exact);
* COMPUTE / DELAY on rank r -> a ``COMP_NODE`` on rank r with ``duration_micros`` (rounded, what
  Chakra tools read) and the netcosim attribute ``duration_s`` (exact double, what netcosim
  reads first); a DELAY also carries ``netcosim_kind = "delay"``;
* a dependency of node i on node p becomes a ``data_deps`` entry on each of i's per-rank nodes
  for which p has a node on the same rank; when p is on a transfer's receiver but not its
  sender, also a ``netcosim_rank_deps`` entry on the send (below), as eager reading lets only
  the send's dependencies hold the data back (a training step's all-reduce transfer read back
  started at 0 instead of after its ``sync`` node). Chakra dependencies cannot cross files, so
  an edge between nodes with no rank in common (a transfer 0->1 waiting for a transfer 2->3, a
  protocol's per-step latency on the receiver waiting for the sender's throughput-cap delay)
  goes into the netcosim attribute ``netcosim_rank_deps`` of i's first node (its send for a
  transfer): an int64 list of (rank, node id) pairs naming p's first node. netcosim reads it
  back; other Chakra tools ignore it, so one warning counts such edges. Dropping them made a
  read-back LL double-binary-tree all-reduce 57 % faster than the schedule written;
* a transfer whose routing hash key is not its connection's (a flow of ``kind = "flows"``
  hashes by its node id) carries it in ``netcosim_route_key`` on both sides, so ECMP routes it
  as before (read back by connection, three flows on a leaf-spine took 898.8 us, not 1346.2);
* a node's earliest start (``start[i] > 0``, e.g. a flow's ``start_us``) becomes a ``COMP_NODE``
  ``start_<i>`` (a delay of that many seconds from time 0) on i's rank that i depends on:
  the node then starts at max(start, its parents' ends), as in the schedule. (Unwritten, a
  flow starting at 50 us ran from 0.)

Node ids are per rank, 0, 1, 2, ... in a topological order of the schedule (parents are written
before children). Node id 0 is therefore absent on the wire (proto3 does not write default
values), as in real traces.
"""
from __future__ import annotations

import gzip
import re
import warnings
from pathlib import Path

import numpy as np

from netcore.schedule import DELAY, TRANSFER, Schedule, connection_keys
from netcosim.interop import chakra_pb2 as pb
from netcosim.interop.chakra_reader import frame
from topo.errors import InputError

SCHEMA_VERSION = "0.0.4"  # Chakra's GlobalMetadata.version for this node schema


def _attr_int(name: str, v: int) -> pb.AttributeProto:
    return pb.AttributeProto(name=name, int64_val=int(v))


# The attribute holding a node's dependencies on nodes of other ranks' files: (rank, node id)
# pairs, flattened (chakra_to_schedule reads it).
RANK_DEPS = "netcosim_rank_deps"


# The attribute holding a transfer's routing hash key (ECMP, valiant) when it is not the one
# of its connection (chakra_to_schedule keys transfers by connection otherwise).
ROUTE_KEY = "netcosim_route_key"


def _rank_deps(pairs: list) -> pb.AttributeProto:
    return pb.AttributeProto(name=RANK_DEPS, int64_list=pb.Int64List(values=pairs))


def _starts_as_delays(s: Schedule):
    """``s`` with every earliest start (``start[i] > 0``) made a DELAY node of that duration
    (no parents, on i's rank, appended after the others) that i depends on, and ``start``
    zero; the delay ends at exactly ``start[i]``, so i starts when it did. Returns (schedule,
    held) where held[j] is the node delay n + j holds back (None when nothing starts late).
    Node indices below n are unchanged (they are the comm_tags)."""
    late = np.flatnonzero(s.start > 0)
    if not late.size:
        return s, None
    n, k = s.n, late.size
    counts = np.diff(s.dep_ptr)
    add = np.zeros(n, dtype=np.int64)
    add[late] = 1
    dep_ptr = np.zeros(n + k + 1, dtype=np.int64)
    np.cumsum(np.concatenate([counts + add, np.zeros(k, dtype=np.int64)]), out=dep_ptr[1:])
    dep_idx = np.empty(int(dep_ptr[-1]), dtype=np.int64)
    owner = np.repeat(np.arange(n, dtype=np.int64), counts)
    dep_idx[dep_ptr[owner] + (np.arange(len(owner)) - s.dep_ptr[owner])] = s.dep_idx
    dep_idx[dep_ptr[late] + counts[late]] = n + np.arange(k)
    out = Schedule(kind=np.concatenate([s.kind, np.full(k, DELAY)]),
                   src=np.concatenate([s.src, s.src[late]]),
                   dst=np.concatenate([s.dst, np.full(k, -1)]),
                   size=np.concatenate([s.size, np.zeros(k, dtype=np.int64)]),
                   duration=np.concatenate([s.duration, s.start[late]]),
                   start=np.zeros(n + k), dep_ptr=dep_ptr, dep_idx=dep_idx)
    return out, late


def _events(s: Schedule, n_ranks: int):
    """The per-rank nodes every schedule node becomes, as arrays in writing order: a transfer
    is a send on its source then a receive on its destination, anything else one node on its
    rank; schedule nodes go in topological order (parents before children). Returns
    (node, side, rank, nid, start) where nid is the per-rank node id and start[i] the first
    event of schedule node i."""
    order = s.topological_order()
    is_t = s.kind[order] == TRANSFER
    cnt = np.where(is_t, 2, 1)
    node = np.repeat(order, cnt)
    side = np.zeros(len(node), dtype=np.int64)
    first = np.concatenate([[0], np.cumsum(cnt)[:-1]])
    side[first[is_t] + 1] = 1
    src = s.src[node].astype(np.int64)
    rank = np.where(side == 1, s.dst[node], np.where(src < 0, 0, src)).astype(np.int64)
    # per-rank ids 0, 1, 2, ... in writing order
    by_rank = np.argsort(rank, kind="stable")
    group_start = np.searchsorted(rank[by_rank], np.arange(n_ranks))
    nid = np.empty(len(node), dtype=np.int64)
    nid[by_rank] = np.arange(len(node)) - group_start[rank[by_rank]]
    start = np.empty(s.n, dtype=np.int64)
    start[order] = first
    return node, side, rank, nid, start, np.count_nonzero((src < 0) & (side == 0) &
                                                          (s.kind[node] != TRANSFER))


def _dependencies(s: Schedule, node, rank, nid, start):
    """CSR (ptr over events, parent per-rank ids) of the data_deps of every event; CSR (xptr,
    xdep) of the dependencies the child's first event (the send of a transfer, which both p2p
    semantics make the transfer's entry) cannot name in data_deps because the parent has no
    event on its rank, as flattened (rank, node id) pairs of the parent's first event (the
    send of a transfer, whose exit is the transfer under both semantics); and how many of
    those edges join nodes with no rank in common and how many make a transfer wait for a
    node only on its receiver (in data_deps on the receive, which eager reading does not let
    hold the transfer back)."""
    n_ev = len(node)
    R = int(rank.max()) + 1 if n_ev else 1
    ch = np.repeat(np.arange(s.n, dtype=np.int64), np.diff(s.dep_ptr))
    pa = s.dep_idx.astype(np.int64)
    n_events = np.where(s.kind == TRANSFER, 2, 1)
    # every (edge, event of the child): does the parent have an event on that rank?
    k = n_events[ch]
    e_edge = np.repeat(np.arange(len(ch)), k)
    e_ev = start[ch[e_edge]] + (np.arange(len(e_edge)) - np.repeat(np.cumsum(k) - k, k))
    key = node * R + rank  # unique per event
    sk = np.argsort(key, kind="stable")
    want = pa[e_edge] * R + rank[e_ev]
    at = np.minimum(np.searchsorted(key[sk], want), max(n_ev - 1, 0))
    hit = (key[sk][at] == want) if n_ev else np.zeros(0, bool)
    found = np.zeros(len(ch), dtype=bool)  # on some event of the child
    found[e_edge[hit]] = True
    on_first = np.zeros(len(ch), dtype=bool)  # on its first event
    on_first[e_edge[hit & (e_ev == start[ch[e_edge]])]] = True
    # edges the first event needs in netcosim_rank_deps, once per distinct (child, parent),
    # in the schedule's edge order
    need = ~on_first
    key = ch[need] * max(s.n, 1) + pa[need]
    _, first = np.unique(key, return_index=True)
    first.sort()
    x_ch, x_pa = ch[need][first], pa[need][first]
    crossing = int(np.count_nonzero(~found[need][first]))
    ev, dep = e_ev[hit], nid[sk][at][hit]
    o = np.argsort(ev, kind="stable")  # per event, parents in the schedule's edge order
    ptr = np.zeros(n_ev + 1, dtype=np.int64)
    np.cumsum(np.bincount(ev, minlength=n_ev), out=ptr[1:])
    x_ev = start[x_ch]
    xo = np.argsort(x_ev, kind="stable")
    p_ev = start[x_pa[xo]]
    xdep = np.stack([rank[p_ev], nid[p_ev]], axis=1).ravel()
    xptr = np.zeros(n_ev + 1, dtype=np.int64)
    np.cumsum(2 * np.bincount(x_ev, minlength=n_ev), out=xptr[1:])
    return ptr, dep[o], xptr, xdep, crossing, len(x_ch) - crossing


def schedule_to_traces(schedule: Schedule, n_ranks: int | None = None) -> dict[int, list]:
    """rank -> [GlobalMetadata, Node, ...] (messages, not yet framed).

    Event numbering and dependencies are array work; only the protobuf messages themselves are
    made one per event."""
    if schedule.has_members or (schedule.steps[schedule.kind == TRANSFER] > 1).any():
        # a node standing for a member set or serial steps would be written as one transfer
        # of its first member (a 128-host ring all-reduce of 1 MiB: 4.2 MB of 533 MB)
        raise InputError(f"Chakra trace: the schedule is in its scalable form ("
                         f"{schedule.n_transfers:,} transfer nodes standing for "
                         f"{schedule.n_member_transfers:,} transfers); build it with "
                         f"network_detail = \"full\" (Scenario.with_full_detail())")
    s, held = _starts_as_delays(schedule)
    n0 = schedule.n
    ranks_used = np.concatenate([s.src[s.src >= 0], s.dst[(s.kind == TRANSFER) & (s.dst >= 0)]])
    hi = int(ranks_used.max()) + 1 if ranks_used.size else 1
    n_ranks = max(hi, n_ranks or 0)
    node, side, rank, nid, start, orphan_compute = _events(s, n_ranks)
    ptr, dep, xptr, xdep, crossing, receiver_only = _dependencies(s, node, rank, nid, start)
    nodes: dict[int, list] = {r: [] for r in range(n_ranks)}
    kind, src, dst = s.kind.tolist(), s.src.tolist(), s.dst.tolist()
    size, dur = s.size.tolist(), s.duration.tolist()
    ptr_l, dep_l = ptr.tolist(), dep.tolist()
    xptr_l, xdep_l = xptr.tolist(), xdep.tolist()
    # a transfer's routing hash key when it is not its connection's (a flow hashes by its node
    # id): the reader keys every transfer by connection unless told otherwise
    route = np.full(s.n, -1, dtype=np.int64)
    t0 = np.flatnonzero(schedule.kind == TRANSFER)
    keys = schedule.routing_keys(t0)
    own = keys != connection_keys(schedule.src[t0], schedule.dst[t0])
    route[t0[own]] = keys[own]
    route_l = route.tolist()
    common = None
    for e, (i, sd, r, d) in enumerate(zip(node.tolist(), side.tolist(), rank.tolist(),
                                          nid.tolist())):
        deps = dep_l[ptr_l[e]:ptr_l[e + 1]]
        xd = xdep_l[xptr_l[e]:xptr_l[e + 1]]
        if kind[i] == TRANSFER:
            if sd == 0:  # the receive (next event) shares the attributes
                common = [_attr_int("comm_src", src[i]), _attr_int("comm_dst", dst[i]),
                          _attr_int("comm_size", size[i]), _attr_int("comm_tag", i)]
                if route_l[i] >= 0:
                    common.append(_attr_int(ROUTE_KEY, route_l[i]))
            at = common + [_rank_deps(xd)] if xd else common
            nodes[r].append(pb.Node(id=d, name=f"{'send' if sd == 0 else 'recv'}_{i}",
                                    type=pb.COMM_SEND_NODE if sd == 0 else pb.COMM_RECV_NODE,
                                    attr=at, data_deps=deps))
        else:
            at = [pb.AttributeProto(name="duration_s", double_val=dur[i])]
            if kind[i] == DELAY:
                at.append(pb.AttributeProto(name="netcosim_kind", string_val="delay"))
            if xd:
                at.append(_rank_deps(xd))
            name = (f"start_{int(held[i - n0])}" if i >= n0 else
                    f"{'delay' if kind[i] == DELAY else 'comp'}_{i}")
            nodes[r].append(pb.Node(id=d, name=name, type=pb.COMP_NODE,
                                    duration_micros=int(round(dur[i] * 1e6)),
                                    attr=at, data_deps=deps))
    if crossing:
        warnings.warn(f"{crossing} dependencies join schedule nodes with no rank in common; "
                      f"Chakra's data_deps stay within one rank's file, so they are written in "
                      f"the attribute {RANK_DEPS!r}, which netcosim reads and other Chakra "
                      f"tools ignore", stacklevel=2)
    if receiver_only:
        warnings.warn(f"{receiver_only} dependencies make a transfer wait for a node that is "
                      f"only on its receiver: in data_deps on the receive, which tools with eager "
                      f"send/recv (ASTRA-sim) do not let hold the data back, and in the "
                      f"attribute {RANK_DEPS!r} on the send, which netcosim reads under both p2p "
                      f"semantics", stacklevel=2)
    if orphan_compute:
        warnings.warn(f"{orphan_compute} compute/delay nodes belong to no rank (src = -1); "
                      f"written on rank 0", stacklevel=2)
    out = {}
    for r in range(n_ranks):
        gm = pb.GlobalMetadata(version=SCHEMA_VERSION, attr=[
            pb.AttributeProto(name="schema", string_val="netcosim"),
            _attr_int("rank", r), _attr_int("world_size", n_ranks)])
        out[r] = [gm] + nodes[r]
    return out


_PREFIX = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")


def check_prefix(prefix, where: str = "--prefix") -> str:
    """A file-name stem: letters, digits and ``._+-``, not starting with a dot or dash (so
    ``<prefix>.<rank>.et`` stays inside the output directory)."""
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix) or len(prefix) > 200:
        raise InputError(f"{where} = {prefix!r}: expected a plain file-name stem (letters, "
                         f"digits, '.', '_', '+', '-'; no '/' or leading '.'), e.g. netcosim")
    return prefix


def write_schedule(schedule: Schedule, out_dir, prefix: str = "netcosim",
                   n_ranks: int | None = None, compress: bool = False,
                   label: str | None = None) -> list[Path]:
    """Write one ``<prefix>.<rank>.et`` (``.et.gz`` with ``compress``) per rank; returns the
    paths. Each file is written whole (a temporary file renamed into place)."""
    from netcosim.interop.chakra_to_schedule import no_gc
    from netcosim.outpaths import OutputError, check_dir, write_file

    check_prefix(prefix)
    label = label or f"chakra output {str(out_dir)!r}"
    d = check_dir(out_dir, label)
    with no_gc():  # millions of small messages: no cyclic-GC rescans while they are made
        traces = schedule_to_traces(schedule, n_ranks)
    names = [f"{prefix}.{r}.et{'.gz' if compress else ''}" for r in traces]
    check_dir(d, label, names)
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputError(f"{label}: cannot create it ({e.strerror})") from None
    paths = []
    for (r, msgs), name in zip(traces.items(), names):
        data = frame(msgs)
        # mtime=0: the same schedule gives the same bytes (reproducible example files)
        blob = gzip.compress(data, mtime=0) if compress else data
        paths.append(write_file(d / name, label, lambda tmp: Path(tmp).write_bytes(blob)))
    return paths
