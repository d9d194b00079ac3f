# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# distutils: language = c++
"""Compiled routing kernels over flat arrays (no numpy C-API: typed memoryviews only).

The graph is the Topology's out-going CSR ``(ptr, nbr, dl)`` (neighbours ascending). Directed
link ``l`` and its reverse ``l ^ 1`` are the two halves of one physical link, so the in-link of
``v`` from ``w`` is the reverse of the out-link ``v -> w``: reverse BFS needs no second CSR.

A node ``w`` may be *entered* on the way to ``d`` when ``w == d``, or ``w`` is a switch, or hosts
forward (torus). A host that is the source is only left, never entered, so it needs no rule.
"""
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint64_t
from cython.operator cimport dereference as deref
from libc.string cimport memcpy
from libcpp.unordered_map cimport unordered_map
from libcpp.vector cimport vector

import numpy as np

# policy codes for walk_single (routing.py maps names to these)
cdef enum:
    C_SHORTEST = 0
    C_ECMP = 1
    C_DMODK = 2
    C_DMODK_LEVEL = 3

SHORTEST = C_SHORTEST
ECMP = C_ECMP
DMODK = C_DMODK
DMODK_LEVEL = C_DMODK_LEVEL
# past this the level-wise divisor stops growing: d < 2**31, so floor(d / div) is already 0
cdef uint64_t _DIV_CAP = 1ULL << 32


cdef inline uint64_t _mix64(uint64_t z) noexcept nogil:
    # splitmix64 finaliser (Steele, Lea, Flood 2014): full 64-bit avalanche, cheap, portable
    z += 0x9E3779B97F4A7C15ULL
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL
    return z ^ (z >> 31)


cdef inline uint64_t _hash3(uint64_t seed, uint64_t a, uint64_t b) noexcept nogil:
    return _mix64(_mix64(_mix64(seed) ^ a) ^ b)


def hash3(uint64_t seed, const int64_t[::1] a, const int64_t[::1] b):
    """``hash(seed, a[i], b[i])`` as uint64: the ECMP / Valiant hash, exposed for tests."""
    cdef Py_ssize_t i, n = a.shape[0]
    out = np.empty(n, dtype=np.uint64)
    cdef uint64_t[::1] o = out
    with nogil:
        for i in range(n):
            o[i] = _hash3(seed, <uint64_t>a[i], <uint64_t>b[i])
    return out


cdef inline bint _enter(int32_t w, int32_t d, int32_t n_hosts, bint hosts_forward) noexcept nogil:
    return w == d or w >= n_hosts or hosts_forward


def bfs_rows(const int64_t[::1] ptr, const int32_t[::1] nbr, const int32_t[::1] dl,
             const uint8_t[::1] alive, int32_t n_hosts, bint hosts_forward,
             const int32_t[::1] dsts, int32_t[:, ::1] out):
    """Hop distance of every node to ``dsts[r]`` into ``out[r]`` (-1: cannot reach it).

    Reverse BFS from the destination over alive directed links; a host other than the
    destination is given a distance but never expanded unless hosts forward.
    """
    cdef Py_ssize_t n = ptr.shape[0] - 1, m = dsts.shape[0]
    cdef Py_ssize_t r, head, tail, j
    cdef int32_t d, v, w, dv
    cdef int32_t* row
    cdef vector[int32_t] queue
    queue.resize(n if n > 0 else 1)
    with nogil:
        for r in range(m):
            row = &out[r, 0]
            for j in range(n):
                row[j] = -1
            d = dsts[r]
            row[d] = 0
            queue[0] = d
            head = 0
            tail = 1
            while head < tail:
                v = queue[head]
                head += 1
                if v != d and v < n_hosts and not hosts_forward:
                    continue
                dv = row[v] + 1
                for j in range(ptr[v], ptr[v + 1]):
                    w = nbr[j]
                    if row[w] >= 0 or not alive[dl[j] ^ 1]:
                        continue
                    row[w] = dv
                    queue[tail] = w
                    tail += 1


