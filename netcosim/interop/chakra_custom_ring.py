"""A ring all-reduce written as per-rank send/recv Chakra traces, in the shape the MLCommons
custom-collective tool chain gives them (MSCCLang -> XML -> Chakra, as in ASTRA-sim's
``examples/system/custom_collectives``): no COMM_COLL node, but on every rank and channel one
program-order chain of steps where each step posts its send *before* its receive.

For ``n`` ranks, at ring step ``k = 0 .. 2(n-1)-1`` rank ``r`` sends block ``(r - k) mod n`` to
``r + 1`` and receives block ``(r - 1 - k) mod n`` from ``r - 1``; in the reduce-scatter half
(``k <= n-2``) the receive is followed by a COMP node (the reduction, ``reduce_us`` long; the
converter's ``rrc`` step). Each block is cut into ``channels`` parallel chains (MSCCL thread
blocks; ``comm_tag`` = channel, as the converter writes it) and, within a chain, into ``chunks``
pieces sent one after the other at every step.

Dependencies, per chain:
* data: a send of block b at step k waits for the node that produced b at step k-1 (the
  reduction in the reduce-scatter half, else the receive); a reduction waits for its receive;
* program order: every node waits for the node before it in the chain. With
  ``order = "ctrl"`` that edge is a ``ctrl_deps`` entry (unless it is already a data edge);
  with ``order = "data"`` every edge is a ``data_deps`` entry, as the MSCCL converter writes
  them.

Under rendezvous send/recv semantics such a trace deadlocks (a rank's receive waits for its own
send, whose partner receive waits for the next rank's send, round the ring); under eager
semantics it is the ring all-reduce of ``collectives.ring_all_reduce(ranks, nbytes,
chunks=chunks)`` (with ``channels = 1``).
"""
from __future__ import annotations

from pathlib import Path

from netcosim.interop import chakra_pb2 as pb
from netcosim.interop.chakra_reader import frame
from topo.errors import InputError

SCHEMA_VERSION = "0.0.4"


def _i(name: str, v: int) -> pb.AttributeProto:
    return pb.AttributeProto(name=name, int64_val=int(v))


def rank_nodes(rank: int, n_ranks: int, chunk_bytes: int, chunks: int = 1, channels: int = 1,
               reduce_us: int = 0, order: str = "ctrl") -> list:
    """The Chakra nodes of one rank (ids 0, 1, 2, ... in program order, channel by channel)."""
    n, r = n_ranks, rank
    nodes: list = []

    def add(kind, name, attr=(), duration_us=0, data=(), prev=None):
        node = pb.Node(id=len(nodes), name=name, type=kind, attr=list(attr),
                       duration_micros=duration_us)
        node.data_deps.extend(data)
        if prev is not None and prev not in data:
            (node.ctrl_deps if order == "ctrl" else node.data_deps).append(prev)
        nodes.append(node)
        return node.id

    for ch in range(channels):
        prev = None  # the chain's last node (program order)
        made = [None] * chunks  # node that produced each chunk's block at the previous step
        for k in range(2 * (n - 1)):
            for c in range(chunks):
                tagname = f"ch{ch}_k{k}_c{c}"
                data = () if made[c] is None else (made[c],)
                prev = add(pb.COMM_SEND_NODE, f"send_{tagname}",
                           [_i("comm_type", pb.COMM_SEND_NODE), _i("comm_dst", (r + 1) % n),
                            _i("comm_size", chunk_bytes), _i("comm_tag", ch)], data=data,
                           prev=prev)
                prev = add(pb.COMM_RECV_NODE, f"recv_{tagname}",
                           [_i("comm_type", pb.COMM_RECV_NODE), _i("comm_src", (r - 1) % n),
                            _i("comm_size", chunk_bytes), _i("comm_tag", ch)], prev=prev)
                if k <= n - 2:  # reduce-scatter half: reduce what arrived
                    prev = add(pb.COMP_NODE, f"reduce_{tagname}", duration_us=reduce_us,
                               data=(prev,), prev=prev)
                made[c] = prev
    return nodes


def ring_all_reduce_traces(n_ranks: int, nbytes: int, chunks: int = 1, channels: int = 1,
                           reduce_us: int = 0, order: str = "ctrl") -> dict[int, list]:
    """rank -> [GlobalMetadata, Node, ...] of the whole ring all-reduce of ``nbytes``."""
    for name, v, lo in (("n_ranks", n_ranks, 2), ("chunks", chunks, 1), ("channels", channels, 1),
                        ("nbytes", nbytes, 1), ("reduce_us", reduce_us, 0)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise InputError(f"{name} = {v!r}: expected an integer >= {lo}")
    if order not in ("ctrl", "data"):
        raise InputError(f"order = {order!r}: expected \"ctrl\" or \"data\"")
    pieces = n_ranks * chunks * channels
    if nbytes % pieces:
        raise InputError(f"nbytes = {nbytes}: not a multiple of ranks x chunks x channels = "
                         f"{pieces}")
    gm = pb.GlobalMetadata(version=SCHEMA_VERSION,
                           attr=[pb.AttributeProto(name="collective", string_val="allreduce")])
    return {r: [gm] + rank_nodes(r, n_ranks, nbytes // pieces, chunks, channels, reduce_us, order)
            for r in range(n_ranks)}


def write_ring_all_reduce(out_dir, n_ranks: int, nbytes: int, prefix: str = "custom_allreduce",
                          **options) -> list[Path]:
    """Write ``<prefix>.<rank>.et`` per rank into ``out_dir`` (created); returns the paths."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    paths = []
    for r, msgs in ring_all_reduce_traces(n_ranks, nbytes, **options).items():
        p = d / f"{prefix}.{r}.et"
        p.write_bytes(frame(msgs))
        paths.append(p)
    return paths
