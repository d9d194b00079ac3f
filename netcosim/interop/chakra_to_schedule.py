"""Map a Chakra execution trace (all ranks) onto one netcosim Schedule.

Node by node (docs/interop.md has the full table):

* ``COMP_NODE`` -> a COMPUTE node on the rank's host. Its duration is the netcosim attribute
  ``duration_s`` when present (exact), else ``duration_micros``, else — with a ``gpu`` given —
  the roofline price of the attributes ``num_ops`` (FLOPs) and ``tensor_size`` (bytes).
* ``COMM_SEND_NODE`` / ``COMM_RECV_NODE`` -> one TRANSFER per matched pair. Peers come from the
  attributes ``comm_dst`` (send) and ``comm_src`` (receive), the size from ``comm_size``, the tag
  from ``comm_tag``. Matching follows MPI's non-overtaking rule: the k-th send from s to d with
  tag t pairs with the k-th receive at d from s with tag t, in node-id order; then pairs whose
  tags differ; then sides without a peer (a warning each). How a pair waits (``p2p``):

  - ``"eager"`` (default; ASTRA-sim's send/recv): the TRANSFER waits for the send's parents only
    and is the send's completion (the data has been delivered); the receive is a zero-time
    DELAY ``p2p_recv`` on the receiver that waits for the TRANSFER and the receive's own
    parents, and is what the receive's children wait for. A rank may thus post its send
    before its receive (custom-collective traces do) without a deadlock.
  - ``"rendezvous"``: the TRANSFER waits for the parents of both sides and is the completion of
    both (netcosim before eager semantics).
* ``COMM_COLL_NODE`` -> the transfers of ``collectives.build(op, algorithm, members, comm_size)``.
  The k-th collective of communicator ``pg_name`` on every member rank forms one instance
  (node-id order). Members come from ``comm_groups`` (pg_name -> ranks) or, failing that, are the
  ranks whose traces issue collectives on that ``pg_name``. A member's part of the instance
  starts after that rank's node's parents (a zero-time ``coll_start`` node) and the rank's node
  completes when every transfer it sends or receives is done (a ``coll_done`` node).
* anything else (memory, metadata, ...) -> a DELAY of ``duration_micros`` on the rank.

Dependencies: ``data_deps`` and ``ctrl_deps`` (``deps = "both"``, the default, or only
``"data"``) become Schedule edges. Node ids are per rank (per file); a dependency can only name a
node of the same file, except through the netcosim attribute ``netcosim_rank_deps`` ((rank, node
id) pairs) that chakra_writer writes for edges between nodes with no rank in common.

Bad input raises ``InputError`` naming the file and the node id: a dependency on a node the file
does not have, duplicate ids, a rank or group member outside the fabric, collectives that do not
line up across ranks, a cycle. Quirks of real traces are warnings: a dependency on node id 0
when no node has id 0 (converters that dropped the root node; proto3 does not even write id 0),
send/recv without peers, sends or receives with no partner.
"""
from __future__ import annotations

import gc
import warnings
from collections import defaultdict, deque
from contextlib import contextmanager

import numpy as np

from netcore.schedule import COMPUTE, DELAY, TRANSFER, Schedule, ScheduleError
from netcosim.interop import chakra_pb2 as pb
from netcosim.interop.chakra_reader import RankTrace, attr_value, attrs, read_trace
from netcosim.interop.chakra_writer import RANK_DEPS, ROUTE_KEY
from topo.errors import InputError
from topo.arrays import unique

# Chakra CollectiveCommType -> netcosim collective op ("barrier" is handled here).
COMM_OPS = {
    pb.ALL_REDUCE: "all_reduce",
    pb.REDUCE: "reduce",
    pb.ALL_GATHER: "all_gather",
    pb.BROADCAST: "broadcast",
    pb.ALL_TO_ALL: "all_to_all",
    pb.REDUCE_SCATTER: "reduce_scatter",
    pb.REDUCE_SCATTER_BLOCK: "reduce_scatter",
    pb.BARRIER: "barrier",
}
# How a matched send/receive pair waits (docs/interop.md "Point-to-point semantics").
P2P_MODES = ("eager", "rendezvous")
DEFAULT_ALGORITHMS = {
    "all_reduce": "ring",
    "reduce": "ring",
    "all_gather": "ring",
    "broadcast": "ring",
    "all_to_all": "direct",
    "reduce_scatter": "ring",
}


class ChakraMappingError(InputError):
    """A trace that cannot be turned into a Schedule; names the file and the node id."""


_INT_KINDS = frozenset(("int32_val", "int64_val", "uint32_val", "uint64_val", "sint32_val",
                        "sint64_val", "fixed32_val", "fixed64_val", "sfixed32_val",
                        "sfixed64_val"))
_COMM_FIELDS = {"comm_src": 0, "comm_dst": 1, "comm_size": 2, "comm_tag": 3, ROUTE_KEY: 4,
                RANK_DEPS: 5}


def _comm_ints(node) -> tuple[list, tuple | None]:
    """[comm_src, comm_dst, comm_size, comm_tag, netcosim_route_key, whether it has
    netcosim_rank_deps] of a node in one pass over its attributes (None where absent; the
    first attribute of a name wins, as attrs()), and
    (name, value) of the first that is present but not a whole number (a string, 10.5, a
    bool): that is refused, not read as absent (it was: a comm_size of 10.5 or "1000" moved 0
    bytes)."""
    out = [None, None, None, None, None, False]
    bad = None
    seen = 0
    for a in node.attr:
        j = _COMM_FIELDS.get(a.name)
        if j is None or seen & (1 << j):
            continue
        seen |= 1 << j
        which = a.WhichOneof("value")
        if j == 5:  # checked where its dependencies are made (_rank_deps)
            out[5] = True
        elif which in _INT_KINDS:
            out[j] = int(getattr(a, which))
        elif which in ("double_val", "float_val") and float(getattr(a, which)).is_integer():
            out[j] = int(getattr(a, which))
        elif which is not None and bad is None:
            bad = (a.name, attr_value(a))
    return out, bad