cdef inline int32_t _pick(int mode, uint64_t seed, int64_t fid, int32_t u, int32_t d,
                          int32_t count, uint64_t* div) noexcept nogil:
    # the policy's index among the count candidates at node u (in neighbour-id order).
    # dmodk_level reads d as a mixed-radix number whose radices are the walk's candidate
    # counts so far: the first choice takes d mod count, the next floor(d / count1) mod count2,
    # ... (Zahavi's level-wise D-mod-k on a k-ary fat-tree: edge d mod k/2, aggregation
    # floor(d / (k/2)) mod k/2), so different destinations fan out over the whole core.
    cdef int32_t idx
    if mode == C_ECMP:
        return <int32_t>(_hash3(seed, <uint64_t>fid, <uint64_t>u) % <uint64_t>count)
    if mode == C_DMODK:
        return d % count
    if mode == C_DMODK_LEVEL:
        idx = <int32_t>((<uint64_t>d / div[0]) % <uint64_t>count)
        if div[0] < _DIV_CAP:
            div[0] *= <uint64_t>count
        return idx
    return 0


cdef Py_ssize_t _max_degree(const int64_t[::1] ptr):
    # room for every candidate next hop of the busiest node
    cdef Py_ssize_t j, m = 1
    for j in range(ptr.shape[0] - 1):
        if ptr[j + 1] - ptr[j] > m:
            m = ptr[j + 1] - ptr[j]
    return m


cdef inline Py_ssize_t _hop(Py_ssize_t* cand, int32_t count, int mode, uint64_t seed,
                            int64_t fid, int32_t u, int32_t d, const int32_t[::1] dl,
                            const double[::1] dlat, int32_t[::1] out_link, Py_ssize_t k,
                            double* lat, uint64_t* div) noexcept nogil:
    # take the policy's candidate: record its link as hop k, add its latency; its index back
    cdef Py_ssize_t j = cand[_pick(mode, seed, fid, u, d, count, div)]
    out_link[k] = dl[j]
    lat[0] += dlat[dl[j]]
    return j


def walk_single(const int64_t[::1] ptr, const int32_t[::1] nbr, const int32_t[::1] dl,
                const uint8_t[::1] alive, int32_t n_hosts, bint hosts_forward,
                const double[::1] dlat, const int32_t[:, ::1] rows, const int64_t[::1] row_of,
                const int32_t[::1] src, const int32_t[::1] dst, const int64_t[::1] fid,
                int mode, uint64_t seed, const int64_t[::1] out_ptr,
                int32_t[::1] out_link, double[::1] out_lat, const int64_t[::1] order):
    """One shortest path per flow, hop by hop; ``out_ptr`` already holds the hop counts.

    At node u (distance du) the candidates are u's alive out-links to enterable neighbours at
    distance du - 1, in neighbour-id order; the policy picks one index among them.
    Flows are visited in ``order`` (flows sharing a destination row together keep that row in
    cache); outputs do not depend on it. Returns the number of flows whose walk got stuck
    (0 unless the rows are inconsistent).
    """
    cdef Py_ssize_t nf = src.shape[0], i, j, k, q
    cdef int32_t u, d, w, du, count, pick
    cdef const int32_t* D
    cdef double lat
    cdef uint64_t div
    cdef Py_ssize_t stuck = 0
    cdef vector[Py_ssize_t] cand_buf
    cdef Py_ssize_t* cand
    cand_buf.resize(_max_degree(ptr))
    cand = cand_buf.data()
    with nogil:
        for q in range(nf):
            i = order[q]
            k = out_ptr[i]
            lat = 0.0
            div = 1
            if out_ptr[i + 1] > k:
                D = &rows[row_of[i], 0]
                u = src[i]
                d = dst[i]
                while u != d:
                    du = D[u]
                    count = 0
                    for j in range(ptr[u], ptr[u + 1]):
                        w = nbr[j]
                        if D[w] == du - 1 and alive[dl[j]] and _enter(w, d, n_hosts, hosts_forward):
                            cand[count] = j
                            count += 1
                    if count == 0 or k >= out_ptr[i + 1]:
                        stuck += 1
                        break
                    j = _hop(cand, count, mode, seed, fid[i], u, d, dl, dlat, out_link, k,
                             &lat, &div)
                    k += 1
                    u = nbr[j]
            out_lat[i] = lat
    return stuck


