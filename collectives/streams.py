"""Collectives as concurrent streams: the scalable form of a ring-like schedule.

A ring reduce-scatter over g ranks is g-1 steps in which every rank sends one shard to its
successor. The fluid engine gives each step's g transfers their max-min rates, then the next
step starts; when every rank always sends on the same connection, the whole collective is the
same as g concurrent streams (one per connection), each carrying everything its connection
carries in all steps, with the path latency paid once per step, and moving in lock step
(each step waits for the slowest connection). ``stream_of`` recognises such a template;
``network_detail = "auto"`` turns it into one transfer over a member set (netcore.members), so a
collective over 65,536 ranks costs one flow instead of 2^33 (docs/scale.md).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from netcore.schedule import DELAY, TRANSFER, Schedule
from topo.arrays import unique
from topo.errors import InputError


@dataclass(frozen=True)
class Stream:
    src: np.ndarray  # int64 (c,) local rank of each connection's sender
    dst: np.ndarray  # int64 (c,) its receiver
    nbytes: int  # bytes the busiest connection carries over all steps
    steps: int  # transfers each connection carries in series
    delay_s: float  # per-step software latency (DELAY nodes before each transfer), summed
    min_s: float = 0.0  # a protocol's throughput cap: the busiest connection's payload / cap


def stream_of(template: Schedule) -> Stream | None:
    """The stream form of ``template`` (over local ranks), or None when it has none: some rank
    sends on two connections, or connections carry different numbers of steps (trees,
    halving-doubling, all-to-all)."""
    t = template.kind == TRANSFER
    if not t.any():
        return None
    if ((template.kind != TRANSFER) & (template.kind != DELAY)).any():
        return None
    src, dst = template.src[t].astype(np.int64), template.dst[t].astype(np.int64)
    g = int(max(src.max(), dst.max())) + 1
    conn = src * g + dst
    keys, count = np.unique(conn, return_counts=True)
    csrc = keys // g
    if len(unique(csrc)) != len(keys):  # a rank with two connections
        return None
    if (count != count[0]).any():
        return None
    nbytes = np.bincount(np.searchsorted(keys, conn), weights=template.size[t].astype(float),
                         minlength=len(keys))
    is_d = template.kind == DELAY
    launch = np.zeros(template.n, dtype=bool)
    if "launch_latency" in template.labels:  # a protocol's launch delay, once per rank
        launch = is_d & (template.label == template.labels.index("launch_latency"))
    delays = template.duration[is_d & ~launch]
    per_step = float(delays.max()) if delays.size else 0.0
    if delays.size and delays.size != t.sum():
        # step latencies that are not one per transfer, or a protocol's throughput-cap
        # delays beside them: keep the full form
        return None
    if delays.size and int(template.meta.get("chunks", 1) or 1) > 1:
        return None  # the step latency overlaps the sender's other chunks: full form
    first = float(template.duration[launch].max()) if launch.any() else 0.0
    return Stream(csrc, keys % g, int(nbytes.max()), int(count[0]),
                  per_step * int(count[0]) + first)


# ring-family algorithms whose stream form is known without building the template
RING_STREAMS = {("all_reduce", "ring"), ("reduce_scatter", "ring"), ("all_gather", "ring")}


def ring_stream(op: str, algorithm: str, g: int, nbytes: int, chunks: int = 1,
                step_latency_s: float = 0.0, wire=(1, 1), launch_s: float = 0.0,
                rate_cap: float = 0.0) -> Stream | None:
    """The stream form of a ring all-reduce / reduce-scatter / all-gather over g ranks
    computed from its block layout in O(g * chunks), as ``stream_of`` would find it in the
    template (which has g(g-1) transfers per phase); None for other algorithms.

    ``wire``: a protocol's (payload, wire) byte ratio, applied per transfer as the builders
    do; ``step_latency_s``: the per-step latency (the largest of the ring's connections);
    ``launch_s``: the protocol's launch latency, paid once; ``rate_cap``: a protocol's
    throughput cap in payload bytes/s (protocols.Costs.rate_cap; 0: none), which the stream
    meets as the full ring does, its busiest connection's payload / cap at least (exact when
    the cap binds on every step or on none). With several chunks and a step
    latency the full ring overlaps a step's latency with the sender's other chunks
    (collectives/_plan.py), which one stream cannot say: None then (the full form)."""
    if (op, algorithm) not in RING_STREAMS or g < 2 or nbytes <= 0:
        return None
    if chunks > 1 and step_latency_s > 0:
        return None
    steps = chunks * (g - 1) * (2 if op == "all_reduce" else 1)
    if steps > np.iinfo(np.int32).max:  # a schedule's steps column is int32
        raise InputError(f"chunks = {chunks}: a ring over {g:,} ranks in {chunks:,} chunks is "
                         f"{steps:,} steps per connection, more than the 2,147,483,647 a "
                         f"schedule counts; use fewer chunks")
    num, den = (int(x) for x in wire)
    # the busiest connection carries about (1 or 2) x nbytes x num / den: past int64 the
    # block sums below wrap (a 6e18-byte all-reduce became "bytes -7196744073709551616")
    busiest = ((2 if op == "all_reduce" else 1) * (nbytes * num + den - 1) // den * (g - 1) // g
               + 2 * g * chunks)  # + rounding of blocks to whole bytes
    if busiest >= 2**63:
        raise InputError(f"bytes = {nbytes}: a ring {op} over {g:,} ranks moves about "
                         f"{busiest:,} bytes per connection, beyond the {2**63 - 1:,} an "
                         f"int64 holds")
    sent = ring_sent(op, int(nbytes), int(chunks), g, num, den)
    p = np.arange(g)
    min_s = (float(ring_sent(op, int(nbytes), int(chunks), g, 1, 1).max()) / rate_cap
             if rate_cap > 0 else 0.0)
    return Stream(p, (p + 1) % g, int(sent.max()), steps,
                  steps * float(step_latency_s) + float(launch_s), min_s)


def ring_sent(op: str, nbytes: int, chunks: int, g: int, num: int = 1,
              den: int = 1) -> np.ndarray:
    """Bytes each ring member sends over the collective, for the block sizes
    ``chunked_layout(nbytes, chunks, g)`` with each block's wire bytes ceil(block x den / num):
    member p sends every shard but its own in reduce-scatter, every shard but p+1's in
    all-gather (collectives/_ring.py), chunk by chunk. In O(g) memory: the layout has at most two chunk sizes (the first
    ``nbytes % chunks`` chunks one byte larger), and a chunk of t bytes gives member p the block
    t // g + (p < t % g), so the sums over chunks are sums over the two sizes, counted (20,000
    chunks over 65,536 ranks made 1.3 G-entry arrays before)."""
    q, r = divmod(int(nbytes), int(chunks))
    p = np.arange(g)
    rs = np.zeros(g, dtype=np.int64)
    ag = np.zeros(g, dtype=np.int64)
    for t, count in ((q, chunks - r), (q + 1, r)):
        if count == 0:
            continue
        blk = t // g + (p < t % g)
        if num != den:
            blk = (blk * den + num - 1) // num
        total = int(blk.sum())
        rs += count * (total - blk)
        ag += count * (total - np.roll(blk, -1))
    return {"reduce_scatter": rs, "all_gather": ag, "all_reduce": rs + ag}[op]


def stream_schedule(ranks, st: Stream, label: str) -> Schedule:
    """A collective in stream form over host ids ``ranks``: (the summed per-step latency as a
    delay, then) one transfer standing for every connection, ``st.steps`` steps each, (and
    beside it a delay of ``st.min_s``, a protocol's throughput cap, which the collective's end
    waits for too)."""
    from netcore.members import MemberSets

    ranks = np.asarray(ranks, dtype=np.int64)
    src, dst = ranks[st.src], ranks[st.dst]
    sets = MemberSets(np.array([0, len(src)]), src, dst)
    labels = [label]
    rows = []  # (kind, dst, size, duration, label index, member set, steps, parents)

    def delay(seconds, name, parents):
        labels.append(name)
        rows.append((DELAY, -1, 0, seconds, len(labels) - 1, -1, 1, parents))

    if st.delay_s > 0:
        delay(st.delay_s, "step_latency", [])
    first = [0] if rows else []
    rows.append((TRANSFER, int(dst[0]), st.nbytes, 0.0, 0, 0, st.steps, first))
    if st.min_s > 0:
        delay(st.min_s, "throughput_cap", first)
    kind, to, size, dur, label_of, mset, steps, parents = zip(*rows)
    n = len(rows)
    return Schedule(kind=np.array(kind), src=np.full(n, src[0]), dst=np.array(to),
                    size=np.array(size), duration=np.array(dur), start=np.zeros(n),
                    dep_ptr=np.concatenate([[0], np.cumsum([len(p) for p in parents])]),
                    dep_idx=np.array([q for p in parents for q in p], dtype=np.int64),
                    label=np.array(label_of), labels=labels, mset=np.array(mset),
                    steps=np.array(steps), sets=sets)