def _coll_size(a: dict, where: str, warn) -> int:
    """comm_size of a COMM_COLL_NODE: absent is 0 bytes (a warning: the collective only
    synchronises); not a whole number >= 0 is refused (it was read as 0, silently: a string or
    fractional comm_size made the collective a zero-time barrier)."""
    v = a.get("comm_size")
    if v is None:
        warn("coll-nosize", f"{where}: COMM_COLL_NODE without comm_size; taken as 0 bytes (the "
                            f"collective only synchronises)")
        return 0
    n = _int_attr(a, "comm_size")
    if n is None or n < 0:
        raise ChakraMappingError(f"{where}: comm_size = {v!r}: expected a whole number of bytes "
                                 f">= 0")
    return n


def _int_attr(a: dict, name: str):
    v = a.get(name)
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return None


class _Out:
    """Growing columns of the Schedule being built (Python lists: this is set-up code, run once
    per trace; the per-event work is in the engines)."""

    def __init__(self):
        self.kind, self.src, self.dst, self.size, self.dur = [], [], [], [], []
        self.label, self.rank, self.cid, self.tag, self.conn = [], [], [], [], []
        self.labels: list[str] = []
        self.child: list[int] = []
        self.parent: list[int] = []

    def _lab(self, name: str) -> int:
        if name not in self.labels:
            self.labels.append(name)
        return self.labels.index(name)

    def add(self, kind, src, dst, size, dur, label, rank, cid, tag=-1, conn=-1) -> int:
        i = len(self.kind)
        self.kind.append(kind)
        self.src.append(src)
        self.dst.append(dst)
        self.size.append(size)
        self.dur.append(dur)
        self.label.append(self._lab(label))
        self.rank.append(rank)
        self.cid.append(cid)
        self.tag.append(-1 if tag is None else tag)
        self.conn.append(conn)
        return i

    def add_schedule(self, s: Schedule, rank, cid) -> int:
        """Append a whole sub-schedule (its internal edges too); returns its id offset."""
        off = len(self.kind)
        remap = np.array([self._lab(n) for n in s.labels] or [0], dtype=np.int64)
        self.kind.extend(s.kind.tolist())
        self.src.extend(s.src.tolist())
        self.dst.extend(s.dst.tolist())
        self.size.extend(s.size.tolist())
        self.dur.extend(s.duration.tolist())
        self.label.extend(remap[s.label].tolist())
        self.rank.extend(np.broadcast_to(rank, s.n).tolist())
        self.cid.extend(np.broadcast_to(cid, s.n).tolist())
        self.tag.extend(s.tag.tolist())
        self.conn.extend(np.broadcast_to(-1, s.n).tolist())
        owner = np.repeat(np.arange(s.n, dtype=np.int64), np.diff(s.dep_ptr))
        self.child.extend((owner + off).tolist())
        self.parent.extend((s.dep_idx + off).tolist())
        return off

    def edge(self, child: int, parent: int):
        self.child.append(child)
        self.parent.append(parent)

    def edges(self, child, parent):
        self.child.extend(np.asarray(child, dtype=np.int64).tolist())
        self.parent.extend(np.asarray(parent, dtype=np.int64).tolist())

    @property
    def n(self) -> int:
        return len(self.kind)


class _Warn:
    """One warning per kind of quirk, with a count and the first example."""

    def __init__(self):
        self.seen: dict[str, list] = {}

    def __call__(self, key: str, example: str):
        self.seen.setdefault(key, [0, example])[0] += 1

    def flush(self):
        for key, (count, example) in self.seen.items():
            more = f" ({count - 1} more like it)" if count > 1 else ""
            warnings.warn(f"{example}{more}", stacklevel=3)