def spray_dag(const int64_t[::1] ptr, const int32_t[::1] nbr, const int32_t[::1] dl,
              const uint8_t[::1] alive, int32_t n_hosts, bint hosts_forward,
              const double[::1] dlat, const int32_t[:, ::1] rows, const int64_t[::1] row_of,
              const int32_t[::1] src, const int32_t[::1] dst, int64_t[::1] out_ptr,
              double[::1] out_lat):
    """Every link of the shortest-path DAG from src to dst, weighted by path counting.

    weight(u->w) = sigma_s(u) * sigma_d(w) / sigma_s(d): the fraction of all shortest src->dst
    paths that cross u->w. sigma_s counts paths from src (forward, level by level); sigma_d
    counts paths to dst, computed backwards over the same visited nodes only (every node below
    a visited node is visited, so the restriction is exact). Counts are float64: on big fabrics
    they overflow any integer, and only their ratios matter. Links come out level by level,
    so each hop's weights sum to 1. Unreachable flows and src == dst give an empty range.
    Returns (link int32, weight float64).
    """
    cdef Py_ssize_t n = ptr.shape[0] - 1, nf = src.shape[0], i, j, q, head
    cdef int32_t u, d, w, du
    cdef const int32_t* D
    cdef double total, lat, wgt
    cdef vector[int32_t] link
    cdef vector[double] weight
    cdef vector[int32_t] order
    cdef vector[double] sig_s, sig_d
    cdef vector[uint8_t] seen
    sig_s.resize(n, 0.0)
    sig_d.resize(n, 0.0)
    seen.resize(n, 0)
    with nogil:
        for i in range(nf):
            out_ptr[i] = link.size()
            out_lat[i] = 0.0
            u = src[i]
            d = dst[i]
            D = &rows[row_of[i], 0]
            if u == d or D[u] < 0:
                continue
            # forward: BFS order is level order on the DAG
            order.clear()
            order.push_back(u)
            seen[u] = 1
            sig_s[u] = 1.0
            head = 0
            while head < <Py_ssize_t>order.size():
                u = order[head]
                head += 1
                if u == d:
                    continue
                du = D[u]
                for j in range(ptr[u], ptr[u + 1]):
                    w = nbr[j]
                    if D[w] == du - 1 and alive[dl[j]] and _enter(w, d, n_hosts, hosts_forward):
                        if not seen[w]:
                            seen[w] = 1
                            order.push_back(w)
                        sig_s[w] += sig_s[u]
            # backward: paths to d from every visited node
            sig_d[d] = 1.0
            for q in range(<Py_ssize_t>order.size() - 1, -1, -1):
                u = order[q]
                if u == d:
                    continue
                du = D[u]
                for j in range(ptr[u], ptr[u + 1]):
                    w = nbr[j]
                    if D[w] == du - 1 and alive[dl[j]] and _enter(w, d, n_hosts, hosts_forward):
                        sig_d[u] += sig_d[w]
            total = sig_s[d]
            lat = 0.0
            for q in range(<Py_ssize_t>order.size()):
                u = order[q]
                if u == d:
                    continue
                du = D[u]
                for j in range(ptr[u], ptr[u + 1]):
                    w = nbr[j]
                    if D[w] == du - 1 and alive[dl[j]] and _enter(w, d, n_hosts, hosts_forward):
                        wgt = sig_s[u] * sig_d[w] / total
                        link.push_back(dl[j])
                        weight.push_back(wgt)
                        lat += wgt * dlat[dl[j]]
            out_lat[i] = lat
            for q in range(<Py_ssize_t>order.size()):
                u = order[q]
                seen[u] = 0
                sig_s[u] = 0.0
                sig_d[u] = 0.0
        out_ptr[nf] = link.size()
    out_link = np.empty(link.size(), dtype=np.int32)
    out_weight = np.empty(weight.size(), dtype=np.float64)
    cdef int32_t[::1] ol = out_link
    cdef double[::1] ow = out_weight
    if link.size():
        memcpy(&ol[0], link.data(), link.size() * sizeof(int32_t))
        memcpy(&ow[0], weight.data(), weight.size() * sizeof(double))
    return out_link, out_weight


