"""Tree shapes over rank indices 0..n-1 (pure index arithmetic, numpy)."""
from __future__ import annotations

import numpy as np


def inorder_btree(n: int) -> np.ndarray:
    """Parent of every node of the balanced in-order binary tree over positions 1..n (NCCL's
    "btree" shape): a position whose lowest set bit is b has children at +-b/2 and its parent
    one level up at ``(x | 2b) & ~b``; parents beyond n are skipped upwards. The root is the
    highest power of two <= n. Returns parent positions (0-based, -1 for the root)."""
    x = np.arange(1, n + 1, dtype=np.int64)
    par = np.zeros(n, dtype=np.int64)
    cur = x.copy()
    todo = np.ones(n, dtype=bool)
    top = 1 << int(n).bit_length()
    while todo.any():
        lsb = cur & -cur
        up = (cur | (lsb << 1)) & ~lsb
        ok = todo & (up <= n)
        par[ok] = up[ok]
        done_root = todo & (lsb >= top)
        par[done_root] = 0
        todo &= ~(ok | done_root)
        cur = np.where(todo, up, cur)
    return par - 1


def double_binary_trees(n: int) -> np.ndarray:
    """Two complementary trees (NCCL 2.4's double binary tree): tree 0 is the in-order tree on
    ranks 0..n-1, tree 1 the same shape mirrored (n even) or shifted by one (n odd), so the
    leaves of one tree (odd positions) are the inner nodes of the other. Returns parents
    (2, n), -1 at each root."""
    p0 = inorder_btree(n)
    ranks = np.arange(n)
    # position of rank i in tree 1, and back
    pos1 = (n - 1 - ranks) if n % 2 == 0 else (ranks - 1) % n
    rank_at = np.empty(n, dtype=np.int64)
    rank_at[pos1] = ranks
    par_pos = p0[pos1]
    p1 = np.where(par_pos >= 0, rank_at[np.maximum(par_pos, 0)], -1)
    return np.stack([p0, p1])


def depths(parent: np.ndarray) -> np.ndarray:
    d = np.zeros(len(parent), dtype=np.int64)
    cur = parent.copy()
    while (cur >= 0).any():
        d += cur >= 0
        cur = np.where(cur >= 0, parent[np.maximum(cur, 0)], -1)
    return d


def heights(parent: np.ndarray) -> np.ndarray:
    """Per node, the longest chain of children below it: 0 for a leaf. In a tree reduced
    upwards (a node sends once all its children's sums arrived) a node's send is the
    (height + 1)-th stage of a chunk, whatever its depth: leaves at unequal depths (a tree of
    n not a power of two) send at once."""
    parent = np.asarray(parent, dtype=np.int64)
    h = np.zeros(len(parent), dtype=np.int64)
    kid = np.flatnonzero(parent >= 0)
    while True:
        new = h.copy()
        np.maximum.at(new, parent[kid], h[kid] + 1)
        if np.array_equal(new, h):
            return h
        h = new


def binomial_parent(n: int) -> np.ndarray:
    """Binomial tree over relative index v (root 0): parent(v) = v minus its highest bit; v
    receives in round log2(highbit(v)) and sends to v + 2^r in every later round r."""
    v = np.arange(n, dtype=np.int64)
    hb = np.zeros(n, dtype=np.int64)
    hb[1:] = 1 << (np.floor(np.log2(v[1:])).astype(np.int64))
    # guard floating log2 at exact powers (fix any off-by-one)
    hb = np.where(hb > v, hb >> 1, hb)
    hb = np.where((hb << 1) <= v, hb << 1, hb)
    par = v - hb
    par[0] = -1
    return par


def binomial_reduce_depths(n: int) -> np.ndarray:
    """How many sums each rank v of the binomial reduce (parents as ``binomial_parent``) waits
    for one after another: 0 for a leaf, else 1 + the most of its children's. A rank sends
    once its children's sums arrived, so rank v's send is the (depth + 1)-th stage of a chunk,
    and depth[0] is the tree's stage count. The longest chain below v adds the smallest bits
    above v's highest one (v + 2^b + 2^(b+1) + ...; b = bit length of v) while it stays
    below n: the largest k with 2^b (2^k - 1) <= n - 1 - v."""
    v = np.arange(n, dtype=np.int64)
    b = np.frexp(v.astype(np.float64))[1].astype(np.int64)  # bit length (0 for v = 0)
    room = ((n - 1 - v) >> b) + 1
    return np.frexp(room.astype(np.float64))[1].astype(np.int64) - 1