def to_schedule(traces, n_hosts: int | None = None, *, comm_groups: dict | None = None,
                algorithms: dict | None = None, gpu=None, precision: str = "bf16",
                deps: str = "both", rank_hosts=None, p2p: str = "eager",
                where: str = "chakra") -> Schedule:
    """The Schedule of ``traces`` (a path, or the list of :class:`RankTrace` from
    :func:`read_trace`). ``n_hosts``: the fabric's host count, to refuse ranks outside it.
    ``rank_hosts``: host of each rank (default: rank r on host r). ``p2p``: ``"eager"`` or
    ``"rendezvous"``, how a matched send/receive pair waits (module docstring)."""
    check_options(deps, p2p, where)
    if not isinstance(traces, (list, tuple)) or (traces and not isinstance(traces[0], RankTrace)):
        traces = read_trace(traces)
    _check_algorithms(algorithms or {}, where)
    _check_precision(precision, where)
    algorithms = {**DEFAULT_ALGORITHMS, **(algorithms or {})}
    warn = _Warn()
    by_rank = {t.rank: t for t in traces}
    host_of = _host_map(traces, n_hosts, rank_hosts, where)
    out = _Out()
    entry = {t.rank: np.full(len(t.nodes), -1, dtype=np.int64) for t in traces}
    exit_ = {t.rank: np.full(len(t.nodes), -1, dtype=np.int64) for t in traces}
    index = {t.rank: _id_index(t) for t in traces}
    spec = _gpu_spec(gpu, where) if gpu is not None else None

    sends, recvs, colls = [], [], defaultdict(lambda: defaultdict(list))
    linked = set()  # (rank, record) of the nodes with netcosim_rank_deps
    for t in traces:
        r, h = t.rank, host_of[t.rank]
        for k, node in enumerate(t.nodes):
            ty = node.type
            if ty == pb.COMP_NODE:
                a = attrs(node)
                if RANK_DEPS in a:
                    linked.add((r, k))
                dur = _comp_seconds(node, a, spec, precision, t, k, warn)
                _check_clock(dur, node, t, k)
                i = out.add(COMPUTE, h, -1, 0, dur, "compute", r, node.id)
                entry[r][k] = exit_[r][k] = i
            elif ty in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE):
                (c_src, c_dst, size, tag, route, has_deps), bad = _comm_ints(node)
                if has_deps:
                    linked.add((r, k))
                if bad is not None:
                    raise ChakraMappingError(f"{t.where(k)}: {bad[0]} = {bad[1]!r}: expected "
                                             f"a whole number")
                if size is not None and size < 0:
                    raise ChakraMappingError(f"{t.where(k)}: comm_size = {size}: expected a "
                                             f"number of bytes >= 0")
                peer = c_dst if ty == pb.COMM_SEND_NODE else c_src
                if peer is not None and peer not in host_of:
                    _check_peer(peer, ty, n_hosts, rank_hosts, t, k, where)
                if route is not None and not 0 <= route < 2**63:
                    raise ChakraMappingError(f"{t.where(k)}: {ROUTE_KEY} = {route}: expected a "
                                             f"routing hash key from 0 to 2^63 - 1")
                rec = (r, node.id, k, peer, tag, size, route)
                (sends if ty == pb.COMM_SEND_NODE else recvs).append(rec)
            elif ty == pb.COMM_COLL_NODE:
                a = attrs(node)
                if RANK_DEPS in a:
                    linked.add((r, k))
                pg = a.get("pg_name")
                pg = "" if pg is None else str(pg)
                colls[pg][r].append(k)
            elif ty not in pb.NodeType.values():
                # not in the published schema: a corrupt file or a newer schema whose node may
                # communicate; a delay of its duration_micros would be a silent guess
                raise ChakraMappingError(
                    f"{t.where(k)}: node type {ty} is not a Chakra NodeType (known: "
                    f"{', '.join(f'{n} = {v}' for n, v in pb.NodeType.items())})")
            else:
                name = pb.NodeType.Name(ty)
                if ty not in (pb.METADATA_NODE, pb.INVALID_NODE):
                    warn(f"delay:{name}", f"{t.where(k)}: {name} is modelled as a fixed delay "
                                          f"of its duration_micros")
                _check_clock(node.duration_micros * 1e-6, node, t, k)
                if any(x.name == RANK_DEPS for x in node.attr):
                    linked.add((r, k))
                i = out.add(DELAY, h, -1, 0, node.duration_micros * 1e-6, "delay", r, node.id)
                entry[r][k] = exit_[r][k] = i

    _map_p2p(out, sends, recvs, by_rank, host_of, entry, exit_, warn, eager=p2p == "eager")
    for pg in sorted(colls):
        _map_collectives(out, pg, colls[pg], comm_groups, by_rank, host_of, n_hosts, algorithms,
                         entry, exit_, warn, where)

    # dependency edges: child's entry waits for each parent's exit
    for t in traces:
        r = t.rank
        idx = index[r]
        for k, node in enumerate(t.nodes):
            parents = list(node.data_deps)
            if deps == "both":
                parents += list(node.ctrl_deps)
            for pid in dict.fromkeys(parents):
                pk = idx.get(pid)
                if pk is None:
                    if pid == 0:
                        warn("dep0", f"{t.where(k)}: depends on node id 0, which is not in the "
                                     f"file (a converter dropped its root node?); dependency "
                                     f"ignored")
                        continue
                    raise ChakraMappingError(f"{t.where(k)}: depends on node id {pid}, which "
                                             f"is not in this file")
                if pk == k:
                    raise ChakraMappingError(f"{t.where(k)}: depends on itself")
                out.edge(int(entry[r][k]), int(exit_[r][pk]))
            if (r, k) in linked:
                for pr, pk in _rank_deps(node, t, k, by_rank, index):
                    out.edge(int(entry[r][k]), int(exit_[pr][pk]))
    warn.flush()
    sched = _build(out, by_rank)
    sched.meta.update({"workload": "chakra", "n_ranks": len(traces), "p2p": p2p,
                       "trace_files": [t.path for t in traces]})
    _check_dag(sched, by_rank, p2p, where)
    return sched


# =========================================================================== pieces
def check_options(deps, p2p, where: str) -> None:
    """``deps`` and ``p2p`` name known modes (checked before any trace file is read)."""
    if not isinstance(deps, str) or deps not in ("both", "data"):
        raise InputError(f"{where}.deps = {deps!r}: expected \"both\" or \"data\"")
    if not isinstance(p2p, str) or p2p not in P2P_MODES:
        raise InputError(f"{where}.p2p = {p2p!r}: expected \"eager\" (the default) or "
                         f"\"rendezvous\"")


_INT_LISTS = frozenset(k.replace("_val", "_list") for k in _INT_KINDS)