def walk_dor(const int64_t[::1] ptr, const int32_t[::1] nbr, const int32_t[::1] dl,
             const uint8_t[::1] alive, const double[::1] dlat,
             const int32_t[:, ::1] coords, const int32_t[::1] dims, const int64_t[::1] stride,
             const int32_t[::1] node_of_cell, const int32_t[::1] src, const int32_t[::1] dst,
             const int64_t[::1] out_ptr, int32_t[::1] out_link, double[::1] out_lat,
             uint8_t[::1] broken):
    """Dimension-order walk on a torus: dimension 0 first, each along the shorter way around
    its ring (exactly half way: the + direction). ``broken[i]`` is set when the walk needs a
    link that is down or missing; the caller re-routes those flows."""
    cdef Py_ssize_t nf = src.shape[0], ndim = dims.shape[0], i, j, k, kd
    cdef int32_t u, d, w, nk, cu, cd, delta, step, c
    cdef int64_t cell
    cdef double lat
    cdef bint ok
    with nogil:
        for i in range(nf):
            k = out_ptr[i]
            lat = 0.0
            u = src[i]
            d = dst[i]
            ok = True
            kd = 0
            while kd < ndim and ok:
                nk = dims[kd]
                cd = coords[d, kd]
                while coords[u, kd] != cd:
                    cu = coords[u, kd]
                    delta = (cd - cu) % nk
                    if delta < 0:
                        delta += nk
                    step = 1 if 2 * delta <= nk else -1
                    cell = 0
                    for j in range(ndim):
                        c = coords[u, j]
                        if j == kd:
                            c = (c + step + nk) % nk
                        cell += c * stride[j]
                    w = node_of_cell[cell]
                    ok = False
                    for j in range(ptr[u], ptr[u + 1]):
                        if nbr[j] == w:
                            ok = alive[dl[j]] != 0
                            break
                    if not ok or k >= out_ptr[i + 1]:
                        ok = False
                        break
                    out_link[k] = dl[j]
                    lat += dlat[dl[j]]
                    k += 1
                    u = w
                kd += 1
            broken[i] = 0 if ok else 1
            out_lat[i] = lat


cdef inline int32_t _anchored(const int32_t[:, ::1] rows, const int64_t[::1] arow,
                              Py_ssize_t a0, Py_ssize_t a1, int32_t w, int32_t d) noexcept nogil:
    # distance from w to host d = 1 + the nearest of d's anchors (0 at d itself, -1: none)
    cdef int32_t best = 2147483647, x
    cdef Py_ssize_t a
    if w == d:
        return 0
    for a in range(a0, a1):
        x = rows[arow[a], w]
        if x >= 0 and x < best:
            best = x
    return best + 1 if best != 2147483647 else -1


cdef inline Py_ssize_t _first(const int32_t[::1] nbr, Py_ssize_t lo, Py_ssize_t hi,
                              int32_t v) noexcept nogil:
    # first position of v in the ascending nbr[lo:hi] (hi when absent)
    cdef Py_ssize_t a = lo, b = hi, mid
    while a < b:
        mid = (a + b) >> 1
        if nbr[mid] < v:
            a = mid + 1
        else:
            b = mid
    return a


