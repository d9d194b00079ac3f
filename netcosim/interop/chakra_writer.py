"""Write a Schedule as a Chakra execution trace: one ``<prefix>.<rank>.et`` file per rank.

Mapping (the inverse of chakra_to_schedule for point-to-point schedules):

* TRANSFER i (s -> d, b bytes) -> a ``COMM_SEND_NODE`` on rank s (``comm_dst = d``) and a
  ``COMM_RECV_NODE`` on rank d (``comm_src = s``), both with ``comm_size = b`` and
  ``comm_tag = i`` (the schedule node index, so pairing back is exact);
* COMPUTE / DELAY on rank r -> a ``COMP_NODE`` on rank r with ``duration_micros`` (rounded, what
  Chakra tools read) and the netcosim attribute ``duration_s`` (exact double, what netcosim
  reads first); a DELAY also carries ``netcosim_kind = "delay"``;
* a dependency of node i on node p becomes a ``data_deps`` entry on each of i's per-rank nodes
  for which p has a node on the same rank. Chakra dependencies cannot cross files, so an edge
  between nodes with no rank in common (e.g. a transfer 0->1 waiting for a transfer 2->3) is
  dropped with one warning that counts them; collective schedules from ``collectives`` have
  none (every edge joins transfers that share a rank).

Node ids are per rank, 0, 1, 2, ... in a topological order of the schedule (parents are written
before children). Node id 0 is therefore absent on the wire (proto3 does not write default
values), as in real traces.
"""
from __future__ import annotations

import gzip
import warnings
from pathlib import Path

import numpy as np

from netcore.schedule import COMPUTE, DELAY, TRANSFER, Schedule
from netcosim.interop import chakra_pb2 as pb
from netcosim.interop.chakra_reader import frame
from topo.errors import InputError

SCHEMA_VERSION = "0.0.4"  # Chakra's GlobalMetadata.version for this node schema


def _attr_int(name: str, v: int) -> pb.AttributeProto:
    return pb.AttributeProto(name=name, int64_val=int(v))


def schedule_to_traces(schedule: Schedule, n_ranks: int | None = None) -> dict[int, list]:
    """rank -> [GlobalMetadata, Node, ...] (messages, not yet framed)."""
    s = schedule
    n = s.n
    ranks_used = np.concatenate([s.src[s.src >= 0], s.dst[(s.kind == TRANSFER) & (s.dst >= 0)]])
    hi = int(ranks_used.max()) + 1 if ranks_used.size else 1
    n_ranks = max(hi, n_ranks or 0)
    order = s.topological_order()
    # per-rank node id of every schedule node (-1 where it has no node on that rank)
    node_on: list[dict[int, int]] = [dict() for _ in range(n)]
    counters = [0] * n_ranks
    nodes: dict[int, list] = {r: [] for r in range(n_ranks)}
    orphan_compute = 0
    for i in order.tolist():
        kind = int(s.kind[i])
        if kind == TRANSFER:
            src, dst = int(s.src[i]), int(s.dst[i])
            common = [_attr_int("comm_src", src), _attr_int("comm_dst", dst),
                      _attr_int("comm_size", int(s.size[i])), _attr_int("comm_tag", i)]
            for r, ty, name in ((src, pb.COMM_SEND_NODE, f"send_{i}"),
                                (dst, pb.COMM_RECV_NODE, f"recv_{i}")):
                nid = counters[r]
                counters[r] += 1
                node_on[i][r] = nid
                nodes[r].append(pb.Node(id=nid, name=name, type=ty, attr=common))
        else:
            r = int(s.src[i])
            if r < 0:
                r = 0
                orphan_compute += 1
            nid = counters[r]
            counters[r] += 1
            node_on[i][r] = nid
            dur = float(s.duration[i])
            at = [pb.AttributeProto(name="duration_s", double_val=dur)]
            if kind == DELAY:
                at.append(pb.AttributeProto(name="netcosim_kind", string_val="delay"))
            nodes[r].append(pb.Node(id=nid, name=f"{'delay' if kind == DELAY else 'comp'}_{i}",
                                    type=pb.COMP_NODE, duration_micros=int(round(dur * 1e6)),
                                    attr=at))
    # dependencies (nodes were appended in topological order, so parents are already numbered)
    dropped = 0
    per_rank_pos = {r: {nd.id: j for j, nd in enumerate(nodes[r])} for r in nodes}
    for i in range(n):
        par = s.deps_of(i)
        if not par.size:
            continue
        placed = set()
        for p in par.tolist():
            hit = False
            for r, nid in node_on[i].items():
                pid = node_on[p].get(r)
                if pid is not None:
                    nodes[r][per_rank_pos[r][nid]].data_deps.append(pid)
                    hit = True
            if hit:
                placed.add(p)
        dropped += len(set(par.tolist()) - placed)
    if dropped:
        warnings.warn(f"{dropped} dependencies join schedule nodes with no rank in common; "
                      f"Chakra traces cannot express them (dependencies stay within one rank's "
                      f"file), so they are not written", stacklevel=2)
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


def write_schedule(schedule: Schedule, out_dir, prefix: str = "netcosim",
                   n_ranks: int | None = None, compress: bool = False) -> list[Path]:
    """Write one ``<prefix>.<rank>.et`` (``.et.gz`` with ``compress``) per rank; returns the
    paths."""
    d = Path(out_dir)
    if d.exists() and not d.is_dir():
        raise InputError(f"chakra output {str(out_dir)!r}: exists and is not a directory")
    d.mkdir(parents=True, exist_ok=True)
    paths = []
    for r, msgs in schedule_to_traces(schedule, n_ranks).items():
        data = frame(msgs)
        p = d / f"{prefix}.{r}.et{'.gz' if compress else ''}"
        # mtime=0: the same schedule gives the same bytes (reproducible example files)
        p.write_bytes(gzip.compress(data, mtime=0) if compress else data)
        paths.append(p)
    return paths