def _rank_deps(node, t: RankTrace, k: int, by_rank: dict, index: dict) -> list:
    """(rank, record index) of every node the attribute ``netcosim_rank_deps`` names: the
    dependencies chakra_writer could not put in ``data_deps`` because they cross files,
    as flattened (rank, node id) pairs. [] without the attribute."""
    for a in node.attr:
        if a.name == RANK_DEPS:
            break
    else:
        return []
    at = f"{t.where(k)}: {RANK_DEPS}"
    which = a.WhichOneof("value")
    vals = list(getattr(a, which).values) if which in _INT_LISTS else None
    if vals is None or len(vals) % 2:
        shown = "no value" if which is None else which
        raise ChakraMappingError(f"{at} ({shown}): expected an integer list of (rank, node id) "
                                 f"pairs")
    out = []
    for pr, pid in zip(vals[0::2], vals[1::2]):
        if pr not in by_rank:
            raise ChakraMappingError(f"{at}: names rank {pr}, which has no trace file")
        pk = index[pr].get(pid)
        if pk is None:
            raise ChakraMappingError(f"{at}: names node id {pid} of rank {pr}, which is not in "
                                     f"{by_rank[pr].path}")
        if pr == t.rank and pk == k:
            raise ChakraMappingError(f"{t.where(k)}: depends on itself ({RANK_DEPS})")
        out.append((pr, pk))
    return out


def _host_map(traces, n_hosts, rank_hosts, where) -> dict:
    """rank -> host: every rank with a file, and with ``rank_hosts`` every rank it places
    (a send to a rank without a file goes to that rank's host, not to the host of its
    number)."""
    ranks = [t.rank for t in traces]
    if rank_hosts is None:
        host_of = {r: r for r in ranks}
    else:
        for t in traces:
            if t.rank >= len(rank_hosts):
                raise ChakraMappingError(f"{where}.rank_hosts has {len(rank_hosts)} entries but "
                                         f"{t.path} is rank {t.rank}")
        host_of = {r: int(h) for r, h in enumerate(rank_hosts)}
        if len(set(host_of.values())) != len(host_of):
            raise ChakraMappingError(f"{where}.rank_hosts = {list(rank_hosts)!r}: two ranks on "
                                     f"one host")
    if n_hosts is not None:
        for t in traces:
            h = host_of[t.rank]
            if not 0 <= h < n_hosts and rank_hosts is not None:
                # the entry the user gave, not the file of the rank it places
                raise ChakraMappingError(f"{where}.rank_hosts[{t.rank}] = {h}: outside the "
                                         f"fabric (hosts 0..{n_hosts - 1}), for rank {t.rank} "
                                         f"({t.path})")
            if not 0 <= h < n_hosts:
                # rank_hosts would not help: it places every rank up to the highest on hosts
                # of its own, so it needs as many hosts as rank r on host r does
                raise ChakraMappingError(
                    f"{t.path}: rank {t.rank} runs on host {h}, which is outside the fabric "
                    f"(hosts 0..{n_hosts - 1}); the trace's ranks need a fabric of at least "
                    f"{max(ranks) + 1:,} hosts")
        for r, h in host_of.items():
            if not 0 <= h < n_hosts:
                raise ChakraMappingError(f"{where}.rank_hosts[{r}] = {h}: outside the fabric "
                                         f"(hosts 0..{n_hosts - 1})")
    return host_of


def _check_peer(peer: int, ty, n_hosts, rank_hosts, t: RankTrace, k: int, where: str) -> None:
    """A peer rank without a trace file must still have a host: its own number within the
    fabric, or an entry of ``rank_hosts``."""
    side = "comm_dst" if ty == pb.COMM_SEND_NODE else "comm_src"
    if peer < 0:
        raise ChakraMappingError(f"{t.where(k)}: {side} = {peer}: expected a rank >= 0")
    if rank_hosts is not None:
        raise ChakraMappingError(f"{t.where(k)}: {side} = {peer}: rank {peer} has no host in "
                                 f"{where}.rank_hosts ({len(rank_hosts)} entries)")
    if n_hosts is not None and peer >= n_hosts:
        raise ChakraMappingError(f"{t.where(k)}: {side} = {peer} is outside the fabric (hosts "
                                 f"0..{n_hosts - 1})")


def _id_index(t: RankTrace) -> dict:
    idx = {}
    for k, node in enumerate(t.nodes):
        if node.id in idx:
            first = idx[node.id]
            raise ChakraMappingError(f"{t.where(k)}: duplicate node id (also record "
                                     f"{first + 1}; a node without an id reads as id 0)")
        idx[node.id] = k
    return idx


def _check_algorithms(algorithms: dict, where: str) -> None:
    """Every ``op -> algorithm`` names a collective a trace can hold and an algorithm of it
    (a typo must not silently fall back to the default)."""
    import collectives

    ops = sorted(set(COMM_OPS.values()) - {"barrier"})
    for op, alg in algorithms.items():
        at = f"{where}.algorithms.{op}"
        if op not in ops:
            raise InputError(f"{at} = {alg!r}: {op!r} is not a collective of Chakra traces "
                             f"(expected one of {', '.join(ops)})")
        if not isinstance(alg, str):
            raise InputError(f"{at} = {alg!r}: expected an algorithm name")
        try:
            op_c, alg_c = collectives.resolve(op, alg)
        except InputError as e:
            raise InputError(f"{at} = {alg!r}: {str(e).split(': ', 1)[-1]}") from None
        if not _trace_algorithm(collectives, op_c, alg_c):
            usable = [a for a in collectives.ALGORITHMS[op_c]
                      if _trace_algorithm(collectives, op_c, a)]
            # it failed on the trace's first collective, as "fabric = None: ... needs the
            # topology (collectives.build(..., fabric=topology))"
            raise InputError(f"{at} = {alg!r}: not available for a trace's collectives (it "
                             f"needs the fabric's switches or a group_size/dims option, which "
                             f"a COMM_COLL_NODE does not give); use one of "
                             f"{', '.join(usable)}")


def _trace_algorithm(collectives, op: str, alg: str) -> bool:
    """Whether ``collectives.build(op, alg, ranks, nbytes)`` runs without a fabric or options."""
    import inspect

    params = inspect.signature(collectives.ALGORITHMS[op][alg]).parameters
    return not collectives.needs_fabric(op, alg) and not any(
        k in params and params[k].default is None for k in ("group_size", "dims"))