def walk_anchored(const int64_t[::1] ptr, const int32_t[::1] nbr, const int32_t[::1] dl,
                  const uint8_t[::1] alive, int32_t n_hosts, bint hosts_forward,
                  const double[::1] dlat, const int32_t[:, ::1] rows,
                  const int64_t[::1] aptr, const int64_t[::1] arow, const int32_t[::1] anode,
                  const int32_t[::1] src, const int32_t[::1] dst, const int64_t[::1] fid,
                  int mode, uint64_t seed, const int64_t[::1] out_ptr,
                  int32_t[::1] out_link, double[::1] out_lat, Py_ssize_t memo_degree,
                  Py_ssize_t memo_entries):
    """``walk_single`` for destinations that are hosts hanging on switches only (and hosts do
    not forward): the distance to host d is 1 + the distance to the nearest of its *anchors*
    (the switches with an alive link to d), read from the anchors' rows ``rows[arow[a]]`` for
    a in ``aptr[i]:aptr[i+1]``. Every path equals walk_single's with d's own row, but a fabric
    needs one row per switch instead of one per host (16,384 instead of 65,536 rows on a
    65,536-GPU two-tier fabric, 32x fewer on a fat-tree), which is what makes routing
    100,000 destinations affordable. Returns the number of stuck walks (0 unless rows are
    inconsistent).

    Two hops from d the next hop can only be one of d's anchors (``anode``, ascending, one
    entry each), one hop from d only d: those candidates are found by binary search in u's
    sorted neighbours instead of a scan, in the same order, which matters at a spine with
    thousands of neighbours.

    Further out, at a node of ``memo_degree`` neighbours or more, the candidates are memoised
    per (u, anchor), up to ``memo_entries`` positions in all. A next hop w (an enterable
    switch: hosts do not forward, and w != d when du >= 3) is at distance du - 1 from d
    exactly when some anchor a has rows[a][w] == du - 2, and such an a has rows[a][u] ==
    du - 1 (w is one hop from u, so no anchor is nearer to w than du - 2). When one anchor is
    that near to u, the candidates are therefore u's alive links one step closer to that
    anchor, the same for every destination behind it: a rail leaf of a 65,536-GPU two-tier
    fabric scanned its 16,384 neighbours for every flow to another rail (8,192 spines tie),
    and routing the step's members took 94 s. With several such anchors (a union of lists),
    or once the memo is full, it scans as before."""
    cdef Py_ssize_t nf = src.shape[0], i, j, k, a0, a1, a, near
    cdef int32_t u, d, w, du, count
    cdef double lat
    cdef uint64_t div
    cdef Py_ssize_t stuck = 0
    cdef vector[Py_ssize_t] cand_buf
    cdef Py_ssize_t* cand
    cdef Py_ssize_t* use
    cdef const int32_t* R
    cdef unordered_map[int64_t, int64_t] memo_at  # u * rows + row -> offset into memo
    cdef vector[Py_ssize_t] memo  # per entry: count, then the candidates' positions
    cdef unordered_map[int64_t, int64_t].iterator hit
    cdef int64_t off, nrows = rows.shape[0]
    cand_buf.resize(_max_degree(ptr))
    cand = cand_buf.data()
    with nogil:
        for i in range(nf):
            k = out_ptr[i]
            lat = 0.0
            div = 1
            if out_ptr[i + 1] > k:
                a0 = aptr[i]
                a1 = aptr[i + 1]
                u = src[i]
                d = dst[i]
                while u != d:
                    du = _anchored(rows, arow, a0, a1, u, d)
                    count = 0
                    use = cand
                    if du == 1 or du == 2:
                        for a in range(a0 if du == 2 else 0, a1 if du == 2 else 1):
                            w = anode[a] if du == 2 else d
                            j = _first(nbr, ptr[u], ptr[u + 1], w)
                            while j < ptr[u + 1] and nbr[j] == w:
                                if alive[dl[j]] and _enter(w, d, n_hosts, hosts_forward):
                                    cand[count] = j
                                    count += 1
                                j += 1
                    else:
                        near = -1
                        if ptr[u + 1] - ptr[u] >= memo_degree:
                            for a in range(a0, a1):
                                if rows[arow[a], u] == du - 1:
                                    near = arow[a] if near == -1 else -2
                        if near >= 0:
                            hit = memo_at.find(<int64_t>u * nrows + near)
                            if hit != memo_at.end():
                                off = deref(hit).second
                            elif <Py_ssize_t>memo.size() + ptr[u + 1] - ptr[u] <= memo_entries:
                                off = memo.size()
                                memo_at[<int64_t>u * nrows + near] = off
                                memo.push_back(0)
                                R = &rows[near, 0]
                                for j in range(ptr[u], ptr[u + 1]):
                                    w = nbr[j]
                                    if alive[dl[j]] and _enter(w, d, n_hosts, hosts_forward) \
                                            and R[w] == du - 2:
                                        memo.push_back(j)
                                memo[off] = memo.size() - off - 1
                            else:
                                near = -1  # the memo is full
                        if near >= 0:
                            count = <int32_t>memo[off]
                            use = memo.data() + off + 1
                        else:
                            for j in range(ptr[u], ptr[u + 1]):
                                w = nbr[j]
                                if alive[dl[j]] and _enter(w, d, n_hosts, hosts_forward) and \
                                        _anchored(rows, arow, a0, a1, w, d) == du - 1:
                                    cand[count] = j
                                    count += 1
                    if count == 0 or k >= out_ptr[i + 1]:
                        stuck += 1
                        break
                    j = _hop(use, count, mode, seed, fid[i], u, d, dl, dlat, out_link, k,
                             &lat, &div)
                    k += 1
                    u = nbr[j]
            out_lat[i] = lat
    return stuck
