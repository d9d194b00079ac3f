"""Ring reduce-scatter / all-gather phases over many rings at once (one numpy batch per phase).

Used by ring, bidirectional ring, hierarchical and torus all-reduce and by ring reduce-scatter
and all-gather. Convention: a ring has m members at positions p = 0..m-1 and the data it
handles is cut into m shards; member p sends to member p+1 (mod m).

* reduce-scatter, step k = 0..m-2: member p sends shard (p-k-1) mod m to p+1, which adds it to
  its own copy. After m-1 steps member p holds shard p fully reduced.
* all-gather, step k = 0..m-2: member p sends shard (p-k) mod m to p+1, which stores it.
  Member p starts with shard p; after m-1 steps every member holds every shard.

Dependencies of the send of (step k, member p, chunk c):
* data: the transfer that brought that shard to p at step k-1 (member p-1's send), or at step
  0 the ``ready`` node of p (its data, e.g. the end of an earlier phase);
* order: p's previous send (step k chunk c-1, or step k-1 last chunk, or ``prev_send``): a
  rank pushes one slice after another on its connection, which is what lets C chunks pipeline;
* a reduce also waits for the receiver's ``ready`` (it adds into data that must be there).
"""
from __future__ import annotations

import numpy as np

from collectives._plan import Plan


def ring_phases(plan: Plan, members: np.ndarray, lo: np.ndarray, cnt, *, rs: bool, ag: bool,
                ready: np.ndarray | None = None, prev_send: np.ndarray | None = None,
                labels=("reduce_scatter", "all_gather"), tag0: int = 0) -> dict:
    """Plan RS and/or AG over R rings. ``members`` (R, m) rank indices; ``lo``/``cnt`` (R, m, C)
    first block and block count (stride 1) of shard q of ring r for chunk c; ``ready`` (R, m, C)
    and ``prev_send`` (R, m) node ids or -1.

    Returns ``last_recv`` (R, m, C): the node after which member p holds its result for chunk
    c (its shard for RS, everything for AG), and ``last_send`` (R, m)."""
    members = np.asarray(members, dtype=np.int64)
    R, m = members.shape
    C = lo.shape[2]
    cnt = np.broadcast_to(np.asarray(cnt, dtype=np.int64), lo.shape)
    if ready is None:
        ready = np.full((R, m, C), -1, dtype=np.int64)
    if prev_send is None:
        prev_send = np.full((R, m), -1, dtype=np.int64)
    last_recv, last_send = ready.copy(), prev_send.copy()
    if m == 1:
        return {"last_recv": last_recv, "last_send": last_send}
    K = m - 1
    step_s = ring_step_latency(plan, members)
    if step_s is not None:
        step_s = np.broadcast_to(step_s[None, :, None, None], (K, R, m, C))
    k = np.arange(K)[:, None, None, None]
    r = np.arange(R)[None, :, None, None]
    p = np.arange(m)[None, None, :, None]
    c = np.arange(C)[None, None, None, :]
    src = np.broadcast_to(members[None, :, :, None], (K, R, m, C))
    dst = np.broadcast_to(np.roll(members, -1, axis=1)[None, :, :, None], (K, R, m, C))
    tag = tag0
    for phase, on in (("rs", rs), ("ag", ag)):
        if not on:
            continue
        shard = (p - k - 1) % m if phase == "rs" else (p - k) % m
        shard = np.broadcast_to(shard, (K, R, m, C))
        rr = np.broadcast_to(r, (K, R, m, C))
        cc = np.broadcast_to(c, (K, R, m, C))
        ids = plan.transfers(src, dst, lo[rr, shard, cc], n=cnt[rr, shard, cc],
                             reduce=phase == "rs",
                             label=labels[0] if phase == "rs" else labels[1],
                             tag=tag + np.broadcast_to(k, (K, R, m, C)), step_s=step_s)
        tag += K
        # data: step 0 needs the sender's own shard (ready); step k the previous receive
        if phase == "rs" or not rs:
            plan.deps(ids[0], ready)
        else:
            plan.deps(ids[0], last_recv)  # AG after RS: the shard p just completed
        plan.deps(ids[1:], np.roll(ids[:-1], 1, axis=2))
        if phase == "rs":
            plan.deps(ids, np.roll(ready, -1, axis=1)[None])  # receiver adds into its data
        # order: each member's sends in (step, chunk) sequence
        seq = ids.transpose(1, 2, 0, 3).reshape(R, m, K * C)
        plan.order(seq[:, :, 1:], seq[:, :, :-1])
        plan.order(seq[:, :, 0], last_send)
        last_send = seq[:, :, -1].copy()
        # member p's final receive of each chunk (the sender is p-1, at the last step)
        last_recv = np.roll(ids[-1], 1, axis=1).copy()
    return {"last_recv": last_recv, "last_send": last_send}


def ring_step_latency(plan: Plan, members: np.ndarray) -> np.ndarray | None:
    """Per ring (R,), the protocol step latency each of its steps pays: the mean over the
    ring's connections. A one-chunk ring moves in lock step (collectives/_plan.py), so pricing
    every step at its own connection's latency would make every step cost the slowest one; in
    NCCL a step's data crosses one connection after another around the ring, and its tuner
    charges the ring the sum over its steps of each step's own latency (src/graph/tuning.cc:
    nInterSteps x the network figure + the rest x the NVLink one), which is the steps x the
    connections' mean. Differs from every connection's own figure only where a ring's
    connections differ (a ring over several two_tier nodes). None: the protocol's own (no
    protocol, a user's fixed step latency, or several chunks, which are not in lock step)."""
    costs = plan.costs
    if costs.protocol is None or costs.fixed_step_s is not None or not costs.any_latency or \
            plan.chunks > 1:
        return None  # several chunks: a rank streams them, each step at its own latency
    nodes = plan.nodes[members]
    return costs.mean_latency(nodes, np.roll(nodes, -1, axis=1))