def _check_precision(precision, where: str) -> None:
    from compute.hardware import PRECISIONS

    if precision not in PRECISIONS:
        raise InputError(f"{where}.precision = {precision!r}: expected one of "
                         f"{', '.join(PRECISIONS)}")


def _gpu_spec(gpu, where):
    from compute.hardware import get_gpu

    try:
        return get_gpu(gpu)
    except InputError as e:
        raise InputError(f"{where}.gpu: {e}") from None


def _comp_seconds(node, a: dict, spec, precision, t, k, warn) -> float:
    """Seconds of a COMP node (``a``: its attributes)."""
    d = a.get("duration_s")
    if d is not None:  # NaN, negative or infinite is an error, never a silent 0 s
        if isinstance(d, bool) or not isinstance(d, (int, float)) or not np.isfinite(d) \
                or d < 0:
            raise ChakraMappingError(f"{t.where(k)}: duration_s = {d!r}: expected a finite "
                                     f"number of seconds >= 0")
        return float(d)
    if node.duration_micros:
        return node.duration_micros * 1e-6
    flops = a.get("num_ops")
    nbytes = a.get("tensor_size")
    for name, v in (("num_ops", flops), ("tensor_size", nbytes)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                              or not np.isfinite(v) or v < 0):
            raise ChakraMappingError(f"{t.where(k)}: {name} = {v!r}: expected a finite "
                                     f"number >= 0")
    if (flops or nbytes) and spec is not None:
        from compute.operators import roofline

        return roofline(node.name or "op", float(flops or 0), float(nbytes or 0), spec,
                        precision).seconds
    if flops or nbytes:
        warn("nogpu", f"{t.where(k)}: COMP node with num_ops/tensor_size but no duration and no "
                      f"gpu to price it; taken as 0 s (set gpu = \"h100_sxm\", ...)")
    return 0.0


def _check_clock(seconds: float, node, t: RankTrace, k: int) -> None:
    """A node's duration ends before the engines' clock does (2^62 ps): refused naming the
    node and what gave it, not later as 'workload: node 0: a duration of ...' (a schedule
    node number the trace does not show)."""
    from netcore.packet.limits import TIME_LIMIT_TEXT, TIME_LIMIT_US

    if seconds * 1e6 < TIME_LIMIT_US:
        return
    a = attrs(node) if node.type == pb.COMP_NODE else {}
    if a.get("duration_s") is not None:
        given = f"duration_s = {a['duration_s']!r}"
    elif node.duration_micros or node.type != pb.COMP_NODE:
        given = f"duration_micros = {node.duration_micros}"
    else:
        given = f"num_ops = {a.get('num_ops')!r}, tensor_size = {a.get('tensor_size')!r}"
    raise ChakraMappingError(f"{t.where(k)}: {given}: {seconds * 1e6:.6g} us, beyond the "
                             f"engines' clock, which ends at {TIME_LIMIT_TEXT}")


def _map_p2p(out, sends, recvs, by_rank, host_of, entry, exit_, warn, eager: bool):
    """Pair sends and receives; one TRANSFER per pair (or per unpaired side with a peer).
    ``eager``: a pair's receive is a join node after the transfer (see _transfer)."""
    sends.sort(key=lambda s: (s[0], s[1]))
    recvs.sort(key=lambda s: (s[0], s[1]))
    s_used = [False] * len(sends)
    r_used = [False] * len(recvs)
    pairs = []

    def match(skey, rkey):
        queues = defaultdict(deque)
        for j, s in enumerate(sends):
            if not s_used[j] and s[3] is not None:
                queues[skey(s)].append(j)
        for j, rv in enumerate(recvs):
            if r_used[j] or rv[3] is None:
                continue
            q = queues.get(rkey(rv))
            if q:
                i = q.popleft()
                s_used[i] = r_used[j] = True
                pairs.append((i, j))

    match(lambda s: (s[0], s[3], s[4]), lambda r: (r[3], r[0], r[4]))  # src, dst, tag
    n_exact = len(pairs)
    match(lambda s: (s[0], s[3]), lambda r: (r[3], r[0]))  # tags disagree
    if len(pairs) > n_exact:
        i, j = pairs[n_exact]
        warn("tag", f"{_w(by_rank, sends[i])}: paired with {_w(by_rank, recvs[j])} although "
                    f"their comm_tag differ")
    # one side without a peer: take the first open partner that names this rank (and whose
    # tag agrees, or either tag is absent). Queues per named rank, so this is linear.
    for j, i in _first_open(recvs, r_used, sends, s_used):
        pairs.append((i, j))
        warn("nopeer", f"{_w(by_rank, recvs[j])}: COMM_RECV without comm_src; paired with "
                       f"{_w(by_rank, sends[i])} by destination, tag and order")
    for i, j in _first_open(sends, s_used, recvs, r_used):
        pairs.append((i, j))
        warn("nopeer", f"{_w(by_rank, sends[i])}: COMM_SEND without comm_dst; paired with "
                       f"{_w(by_rank, recvs[j])} by source, tag and order")

    for i, j in pairs:
        s, rv = sends[i], recvs[j]
        size = s[5] if s[5] is not None else rv[5]
        if s[5] is not None and rv[5] is not None and s[5] != rv[5]:
            warn("size", f"{_w(by_rank, s)}: comm_size {s[5]} but its receive "
                         f"{_w(by_rank, rv)} expects {rv[5]}; using the send's")
        _transfer(out, host_of[s[0]], host_of[rv[0]], size, [s, rv], entry, exit_, by_rank, warn,
                  eager)
    for i, s in enumerate(sends):
        if not s_used[i]:
            _lonely(out, s, "COMM_SEND", host_of, entry, exit_, by_rank, warn, sender=True)
    for j, rv in enumerate(recvs):
        if not r_used[j]:
            _lonely(out, rv, "COMM_RECV", host_of, entry, exit_, by_rank, warn, sender=False)


