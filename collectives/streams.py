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

from dataclasses import dataclass, replace

import numpy as np

from collectives._plan import chunked_layout
from collectives.protocols import wire_of
from netcore.schedule import BYTES_SHORT, DELAY, TRANSFER, Schedule
from netcore.sizes import MAX_BYTES
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
    # bytes all connections together carry less than nbytes x connections: shards rounded to
    # whole bytes leave some connections a byte or two short of the busiest (the schedule's
    # byte count subtracts it: netcore.schedule.BYTES_SHORT)
    short: int = 0


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
    # a step is a DAG depth. Transfers a connection carries at once (a bidirectional ring
    # over 2 ranks sends both directions' shards to its one peer in the same step) are as many
    # members over that connection, each moving its share, in one step: counted as serial
    # steps (4 instead of 2) they paid the path latency twice too often, and a tensor-parallel
    # step of such rings ran 3 % long under network_detail = "auto"
    from netcore.flow.contention import dag_levels

    cptr, cidx = template.children()
    level = dag_levels(np.diff(template.dep_ptr), cptr, cidx)[t]
    span = int(level.max()) + 1
    steps = np.bincount(np.searchsorted(keys, unique(conn * span + level) // span),
                        minlength=len(keys))
    if (steps != steps[0]).any() or count[0] % steps[0]:
        return None
    steps, at_once = int(steps[0]), int(count[0] // steps[0])
    nbytes = np.zeros(len(keys), dtype=np.int64)  # in integers: the byte counts are exact
    np.add.at(nbytes, np.searchsorted(keys, conn), template.size[t].astype(np.int64))
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
    if at_once > 1:  # each connection's bytes in as many near-equal members
        k = np.tile(np.arange(at_once), len(keys))
        nbytes = np.repeat(nbytes, at_once)
        nbytes = nbytes // at_once + (k < nbytes % at_once)
        csrc, keys = np.repeat(csrc, at_once), np.repeat(keys, at_once)
    return Stream(csrc, keys % g, int(nbytes.max()), steps, per_step * steps + first,
                  short=int((nbytes.max() - nbytes).sum()))


# ring-family algorithms whose stream form is known without building the template
RING_STREAMS = {("all_reduce", "ring"), ("reduce_scatter", "ring"), ("all_gather", "ring")}


def ring_stream(op: str, algorithm: str, g: int, nbytes: int, chunks: int = 1,
                step_latency_s: float = 0.0, wire=(1, 1), launch_s: float = 0.0,
                rate_cap: float = 0.0) -> Stream | None:
    """The stream form of a ring all-reduce / reduce-scatter / all-gather over g ranks
    computed from its block layout in O(g * chunks), as ``stream_of`` would find it in the
    template (which has g(g-1) transfers per phase); None for other algorithms.

    ``wire``: a protocol's (payload, wire) byte ratio, applied per transfer as the builders
    do; ``step_latency_s``: the per-step latency (the mean of the ring's connections', as
    collectives._ring.ring_step_latency prices a ring's steps);
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
    # the busiest connection carries about (1 or 2) x nbytes x den / num wire bytes: past
    # int64 the block sums below wrap (a 6e18-byte all-reduce became "bytes
    # -7196744073709551616"; with num / den for den / num, an LL ring all-reduce of 3 x 2^61
    # bytes over 4 ranks passed and reported 2^61 bytes per connection for 9 x 2^61)
    busiest = ((2 if op == "all_reduce" else 1) * (nbytes * den + num - 1) // num * (g - 1) // g
               + 2 * g * chunks * den)  # + rounding of blocks to whole bytes
    if busiest >= 2**63:
        raise InputError(f"bytes = {nbytes}: a ring {op} over {g:,} ranks moves about "
                         f"{busiest:,} bytes per connection, beyond the {MAX_BYTES:,} an "
                         f"int64 holds")
    sent = ring_sent(op, int(nbytes), int(chunks), g, num, den)
    p = np.arange(g)
    min_s = (float(ring_sent(op, int(nbytes), int(chunks), g, 1, 1).max()) / rate_cap
             if rate_cap > 0 else 0.0)
    return Stream(p, (p + 1) % g, int(sent.max()), steps,
                  steps * float(step_latency_s) + float(launch_s), min_s,
                  int((sent.max() - sent).sum()))


def ring_sent(op: str, nbytes: int, chunks: int, g: int, num: int = 1,
              den: int = 1) -> np.ndarray:
    """Bytes each ring member sends over the collective, for the block sizes
    ``chunked_layout(nbytes, chunks, g)`` with each block's wire bytes ceil(block x den / num):
    member p sends every shard but its own in reduce-scatter, every shard but p+1's in
    all-gather (collectives/_ring.py), chunk by chunk. In O(g) memory: the layout has at most
    two chunk sizes (the first ``nbytes % chunks`` chunks one byte larger), and a chunk of t
    bytes gives member p the block t // g + (p < t % g), so the sums over chunks are sums over
    the two sizes, counted (20,000 chunks over 65,536 ranks made 1.3 G-entry arrays before)."""
    q, r = divmod(int(nbytes), int(chunks))
    p = np.arange(g)
    rs = np.zeros(g, dtype=np.int64)
    ag = np.zeros(g, dtype=np.int64)
    for t, count in ((q, chunks - r), (q + 1, r)):
        if count == 0:
            continue
        blk = t // g + (p < t % g)
        if num != den:
            blk = wire_of(blk, num, den)
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
    short = np.where(np.array(kind) == TRANSFER, st.short, -1)
    return Schedule(kind=np.array(kind), src=np.full(n, src[0]), dst=np.array(to),
                    size=np.array(size), duration=np.array(dur), start=np.zeros(n),
                    dep_ptr=np.concatenate([[0], np.cumsum([len(p) for p in parents])]),
                    dep_idx=np.array([q for p in parents for q in p], dtype=np.int64),
                    label=np.array(label_of), labels=labels, mset=np.array(mset),
                    steps=np.array(steps), sets=sets, extra={BYTES_SHORT: short})


# ------------------------------------------------------------------ compositions of rings
# The hierarchical and torus all-reduce are ring phases in sequence (collectives/hierarchical.py).
# With one chunk a rank sends its whole phase before the next one starts, so each phase is a
# set of concurrent ring streams (one per group, rail or torus line) and the collective is
# those sets one after another. With more chunks the phases pipeline chunk by chunk, which
# streams in sequence cannot say: the full form then.
PHASED_STREAMS = {("all_reduce", "hierarchical"), ("all_reduce", "torus")}


@dataclass(frozen=True)
class Phase:
    """One ring phase over R rings of m members at once, each ring one stream."""
    src: np.ndarray  # int64 (R, m) local ranks: row r, the senders of ring r's connections
    dst: np.ndarray  # int64 (R, m) their receivers
    nbytes: np.ndarray  # int64 (R,) wire bytes ring r's busiest connection carries
    steps: int  # transfers each connection carries in series
    delay_s: np.ndarray  # float (R,) summed step latencies of ring r (and the launch, first)
    min_s: np.ndarray  # float (R,) a protocol's throughput cap: busiest payload / cap
    short: np.ndarray  # int64 (R,) bytes ring r's connections carry less than nbytes x m
    label: str
    # what the full form does in this phase (collectives._ring.ring_phases): a reduce-scatter,
    # an all-gather, or both in turn; and ring r's latency per step. The stream does not need
    # them; netcosim.stream_sharing.phase_drift replays the full form's per-rank order with them
    rs: bool = True
    ag: bool = False
    step_s: np.ndarray | float = 0.0


def ring_phase(members, shard, rs: bool, ag: bool, label: str, wire=(1, 1),
               rate_cap: float = 0.0) -> Phase:
    """The stream form of ring reduce-scatter and/or all-gather over each row of ``members``
    (R, m) whose shard q holds ``shard[r, q]`` payload bytes (collectives/_ring.py): member p
    sends every shard but its own in reduce-scatter and every shard but p+1's in all-gather,
    each transfer on the wire as ceil(payload x den / num) bytes, as the builders count it.
    No step latency yet (``with_latency``)."""
    members = np.asarray(members, dtype=np.int64)
    shard = np.asarray(shard, dtype=np.int64)
    num, den = (int(x) for x in wire)

    def sent(blk):
        # every int64 sum below is at most (rs + ag) x a row's total: when that may pass 2^63
        # (bytes of exabytes), the sums run in Python integers and a result beyond int64 is
        # refused (they wrapped: a 2^62-byte LL128 hierarchical all-reduce moved 0 bytes)
        exact = float(np.abs(blk).astype(np.float64).sum(axis=1).max(initial=0.0)) \
            * (rs + ag) >= 2.0**62
        if exact:
            blk = blk.astype(object)
        tot = blk.sum(axis=1, keepdims=True)
        out = np.zeros(blk.shape, dtype=object if exact else np.int64)
        if rs:
            out = out + (tot - blk)
        if ag:
            out = out + (tot - np.roll(blk, -1, axis=1))
        if exact:
            top = max((int(x) for x in out.reshape(-1)), default=0)
            if top > MAX_BYTES:
                raise InputError(f"bytes: a ring phase ({label}) moves {top:,} bytes over one "
                                 f"connection, beyond the {MAX_BYTES:,} an int64 holds")
            out = out.astype(np.int64)
        return out

    w = sent(wire_of(shard, num, den) if num != den else shard)
    busiest = w.max(axis=1)
    R, m = members.shape
    min_s = (sent(shard).max(axis=1) / rate_cap if rate_cap > 0 else np.zeros(R))
    return Phase(members, np.roll(members, -1, axis=1), busiest, (m - 1) * (rs + ag),
                 np.zeros(R), min_s, (busiest[:, None] - w).sum(axis=1), label, bool(rs),
                 bool(ag))


def with_latency(ph: Phase, per_step_s, first_s: float = 0.0) -> Phase:
    """``ph`` with a step latency of ``per_step_s`` per ring (R,) or for all, paid every step,
    and ``first_s`` (a launch) once."""
    per = np.broadcast_to(np.asarray(per_step_s, dtype=np.float64), ph.nbytes.shape)
    return replace(ph, delay_s=per * ph.steps + float(first_s), step_s=per)


def hierarchical_phases(n: int, g: int, nbytes: int, wire=(1, 1),
                        rate_cap: float = 0.0) -> list[Phase]:
    """The one-chunk hierarchical all-reduce (collectives.hierarchical_all_reduce) over local
    ranks 0..n-1 in groups of g, as its three phases: reduce-scatter in every group, all-reduce
    of shard q on every rail q, all-gather in every group. Blocks as the builder cuts them:
    block q*G + j is piece j of intra shard q (G = n / g groups)."""
    G = n // g
    blk = chunked_layout(int(nbytes), 1, n).reshape(g, G)  # [q, j]
    groups = np.arange(n).reshape(G, g)
    intra = np.broadcast_to(blk.sum(axis=1), (G, g))
    out = []
    if g > 1:
        out.append(ring_phase(groups, intra, True, False, "intra_reduce_scatter", wire,
                              rate_cap))
    if G > 1:
        out.append(ring_phase(groups.T, blk, True, True, "inter_all_reduce", wire, rate_cap))
    if g > 1:
        out.append(ring_phase(groups, intra, False, True, "intra_all_gather", wire, rate_cap))
    return out


def torus_phases(dims, nbytes: int, wire=(1, 1), rate_cap: float = 0.0) -> list[Phase]:
    """The one-chunk torus all-reduce (collectives.torus_all_reduce) over local ranks in
    row-major order of ``dims``: reduce-scatter along each dimension in turn, on the shard the
    previous one left (a contiguous range of ``stride`` blocks), then all-gather in reverse."""
    import math

    dims = tuple(int(d) for d in dims)
    n = math.prod(dims)
    cum = np.concatenate([[0], np.cumsum(chunked_layout(int(nbytes), 1, n))])
    coords = np.stack(np.unravel_index(np.arange(n), dims), axis=1)
    strides = np.array([math.prod(dims[j + 1:]) for j in range(len(dims))], dtype=np.int64)
    rings = {}
    for j in (j for j, d in enumerate(dims) if d > 1):
        d, st = dims[j], int(strides[j])
        base = np.flatnonzero(coords[:, j] == 0)  # one ring per line along dimension j
        prefix = (coords[base][:, :j] * strides[:j]).sum(axis=1)
        lo = prefix[:, None] + np.arange(d)[None, :] * st
        rings[j] = (base[:, None] + np.arange(d)[None, :] * st, cum[lo + st] - cum[lo])
    return ([ring_phase(*rings[j], True, False, f"dim{j}_reduce_scatter", wire, rate_cap)
             for j in rings] +
            [ring_phase(*rings[j], False, True, f"dim{j}_all_gather", wire, rate_cap)
             for j in reversed(list(rings))])


def phased_schedule(ranks, phases: list[Phase], label: str) -> Schedule:
    """Phases of ring streams in sequence over host ids ``ranks``: per ring, (its summed step
    latency as a delay, then) one transfer standing for its connections, ``steps`` steps each,
    (and beside it a delay of its throughput cap). A ring starts when every ring of earlier
    phases that shares a rank with it has ended: with one chunk a rank's next phase waits for
    its last receive of this one. All in arrays, no loop per ring."""
    from netcore.members import MemberSets

    ranks = np.asarray(ranks, dtype=np.int64)
    n = len(ranks)
    kinds, srcs, dsts, sizes, durs, labs, msets, steps, shorts = ([] for _ in range(9))
    ch, pa = [], []
    labels = [label]
    set_ptr, set_src, set_dst = [np.zeros(1, np.int64)], [], []
    n_nodes = n_sets = n_mem = 0
    last = np.full(n, -1, dtype=np.int64)  # per rank: the last ring (over all phases) it is in
    end_t, end_c = [], []  # per ring so far: its transfer, its cap delay (or -1)

    def lab(name):
        if name not in labels:
            labels.append(name)
        return labels.index(name)

    def add(kind, src, dst, size, dur, label_i, mset, nsteps, short):
        nonlocal n_nodes
        k = len(src)
        kinds.append(np.full(k, kind, np.int8))
        srcs.append(src)
        dsts.append(dst)
        sizes.append(np.broadcast_to(size, (k,)))
        durs.append(np.broadcast_to(np.asarray(dur, dtype=np.float64), (k,)))
        labs.append(np.full(k, label_i, np.int16))
        msets.append(np.broadcast_to(mset, (k,)))
        steps.append(np.full(k, nsteps, np.int64))
        shorts.append(np.broadcast_to(short, (k,)))
        ids = np.arange(n_nodes, n_nodes + k)
        n_nodes += k
        return ids

    def edges(child, parent):
        ok = parent >= 0
        ch.append(child[ok])
        pa.append(parent[ok])

    for ph in phases:
        R, m = ph.src.shape
        first = ranks[ph.src[:, 0]]
        none = np.full(R, -1, dtype=np.int64)
        # ids in dependency order: the step latency, the transfer, its cap
        lat = (add(DELAY, first, none, 0, ph.delay_s, lab("step_latency"), -1, 1, -1)
               if (ph.delay_s > 0).any() else None)
        tid = add(TRANSFER, first, ranks[ph.dst[:, 0]], ph.nbytes, 0.0, lab(ph.label),
                  n_sets + np.arange(R), ph.steps, ph.short)
        cap = (add(DELAY, first, none, 0, ph.min_s, lab("throughput_cap"), -1, 1, -1)
               if (ph.min_s > 0).any() else none)
        if lat is not None:  # the transfer and its cap start after the ring's step latency
            edges(tid, lat)
            edges(cap, np.where(cap >= 0, lat, -1))
            entry = [lat]
        else:
            entry = [tid, cap]
        # the rings of earlier phases that share a rank with ring r: (r, earlier ring) pairs,
        # and r's entry nodes wait for their transfers and caps
        base = n_sets  # rings so far (one member set each)
        ring_of = np.repeat(np.arange(R), m)
        prev = last[ph.src.ravel()]
        ok = prev >= 0
        if ok.any():
            pairs = unique(ring_of[ok] * base + prev[ok])
            r_, p_ = pairs // base, pairs % base
            done_t, done_c = np.concatenate(end_t), np.concatenate(end_c)
            for e in entry:
                for done in (done_t, done_c):
                    keep = e[r_] >= 0
                    edges(e[r_[keep]], done[p_[keep]])
        last[ph.src.ravel()] = base + ring_of
        end_t.append(tid)
        end_c.append(cap)
        set_ptr.append(n_mem + m * np.arange(1, R + 1))
        set_src.append(ranks[ph.src.ravel()])
        set_dst.append(ranks[ph.dst.ravel()])
        n_sets += R
        n_mem += R * m
    ch_ = np.concatenate(ch) if ch else np.zeros(0, np.int64)
    pa_ = np.concatenate(pa) if pa else np.zeros(0, np.int64)
    order = np.argsort(ch_, kind="stable")
    ptr = np.concatenate([[0], np.cumsum(np.bincount(ch_, minlength=n_nodes))])
    sets = MemberSets(np.concatenate(set_ptr), np.concatenate(set_src), np.concatenate(set_dst))
    cat = np.concatenate
    kind = cat(kinds)
    mset = np.where(kind == TRANSFER, cat(msets), -1)
    return Schedule(kind=kind, src=cat(srcs), dst=cat(dsts), size=cat(sizes).astype(np.int64),
                    duration=cat(durs), start=np.zeros(n_nodes), dep_ptr=ptr,
                    dep_idx=pa_[order], label=cat(labs), labels=labels, mset=mset,
                    steps=cat(steps), sets=sets,
                    extra={BYTES_SHORT: np.where(kind == TRANSFER, cat(shorts), -1)})


def composed_phases(algorithm: str, ranks, nbytes: int, costs, group_size=None,
                    dims=None) -> list[Phase] | None:
    """The one-chunk hierarchical or torus all-reduce over host ids ``ranks`` as phases of ring
    streams, with ``costs`` (collectives.protocols.Costs) applied as the builders apply them:
    wire bytes per transfer, each ring's step latency (the mean of its connections', as
    collectives._ring.ring_step_latency prices it), the launch once before the first phase, the LL
    throughput cap. None for other algorithms."""
    import math

    from collectives._plan import check_int

    ranks = np.asarray(ranks, dtype=np.int64)
    n = len(ranks)
    wire, cap = (costs.num, costs.den), costs.rate_cap(ranks)
    try:  # options the builder would refuse: None, and the builder says why
        if algorithm == "hierarchical" and group_size is not None:
            g = check_int(group_size, "group_size")
            if n % g:
                return None
            phases = hierarchical_phases(n, g, nbytes, wire, cap)
        elif algorithm == "torus" and dims is not None:
            dims = tuple(check_int(d, "dims") for d in dims)
            if math.prod(dims) != n:
                return None
            phases = torus_phases(dims, nbytes, wire, cap)
        else:
            return None
    except (InputError, TypeError):
        return None
    if not phases:
        return None
    out = []
    for i, ph in enumerate(phases):
        # each ring's step latency as the builders price it: its connections' mean
        # (collectives._ring.ring_step_latency; a user's fixed latency is the same everywhere)
        per = costs.mean_latency(ranks[ph.src], ranks[ph.dst]) if costs.any_latency else 0.0
        out.append(with_latency(ph, per, costs.launch_s if i == 0 else 0.0))
    return out