def _first_open(lost, lost_used, other, other_used):
    """Pair every open record of ``lost`` without a peer with the first open record of
    ``other`` (in list order) that names its rank and whose tag is compatible (equal, or
    either is None). Yields (index in lost, index in other) and marks both used.

    Queues of ``other`` per named rank: all, tag None, and per tag; used entries are skipped
    lazily, so every record is dequeued at most once per queue it sits in."""
    anyq, noneq, tagq = defaultdict(deque), defaultdict(deque), defaultdict(deque)
    for i, o in enumerate(other):
        if other_used[i] or o[3] is None:
            continue
        anyq[o[3]].append(i)
        (noneq[o[3]] if o[4] is None else tagq[(o[3], o[4])]).append(i)

    def head(q):
        while q and other_used[q[0]]:
            q.popleft()
        return q[0] if q else None

    for j, rec in enumerate(lost):
        if lost_used[j] or rec[3] is not None:
            continue
        if rec[4] is None:
            i = head(anyq[rec[0]]) if rec[0] in anyq else None
        else:
            a = head(noneq[rec[0]]) if rec[0] in noneq else None
            b = head(tagq[(rec[0], rec[4])]) if (rec[0], rec[4]) in tagq else None
            i = b if a is None else (a if b is None else min(a, b))
        if i is not None:
            other_used[i] = lost_used[j] = True
            yield j, i


def _w(by_rank, rec) -> str:
    return by_rank[rec[0]].where(rec[2])


def _transfer(out, src_h, dst_h, size, recs, entry, exit_, by_rank, warn, eager=False):
    """The TRANSFER (a zero-time DELAY for a rank sending to itself) of ``recs``: a matched
    [send, receive] or a lone side.

    Rendezvous (and a lone side): the transfer is the entry and the exit of every record, so
    it waits for the parents of both sides and the children of both wait for it. Eager, for a
    pair: the transfer is the send's entry and exit (it leaves when the send's parents are
    done; the send completes when the data is delivered), and the receive gets a zero-time
    join node after the transfer that is its entry and exit (it completes when its own
    parents are done and the data has arrived)."""
    rec = recs[0]
    if size is None:
        warn("nosize", f"{_w(by_rank, rec)}: no comm_size; the transfer carries 0 bytes")
        size = 0
    if src_h == dst_h:
        warn("self", f"{_w(by_rank, rec)}: a send/receive with its own rank; modelled as a "
                     f"zero-time delay")
        i = out.add(DELAY, src_h, -1, 0, 0.0, "p2p", rec[0], rec[1])
    else:
        # the writer's hash key (a flow keyed by its node id), else the connection's (_build)
        route = next((x[6] for x in recs if x[6] is not None), -1)
        i = out.add(TRANSFER, src_h, dst_h, int(size), 0.0, "p2p", rec[0], rec[1], rec[4],
                    conn=route)
    if eager and len(recs) == 2:
        s, rv = recs
        entry[s[0]][s[2]] = exit_[s[0]][s[2]] = i
        j = out.add(DELAY, dst_h, -1, 0, 0.0, "p2p_recv", rv[0], rv[1])
        out.edge(j, i)
        entry[rv[0]][rv[2]] = exit_[rv[0]][rv[2]] = j
        return
    for r in recs:
        entry[r[0]][r[2]] = exit_[r[0]][r[2]] = i


def _lonely(out, rec, what, host_of, entry, exit_, by_rank, warn, sender: bool):
    r, peer = rec[0], rec[3]
    if peer is None:
        warn(f"lonely-nopeer-{what}", f"{_w(by_rank, rec)}: {what} without a peer and no "
                                      f"partner to pair it with; modelled as a zero-time delay")
        i = out.add(DELAY, host_of[r], -1, 0, 0.0, "p2p", r, rec[1])
        entry[r][rec[2]] = exit_[r][rec[2]] = i
        return
    other = "COMM_RECV" if sender else "COMM_SEND"
    warn(f"lonely-{what}", f"{_w(by_rank, rec)}: {what} with no matching {other} on rank {peer}; "
                           f"the transfer is simulated from this side alone")
    peer_h = host_of.get(peer, peer)
    src_h, dst_h = (host_of[r], peer_h) if sender else (peer_h, host_of[r])
    _transfer(out, src_h, dst_h, rec[5], [rec], entry, exit_, by_rank, warn)


def _map_collectives(out, pg, per_rank, comm_groups, by_rank, host_of, n_hosts, algorithms,
                     entry, exit_, warn, where):
    import collectives

    issuing = sorted(per_rank)
    if comm_groups and pg in comm_groups:
        members = _group_members(comm_groups[pg], pg, n_hosts, where)
        for r in issuing:
            if r not in members:
                k = per_rank[r][0]
                raise ChakraMappingError(f"{by_rank[r].where(k)}: collective on pg_name {pg!r}, "
                                         f"but rank {r} is not a member of {where}.comm_groups"
                                         f"[{pg!r}] = {members}")
        for r in members:
            if r not in by_rank:
                raise ChakraMappingError(f"{where}.comm_groups[{pg!r}]: rank {r} has no trace "
                                         f"file, so its part of the collectives cannot run")
    else:
        members = issuing
    seqs = {r: sorted(per_rank.get(r, []), key=lambda k: by_rank[r].nodes[k].id) for r in members}
    counts = {r: len(v) for r, v in seqs.items()}
    most = max(counts.values())
    for r, c in counts.items():
        if c != most:
            big = max(counts, key=lambda x: counts[x])
            k = seqs[big][c]
            raise ChakraMappingError(f"{by_rank[big].where(k)}: collective #{c + 1} on pg_name "
                                     f"{pg!r} has no counterpart on rank {r} ({by_rank[r].path} "
                                     f"issues {c}, rank {big} issues {most}); it would never "
                                     f"complete")
    hosts = [host_of[r] for r in members]
    for j in range(most):
        nodes = [(r, seqs[r][j]) for r in members]
        a0 = attrs(by_rank[nodes[0][0]].nodes[nodes[0][1]])
        ctype = _int_attr(a0, "comm_type")
        r0, k0 = nodes[0]
        if ctype is None:
            raise ChakraMappingError(f"{by_rank[r0].where(k0)}: COMM_COLL_NODE without a "
                                     f"comm_type attribute")
        if ctype not in COMM_OPS:
            name = pb.CollectiveCommType.Name(ctype) if ctype in \
                pb.CollectiveCommType.values() else str(ctype)
            raise ChakraMappingError(f"{by_rank[r0].where(k0)}: comm_type {name} is not "
                                     f"supported (supported: "
                                     f"{', '.join(pb.CollectiveCommType.Name(c) for c in COMM_OPS)})")
        sizes = []
        for r, k in nodes:
            a = attrs(by_rank[r].nodes[k])
            if _int_attr(a, "comm_type") != ctype:
                raise ChakraMappingError(f"{by_rank[r].where(k)}: comm_type "
                                         f"{_int_attr(a, 'comm_type')} but the matching "
                                         f"collective {by_rank[r0].where(k0)} has {ctype}")
            sizes.append(_coll_size(a, by_rank[r].where(k), warn))
        nbytes = max(sizes)
        if min(sizes) != nbytes:
            warn("collsize", f"{by_rank[r0].where(k0)}: comm_size differs across the ranks of "
                             f"collective #{j + 1} on pg_name {pg!r} ({min(sizes)}..{nbytes}); "
                             f"using {nbytes}")
        op = COMM_OPS[ctype]
        starts = {r: out.add(DELAY, host_of[r], -1, 0, 0.0, "coll_start", r,
                             by_rank[r].nodes[k].id) for r, k in nodes}
        for r, k in nodes:
            entry[r][k] = starts[r]
        if op == "barrier" or len(members) == 1 or nbytes == 0:
            b = out.add(DELAY, -1, -1, 0, 0.0, "coll_done", r0, by_rank[r0].nodes[k0].id)
            out.edges(np.full(len(nodes), b), [starts[r] for r, _ in nodes])
            for r, k in nodes:
                exit_[r][k] = b
            continue
        alg = algorithms.get(op, DEFAULT_ALGORITHMS.get(op))
        _guard_collective(out, op, alg, len(hosts), f"{by_rank[r0].where(k0)}: {op}")
        try:
            sub = collectives.build(op, alg, hosts, nbytes)
        except InputError as e:
            raise ChakraMappingError(f"{by_rank[r0].where(k0)}: {op} over ranks {members}: "
                                     f"{e}") from None
        off = out.add_schedule(sub, r0, by_rank[r0].nodes[k0].id)
        ids = np.arange(sub.n, dtype=np.int64) + off
        start_of_host = np.full(max(hosts) + 1, -1, dtype=np.int64)
        for r in members:
            start_of_host[host_of[r]] = starts[r]
        s_src = np.where(sub.src >= 0, start_of_host[np.clip(sub.src, 0, None)], -1)
        ok = s_src >= 0
        out.edges(ids[ok], s_src[ok])
        t = sub.kind == TRANSFER
        s_dst = np.where(t & (sub.dst >= 0), start_of_host[np.clip(sub.dst, 0, None)], -1)
        ok = s_dst >= 0
        out.edges(ids[ok], s_dst[ok])
        for r, k in nodes:
            h = host_of[r]
            d = out.add(DELAY, h, -1, 0, 0.0, "coll_done", r, by_rank[r].nodes[k].id)
            mine = ids[(sub.src == h) | (t & (sub.dst == h))]
            out.edges(np.full(len(mine), d), mine)
            exit_[r][k] = d


def _guard_collective(out, op: str, alg, n: int, what: str) -> None:
    """Refuse, before it is built, a collective whose transfers (with the schedule so far)
    cannot fit in memory (netcosim/memory_guard.py): a trace's ALL_REDUCE over 16,384 ranks
    is a 537 M-transfer ring, which died of MemoryError after 46 s and 12 GB (or was killed).
    (Measured: a trace ALL_REDUCE over 1,024 ranks, 2.1 M transfers, peaks at 2.0 GB.)"""
    import collectives
    from netcosim.memory_guard import check_transfers, collective_transfers

    try:
        op_c, algo = collectives.resolve(op, alg)
    except InputError:
        return  # reported with its place by collectives.build
    count = collective_transfers(op_c, algo, n)
    check_transfers(len(out.kind) + count, what,
                    f"over {n:,} ranks with the trace's other nodes",
                    "use fewer ranks, or a scenario with kind = \"collective\" or "
                    "\"training\" (network_detail = \"auto\" runs a ring as one stream)")


def _group_members(v, pg, n_hosts, where) -> list[int]:
    at = f"{where}.comm_groups[{pg!r}]"
    if not isinstance(v, (list, tuple)) or not v:
        raise ChakraMappingError(f"{at} = {v!r}: expected a non-empty list of ranks")
    out = []
    for x in v:
        if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
            raise ChakraMappingError(f"{at}: {x!r} is not a rank (an integer)")
        x = int(x)
        if x < 0 or (n_hosts is not None and x >= n_hosts):
            hi = f"0..{n_hosts - 1}" if n_hosts is not None else ">= 0"
            raise ChakraMappingError(f"{at}: rank {x} is outside the fabric (ranks {hi})")
        out.append(x)
    if len(set(out)) != len(out):
        raise ChakraMappingError(f"{at} = {out}: a rank appears twice")
    return sorted(out)


def _check_widths(out: _Out, by_rank=None) -> None:
    """Sizes beyond int64 and peers beyond int32, refused naming the node (the columns' casts
    raised a bare OverflowError: an internal error instead of the trace's fault)."""
    for name, col, lo, hi in (("comm_size", out.size, -(2**63), 2**63 - 1),
                              ("peer rank", out.src, -(2**31), 2**31 - 1),
                              ("peer rank", out.dst, -(2**31), 2**31 - 1)):
        if not col or lo <= min(col) and max(col) <= hi:
            continue
        i = next(j for j, v in enumerate(col) if not lo <= v <= hi)
        r, cid = out.rank[i], out.cid[i]
        t = by_rank.get(r) if isinstance(by_rank, dict) else None
        at = f"{t.path}: node id {cid}" if t is not None else f"rank {r}: node id {cid}"
        what = "bytes an int64 holds" if name == "comm_size" else "ranks an int32 numbers"
        raise ChakraMappingError(f"{at}: {name} {col[i]} is beyond the {hi} {what}")
    if out.cid and max(out.cid) > 2**63 - 1:  # the chakra_id column is int64
        i = max(range(len(out.cid)), key=out.cid.__getitem__)
        t = by_rank.get(out.rank[i]) if isinstance(by_rank, dict) else None
        raise ChakraMappingError(f"{t.path if t is not None else f'rank {out.rank[i]}'}: node "
                                 f"id {out.cid[i]} is beyond the {2**63 - 1} this reader "
                                 f"numbers nodes with")


def _build(out: _Out, by_rank=None) -> Schedule:
    _check_widths(out, by_rank)
    n = out.n
    child = np.asarray(out.child, dtype=np.int64)
    parent = np.asarray(out.parent, dtype=np.int64)
    if child.size:
        key = unique(child * max(n, 1) + parent)
        child, parent = key // max(n, 1), key % max(n, 1)
    counts = np.bincount(child, minlength=n) if n else np.zeros(0, dtype=np.int64)
    # ``with_connections``: a trace's sends between two ranks go over one persistent
    # connection (one ECMP hash), as NCCL's queue pairs do and as the library's collectives
    # are routed; keyed by node id, a ring written as a trace took other paths than the same
    # ring as a collective (3x3 torus, 8 ranks, 2 chunks: +25% read back; 9 ranks: -26%);
    # a transfer the writer gave its own key (netcosim_route_key) keeps it
    s = Schedule(
        kind=np.asarray(out.kind, dtype=np.int8), src=np.asarray(out.src, dtype=np.int32),
        dst=np.asarray(out.dst, dtype=np.int32), size=np.asarray(out.size, dtype=np.int64),
        duration=np.asarray(out.dur, dtype=np.float64), start=np.zeros(n),
        dep_ptr=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), dep_idx=parent,
        tag=np.asarray(out.tag, dtype=np.int64),
        label=np.asarray(out.label, dtype=np.int16), labels=out.labels or ["transfer"],
        extra={"chakra_rank": np.asarray(out.rank, dtype=np.int64),
               "chakra_id": np.asarray(out.cid, dtype=np.int64)},
    ).with_connections()
    own = np.asarray(out.conn, dtype=np.int64)
    keep = (own >= 0) & (s.kind == TRANSFER)
    s.conn[keep] = own[keep]
    return s


def _check_dag(sched: Schedule, by_rank, p2p: str = "eager", where: str = "chakra") -> None:
    """A cycle in the trace is reported as the file and node id it goes through (with a hint
    when rendezvous semantics may be what makes it one)."""
    try:
        sched.topological_order()
    except ScheduleError:
        indeg_left = _stuck_nodes(sched)
        i = int(indeg_left[0])
        r = int(sched.extra["chakra_rank"][i])
        cid = int(sched.extra["chakra_id"][i])
        path = by_rank[r].path if r in by_rank else f"rank {r}"
        hint = ""
        if p2p == "rendezvous" and (sched.kind[indeg_left] == TRANSFER).any():
            hint = (f" under {where}.p2p = \"rendezvous\" (a transfer waits for the parents "
                    f"of both its send and its receive; traces that post a send before its "
                    f"receive need p2p = \"eager\")")
        raise ChakraMappingError(f"{path}: node id {cid}: dependency cycle (through this node "
                                 f"and {len(indeg_left) - 1} other schedule nodes); the trace "
                                 f"can never finish{hint}") from None


def _stuck_nodes(s: Schedule) -> np.ndarray:
    indeg = np.diff(s.dep_ptr).astype(np.int64)
    cptr, cidx = s.children()
    frontier = list(np.flatnonzero(indeg == 0))
    while frontier:
        u = frontier.pop()
        for c in cidx[cptr[u]:cptr[u + 1]]:
            indeg[c] -= 1
            if indeg[c] == 0:
                frontier.append(c)
    return np.flatnonzero(indeg > 0)


@contextmanager
def no_gc():
    """Pause the cyclic garbage collector: reading a trace makes millions of small acyclic
    objects, and every generation-2 pass would rescan all of them (quadratic in trace size)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def load_schedule(path, topology=None, **options) -> Schedule:
    """Read a trace directory/file and map it (``options`` as for :func:`to_schedule`)."""
    n_hosts = topology.n_hosts if topology is not None else None
    with no_gc():
        return to_schedule(read_trace(path), n_hosts, **options)
