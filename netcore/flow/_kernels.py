"""All compiled kernels of the flow engine (Numba, ``cache=True``, one module on purpose:
Numba's cache does not notice edits in functions imported from other files).

State lives in a few 2-D arrays whose columns/rows are named by the module constants below, so
each kernel has one signature and the test suite compiles few specialisations. Per-node data
is node-major (``NF[f, RATE]``) so one flow's fields share a cache line.

Vocabulary
* node: a Schedule node (transfer, compute or delay); a *flow* is an active transfer, indexed
  by its node id.
* entry: one (flow, directed link, weight) membership. A flow's entries are
  ``[poff, poff + plen)`` of the entry pool (``EI``, ``ew``). Flows standing for the same
  member set under the same alive mask share one copy of its path (a *shared* path; a
  training step names each all-to-all class once per micro-batch and layer): their entries
  hold no per-flow state. What a flow needs of its own while active, the slot each entry
  occupies (``ESLOT``), lives in the rows ``[aoff, aoff + plen)``: the entries themselves for a
  private path (``AOFF = POFF``), else a block of the arena, rows of ``EI`` that Python
  reserved (``[ARENA_TOP, ARENA_END)`` still free), taken at activation and given back at
  deactivation to the path's free list (its head in ``EFLOW`` of the path's first entry, the
  next block in ``EFLOW`` of a free block's first row). ``EFLOW`` of a private entry is its
  flow.
* slot: while a flow is active each of its entries occupies one slot in its link's contiguous
  slot range ``[LOFF[l], LOFF[l] + NACT[l])`` of the slot pool (``SI``: flow, entry; ``SD``:
  weight, current rate). Insert appends, remove swaps the last slot in, so scanning "the flows
  on link l" streams through memory instead of chasing pointers. A link's slot capacity
  follows the flows active on it at once, not every transfer that will ever cross it (most of
  a training step's transfers wait or are done at any instant): a flow that would overflow one
  of its links (or a shared-path flow that finds the arena full) waits in the pending list
  (the last ``isc[PACT_N]`` flows of ``ADDL``), and so does every flow activated after it in
  the same batch, which keeps each link's slot order what it would have been; the event
  loop then returns RC_GROW_SLOTS, Python lays the pool out again with more room
  (``FlowState.grow_slots``) and the next call activates the pending flows, in order, before
  the batch's re-allocation. Results do not depend on the capacities.
* The max-min solver (``_recompute``) only touches the connected component of the flow/link
  graph reached from the links an event changed; after an event that only removed flows it
  also leaves alone every flow slower than the slowest removed one (docs/flow_engine.md has
  the argument).

Reference counting is off (``_nrt=False``) in every kernel that allocates nothing (the event
loop, the solver, the node life cycle, the helpers called from Python between events). With it
on, Numba increments and decrements the reference count of every array argument (an atomic
``lock inc/dec`` through a call) on each non-inlined call and on the copies that IR inlining
makes inside loops; that was 60-70% of ``advance`` on a 64 MiB ring all-reduce over 128 hosts
(perf: two ``lock`` instructions of NRT_incref/decref). These kernels only index arrays the
caller owns and keep no array past their return, so no reference is ever needed; kernels that
allocate (``np.empty``, lists) keep the default.
"""
from __future__ import annotations

import numpy as np
from numba import njit

# ---------------------------------------------------------------- node float columns (NF)
SIZE, DUR, START, TAIL, RATE, REM, TLAST, SEG0, TSTART, TEND, NR = range(11)
# transport tcp (docs/flow_engine.md "TCP start-up"): handshake delay, round-trip time, first
# slow-start cap, the rate above which the cap can never bind, time the data started
HS, RTT, CAP0, CAPMAX, TDATA, CAPF = range(11, 17)
N_NF = 17
# ---------------------------------------------------------------- node int columns (NI)
KIND, NDEPS, POFF, PLEN, STATE, ISNEW, FSTAMP, FFRZ, CF, ADDL = range(10)
# CAPB: 1 when the last solve froze the flow at its slow-start cap; CAPEV: highest slow-start
# round for which a cap-doubling event was queued (-1: none)
CAPB, CAPEV = range(10, 12)
# AOFF: first row of the flow's slot positions (ESLOT): POFF for a private path; for a
# shared path an arena block while active, -1 otherwise
AOFF = 12
# LEPOS: during a solve, where the flow's entries start in the local-link list of _fill
LEPOS = 13
N_NI = 14
# ---------------------------------------------------------------- entry int columns (EI)
ELINK, EFLOW, ESLOT = range(3)
N_EI = 3
# ---------------------------------------------------------------- slot columns (SI, SD)
SFLOW, SENT = range(2)
# SPOT: the slot's share of its link's potential load (weight x the flow's solo rate, _activate)
SW, SR, SPOT = range(3)
N_SD = 3
# ---------------------------------------------------------------- link float rows (LF)
# POT: potential load, sum over the active flows of weight x solo rate (slack links, _slack)
CAP, BUSY_SINCE, BUSY, BYTES, RES, WSUM, LHK, LLOAD, POT = range(9)
N_LF = 9
# ---------------------------------------------------------------- link int rows (LI)
LOFF, LCAP, NACT, LSTAMP, LLOC, CL, CNT, LHI, LHPOS, SEEDED, SEEDS, LFILL = range(12)
N_LI = 12
# ---------------------------------------------------------------- int scalars (isc)
DH_N, TH_N, STAMP, N_ADD, N_SEED, PEND, FULL, LS_N, EVENTS, SERIES, RECOMP, STEPS, \
    CF_TOTAL, RH_N, SKIPPED = range(15)
# incremental driving: a batch whose re-allocation is deferred (DEFER, with its DFULL flag and
# THETA), the number of completions recorded in cbuf by the current advance() call; cap events
DEFER, DFULL, NDONE, CAPEVENTS, CAPS = range(15, 20)
# local repair (_recompute_local): batches it solved, attempts that grew past their limit,
# repair rounds, and its back-off (attempts still to skip; failures in a row)
LOCAL_OK, LOCAL_FAIL, LOCAL_ROUNDS, LOCAL_SKIP, LOCAL_STREAK = range(20, 25)
# path entries of the active flows (slots in use): the size of a whole-fabric solve
ACT_ENT = 25
# flows waiting for slot room (the last PACT_N of ADDL); 1 while the event loop waits for
# Python to grow the slot pool or the arena (its batch resumes, its completions so far kept:
# NDONE and the batch's first NDONE0); the arena's free rows [ARENA_TOP, ARENA_END)
PACT_N, SLOTWAIT, NDONE0, ARENA_TOP, ARENA_END = 26, 27, 28, 29, 30
# 1 while a dead link is due to come back (set by Python at every fault instant): a transfer
# that starts without a path then waits for one (NOPATH, netcore/flow/recovery.py) instead of
# being stranded
WAITOK = 31
N_ISC = 32
# relative slack of rate comparisons: rates that are equal in exact arithmetic can differ in
# the last bits when different solves produced them (a sum of rates rounds differently), so
# a tie must not be read as "slower" (the removal threshold, the local repair's checks)
TIE_EPS = 1e-11
# a link is slack when its potential load is below this fraction of its capacity (far above
# the rounding of the running sum, and of TIE_EPS: a slack link never counts as saturated)
SLACK_FRAC = 1.0 - 1e-9
# local repair gives up (and the component is solved whole) when its work, in link slots
# scanned, would pass a floor plus a share of the active flows' path entries (what a solve of
# the whole fabric scans): a failed repair then costs at most a fraction of a component solve
LOCAL_MIN_WORK = 256
LOCAL_SHARE = 4
# ---------------------------------------------------------------- float scalars (fsc)
CLOCK, PEND_T, THETA = range(3)
N_FSC = 3

# node kinds (same numbers as netcore.schedule)
TRANSFER, COMPUTE, DELAY = 0, 1, 2
# node states
WAIT, ACTIVE, FLIGHT, DONE, STALLED, STRANDED, HSHAKE, NOPATH = 0, 1, 2, 3, 4, 5, 6, 7
# timed-event codes: node * 4 + type (the order among END/START codes is that of node * 2 +
# type, so adding types did not change the order of any existing tie)
EV_END, EV_START, EV_DATA, EV_CAP = 0, 1, 2, 3

# advance() return codes
RC_STOP, RC_GROW_SERIES, RC_DEFER, RC_GROW_SLOTS = 0, 2, 3, 4
# advance() mode bits: stop after the events of a time stamp that completed nodes (before its
# re-allocation, so that nodes added by the caller at that instant join the same batch), and
# treat t_stop as inclusive (process the instant t_stop, then stop the same way)
M_STOPC, M_INCL = 1, 2


# ================================================================ indexed binary heap
# keys hk[slot], items hi[slot], pos[item] = slot or -1; ties broken by item id so that the
# pop order (and hence every result) is deterministic.
@njit(cache=True, _nrt=False, inline="always")
def _hless(hk, hi, a, b):
    return hk[a] < hk[b] or (hk[a] == hk[b] and hi[a] < hi[b])


@njit(cache=True, _nrt=False, inline="always")
def _hswap(hk, hi, pos, a, b):
    ka, ia = hk[a], hi[a]
    hk[a] = hk[b]
    hi[a] = hi[b]
    hk[b] = ka
    hi[b] = ia
    pos[hi[a]] = a
    pos[hi[b]] = b


@njit(cache=True, _nrt=False, inline="always")
def _hup(hk, hi, pos, j):
    while j > 0:
        p = (j - 1) >> 1
        if _hless(hk, hi, j, p):
            _hswap(hk, hi, pos, j, p)
            j = p
        else:
            break


@njit(cache=True, _nrt=False, inline="always")
def _hdown(hk, hi, pos, j, n):
    while True:
        c = 2 * j + 1
        if c >= n:
            break
        if c + 1 < n and _hless(hk, hi, c + 1, c):
            c += 1
        if _hless(hk, hi, c, j):
            _hswap(hk, hi, pos, c, j)
            j = c
        else:
            break


@njit(cache=True, _nrt=False, inline="always")
def _hset(hk, hi, pos, n, item, key):
    """Insert ``item`` or change its key; returns the new heap size."""
    j = pos[item]
    if j < 0:
        hk[n] = key
        hi[n] = item
        pos[item] = n
        _hup(hk, hi, pos, n)
        return n + 1
    old = hk[j]
    hk[j] = key
    if key < old:
        _hup(hk, hi, pos, j)
    else:
        _hdown(hk, hi, pos, j, n)
    return n


@njit(cache=True, _nrt=False, inline="always")
def _hremove(hk, hi, pos, n, item):
    j = pos[item]
    if j < 0:
        return n
    n -= 1
    pos[item] = -1
    if j != n:
        hk[j] = hk[n]
        hi[j] = hi[n]
        it = hi[j]
        pos[it] = j
        _hup(hk, hi, pos, j)
        _hdown(hk, hi, pos, pos[it], n)
    return n


# ================================================================ plain heap of timed events
@njit(cache=True, _nrt=False, inline="always")
def _tpush(tk, ti, n, key, code):
    j = n
    tk[j] = key
    ti[j] = code
    while j > 0:
        p = (j - 1) >> 1
        if tk[j] < tk[p] or (tk[j] == tk[p] and ti[j] < ti[p]):
            tk[j], tk[p] = tk[p], tk[j]
            ti[j], ti[p] = ti[p], ti[j]
            j = p
        else:
            break
    return n + 1


@njit(cache=True, _nrt=False, inline="always")
def _tpop(tk, ti, n):
    """Remove the root; the caller read it before. Returns the new size."""
    n -= 1
    tk[0] = tk[n]
    ti[0] = ti[n]
    j = 0
    while True:
        c = 2 * j + 1
        if c >= n:
            break
        if c + 1 < n and (tk[c + 1] < tk[c] or (tk[c + 1] == tk[c] and ti[c + 1] < ti[c])):
            c += 1
        if tk[c] < tk[j] or (tk[c] == tk[j] and ti[c] < ti[j]):
            tk[c], tk[j] = tk[j], tk[c]
            ti[c], ti[j] = ti[j], ti[c]
            j = c
        else:
            break
    return n


# ================================================================ link slot lists
@njit(cache=True, _nrt=False, inline="always")
def _seed(LI, isc, l):
    if LI[SEEDED, l] == 0:
        LI[SEEDED, l] = 1
        LI[SEEDS, isc[N_SEED]] = l
        isc[N_SEED] += 1


@njit(cache=True, _nrt=False, inline="always")
def _slack(l, LF, isc):
    """Whether link l cannot saturate: its potential load (every active flow on it at its solo
    rate) is below its capacity. Then no flow on it has it as its tightest link, and its
    constraint follows from those links' (rate <= solo rate), so leaving it out of a solve
    changes neither the feasible rates nor the max-min allocation; the member-set flows of a
    large step cross thousands of such links (ECMP-hashed spine links carrying a few of their
    pairs). Not with link series, which record the load of every link a solve touches."""
    return isc[SERIES] == 0 and LF[POT, l] < LF[CAP, l] * SLACK_FRAC


@njit(cache=True, _nrt=False, inline="always")
def _activate(f, t, NI, EI, ew, SI, SD, LF, LI, isc):
    """Put flow f's entries into its links' slot ranges (it starts sending at t). Its slot
    rate is +inf until the solver gives it a rate, so every threshold test includes it. Its
    slot rows (AOFF) are set: a shared path's block is taken before. Each link's potential
    load grows by the weight times the flow's solo rate (the least capacity / weight on its
    path: no allocation gives the flow more)."""
    p0 = NI[f, POFF]
    a0 = NI[f, AOFF]
    solo = np.inf
    for e in range(p0, p0 + NI[f, PLEN]):
        x = LF[CAP, EI[e, ELINK]] / ew[e]
        if x < solo:
            solo = x
    for i in range(NI[f, PLEN]):
        e = p0 + i
        l = EI[e, ELINK]
        k = LI[LOFF, l] + LI[NACT, l]
        SI[k, SFLOW] = f
        SI[k, SENT] = a0 + i
        SD[k, SW] = ew[e]
        SD[k, SR] = np.inf
        SD[k, SPOT] = ew[e] * solo
        LF[POT, l] += SD[k, SPOT]
        EI[a0 + i, ESLOT] = k
        LI[NACT, l] += 1
        if LI[NACT, l] == 1:
            LF[BUSY_SINCE, l] = t
        # a link still slack with f on it binds nobody: the solve reaches f from its tightest
        # link, which never is slack
        if not _slack(l, LF, isc):
            _seed(LI, isc, l)
    isc[ACT_ENT] += NI[f, PLEN]


@njit(cache=True, _nrt=False, inline="always")
def _take_block(f, NI, EI, isc):
    """First row of a free arena block for shared-path flow f (its path's free list first,
    then fresh arena rows), or -1 when the arena is full."""
    p0 = NI[f, POFF]
    head = EI[p0, EFLOW]
    if head >= 0:
        EI[p0, EFLOW] = EI[head, EFLOW]
        return head
    a = isc[ARENA_TOP]
    if a + NI[f, PLEN] <= isc[ARENA_END]:
        isc[ARENA_TOP] = a + NI[f, PLEN]
        return a
    return -1


@njit(cache=True, _nrt=False, inline="always")
def _try_activate(f, t, NI, EI, ew, SI, SD, LF, LI, isc):
    """Activate f if every link of its path has a free slot (and a shared path a free arena
    block) and no flow is pending before it; else f joins the pending list (the last
    isc[PACT_N] flows of ADDL, activated in order once Python made room)."""
    if isc[PACT_N] == 0:
        fits = True
        p0 = NI[f, POFF]
        for e in range(p0, p0 + NI[f, PLEN]):
            l = EI[e, ELINK]
            if LI[NACT, l] >= LI[LCAP, l]:
                fits = False
                break
        if fits and NI[f, AOFF] < 0:
            a = _take_block(f, NI, EI, isc)
            if a < 0:
                fits = False
            else:
                NI[f, AOFF] = a
        if fits:
            _activate(f, t, NI, EI, ew, SI, SD, LF, LI, isc)
            return
    isc[PACT_N] += 1


@njit(cache=True, _nrt=False)
def flush_pending(t, NI, EI, ew, SI, SD, LF, LI, isc):
    """Activate the pending flows at t, in the order they were deferred (Python made room:
    FlowState.grow_slots)."""
    for i in range(isc[N_ADD] - isc[PACT_N], isc[N_ADD]):
        f = NI[i, ADDL]
        if NI[f, AOFF] < 0:
            NI[f, AOFF] = _take_block(f, NI, EI, isc)
        _activate(f, t, NI, EI, ew, SI, SD, LF, LI, isc)
    isc[PACT_N] = 0


@njit(cache=True, _nrt=False, inline="always")
def _deactivate(f, t, NI, EI, SI, SD, LF, LI, isc):
    p0 = NI[f, POFF]
    a0 = NI[f, AOFF]
    for i in range(NI[f, PLEN]):
        l = EI[p0 + i, ELINK]
        k = EI[a0 + i, ESLOT]
        if not _slack(l, LF, isc):  # a slack link bound nobody: nothing gains from f leaving
            _seed(LI, isc, l)
        LF[POT, l] -= SD[k, SPOT]
        last = LI[LOFF, l] + LI[NACT, l] - 1
        if k != last:
            SI[k, SFLOW] = SI[last, SFLOW]
            SI[k, SENT] = SI[last, SENT]
            SD[k, SW] = SD[last, SW]
            SD[k, SR] = SD[last, SR]
            SD[k, SPOT] = SD[last, SPOT]
            EI[SI[k, SENT], ESLOT] = k
        EI[a0 + i, ESLOT] = -1
        LI[NACT, l] -= 1
        if LI[NACT, l] == 0:
            LF[BUSY, l] += t - LF[BUSY_SINCE, l]
            LF[POT, l] = 0.0  # no drift of the running sum past an idle link
    isc[ACT_ENT] -= NI[f, PLEN]
    if a0 != p0:  # a shared path's block goes back to its free list
        EI[a0, EFLOW] = EI[p0, EFLOW]
        EI[p0, EFLOW] = a0
        NI[f, AOFF] = -1


@njit(cache=True, _nrt=False)
def _account(f, sent, NI, EI, ew, LF):
    """Credit ``sent`` bytes of flow f to the links of its current path."""
    p0 = NI[f, POFF]
    for e in range(p0, p0 + NI[f, PLEN]):
        LF[BYTES, EI[e, ELINK]] += ew[e] * sent


# ================================================================ slow-start caps
@njit(cache=True, _nrt=False, inline="always")
def _cap_round(f, t, NF):
    """Slow-start round of flow f at time t: the k with TDATA + k*RTT <= t < TDATA +
    (k+1)*RTT, computed with the same expression as the event times so that at an event
    instant the round is exactly the event's."""
    td = NF[f, TDATA]
    r = NF[f, RTT]
    k = int((t - td) / r)
    if k < 0:
        k = 0
    while td + (k + 1) * r <= t:
        k += 1
    while k > 0 and td + k * r > t:
        k -= 1
    return k


@njit(cache=True, _nrt=False, inline="always")
def _cap_at(f, t, NF):
    """Rate cap of flow f at t: CAPF in slow-start round 0 (the first flight, which the
    peer's unscaled SYN-ACK window may limit), CAP0 * 2^round after it, while below CAPMAX;
    else +inf (a cap at or above the path's largest possible rate can never bind again; the
    sequence never decreases since CAPF <= 2 * CAP0). Fluid flows have CAPF = CAP0 = inf."""
    if not (NF[f, CAPF] < NF[f, CAPMAX]):
        return np.inf
    k = _cap_round(f, t, NF)
    c = NF[f, CAPF] if k == 0 else NF[f, CAP0] * 2.0 ** k
    if c >= NF[f, CAPMAX]:
        return np.inf
    return c


# ================================================================ max-min solver
@njit(cache=True, _nrt=False, inline="always")
def _open_link(l, stamp, ncl, LF, LI):
    """Make link l the ncl-th local link, with no flow weight on it yet; returns ncl + 1."""
    LI[LSTAMP, l] = stamp
    LI[LLOC, l] = ncl
    LI[CL, ncl] = l
    LF[WSUM, ncl] = 0.0
    LI[CNT, ncl] = 0
    return ncl + 1


@njit(cache=True, _nrt=False, inline="always")
def _list_entries(f, pos, stamp, ncl, search, NI, EI, ew, LF, LI, wl, isc):
    """Flow f's entries into _fill's list from ``wl[pos]`` on: the local link of each (-1 for
    a link that is not local), adding its weight and one flow to each local link. With
    ``search`` (_recompute's component search) a link not local yet becomes local, with no
    weight before f's, unless it is slack. Returns (ncl, the next position)."""
    NI[f, LEPOS] = pos
    p0 = NI[f, POFF]
    for e in range(p0, p0 + NI[f, PLEN]):
        l = EI[e, ELINK]
        if LI[LSTAMP, l] != stamp:
            if not search or _slack(l, LF, isc):
                wl[pos] = -1
                pos += 1
                continue
            ncl = _open_link(l, stamp, ncl, LF, LI)
        j = LI[LLOC, l]
        wl[pos] = j
        pos += 1
        LF[WSUM, j] += ew[e]
        LI[CNT, j] += 1
    return ncl, pos


@njit(cache=True, _nrt=False, inline="always")
def _fill(t, ncf, ncl, stamp, check, prepared, NF, NI, EI, ew, SI, SD, LF, LI, lptr, wl, isc,
          chk, chi, cpos, tk, ti):
    """Progressive filling of the flows ``NI[:ncf, CF]`` (marked ``FSTAMP == stamp``) over the
    local links ``LI[CL, :ncl]``, whose residual capacities ``LF[RES, :ncl]`` already exclude
    the load of every other flow. New rates go to ``NF[f, NR]``.

    ``check`` (local repair): when a link saturates at level x, every flow outside the set on
    it with a rate above x is appended to ``NI[ncf:, CF]`` (marked ``FFRZ = -2 * stamp``): it
    must give way, so the set is too small. Returns how many were appended."""
    npend = 0
    # ---- unfrozen weight and flow count per local link, and the local link of each entry of
    # the component, flow after flow (the second half of wl; its first half is the CSR below),
    # so that the later passes over a flow's entries read them in order
    # (``prepared``: _recompute made them while it searched the component)
    if not prepared:
        pos = wl.shape[0] >> 1
        for k in range(ncf):
            _, pos = _list_entries(NI[k, CF], pos, stamp, ncl, False, NI, EI, ew, LF, LI, wl,
                                   isc)
    # ---- local CSR: local link -> component flows on it
    lptr[0] = 0
    for j in range(ncl):
        lptr[j + 1] = lptr[j] + LI[CNT, j]
        LI[LFILL, j] = lptr[j]
    for k in range(ncf):
        f = NI[k, CF]
        q0 = NI[f, LEPOS]
        for q in range(q0, q0 + NI[f, PLEN]):
            j = wl[q]
            if j < 0:
                continue
            wl[LI[LFILL, j]] = f
            LI[LFILL, j] += 1
    # ---- heap of saturation levels (local link index j)
    lhk = LF[LHK]
    lhi = LI[LHI]
    lhp = LI[LHPOS]
    hn = 0
    for j in range(ncl):
        lhp[j] = -1
    for j in range(ncl):
        if LI[CNT, j] > 0:
            r = LF[RES, j]
            if r < 0.0:
                r = 0.0
            hn = _hset(lhk, lhi, lhp, hn, j, r / LF[WSUM, j])
    # ---- caps of the component's flows (isc[CAPS] == 0: no flow has one, e.g. fluid)
    cn = 0
    if isc[CAPS] == 1:
        for k in range(ncf):
            f = NI[k, CF]
            NI[f, CAPB] = 0
            c = _cap_at(f, t, NF)
            if c < np.inf:
                cn = _hset(chk, chi, cpos, cn, f, c)
    # ---- progressive filling: the lowest saturation level freezes every flow on that link.
    # The level heap is lazy: freezing a flow only updates the residual and weight of the links
    # it crosses; a link's key is brought up to date when it reaches the top. A link's level
    # never falls when flows freeze at the current (lowest) level, so a top whose key is
    # current is the lowest level (ties by link index, as an eager heap), and links that never
    # reach the top before every flow is frozen cost nothing (a flow of a member set crosses
    # thousands of links).
    npop = 0
    nfrz = 0
    while nfrz < ncf:
        # settle the top: drop links with no unfrozen flow left, refresh stale keys
        while hn > 0:
            j = lhi[0]
            if LI[CNT, j] == 0:
                hn = _hremove(lhk, lhi, lhp, hn, j)
                continue
            r = LF[RES, j]
            if r < 0.0:
                r = 0.0
            key = r / LF[WSUM, j]
            if key == lhk[0]:
                break
            hn = _hset(lhk, lhi, lhp, hn, j, key)
        if hn == 0:
            break
        if cn > 0 and chk[0] <= lhk[0]:
            # a cap is the lowest level: freeze that flow alone (its private link saturates)
            level = chk[0]
            f = chi[0]
            cn = _hremove(chk, chi, cpos, cn, f)
            if NI[f, FFRZ] == stamp:
                continue
            NI[f, CAPB] = 1
            kr = _cap_round(f, t, NF) + 1
            if kr > NI[f, CAPEV]:
                NI[f, CAPEV] = kr
                isc[TH_N] = _tpush(tk, ti, isc[TH_N], NF[f, TDATA] + kr * NF[f, RTT],
                                   f * 4 + EV_CAP)
                isc[CAPEVENTS] += 1
            npop += 1
            nfrz += 1
            NI[f, FFRZ] = stamp
            NF[f, NR] = level
            p0 = NI[f, POFF]
            q0 = NI[f, LEPOS]
            for i in range(NI[f, PLEN]):
                j2 = wl[q0 + i]
                if j2 < 0:
                    continue
                w = ew[p0 + i]
                LF[RES, j2] -= w * level
                LF[WSUM, j2] -= w
                LI[CNT, j2] -= 1
            continue
        level = lhk[0]
        j = lhi[0]
        hn = _hremove(lhk, lhi, lhp, hn, j)
        npop += 1
        if check:
            l = LI[CL, j]
            lim = level * (1.0 + TIE_EPS)
            for k in range(LI[LOFF, l], LI[LOFF, l] + LI[NACT, l]):
                g = SI[k, SFLOW]
                if NI[g, FSTAMP] != stamp and SD[k, SR] > lim and NI[g, FFRZ] != -2 * stamp:
                    NI[g, FFRZ] = -2 * stamp
                    NI[ncf + npend, CF] = g
                    npend += 1
        for k in range(lptr[j], lptr[j + 1]):
            f = wl[k]
            if NI[f, FFRZ] == stamp:
                continue
            NI[f, FFRZ] = stamp
            NF[f, NR] = level
            nfrz += 1
            p0 = NI[f, POFF]
            q0 = NI[f, LEPOS]
            for i in range(NI[f, PLEN]):
                j2 = wl[q0 + i]
                if j2 == j or j2 < 0:
                    continue
                w = ew[p0 + i]
                LF[RES, j2] -= w * level
                LF[WSUM, j2] -= w
                LI[CNT, j2] -= 1
    for k in range(cn):  # caps of flows a shared link froze first: drop them
        cpos[chi[k]] = -1
    return npend


@njit(cache=True, _nrt=False, inline="always")
def _apply(t, ncf, keep_ties, NF, NI, EI, SD, isc, dhk, dhi, dpos, rhk, rhi, rpos):
    """Give the solved flows ``NI[:ncf, CF]`` their new rates ``NF[f, NR]``. With
    ``keep_ties`` (local repair) a new rate within the tie slack of the old one keeps the old
    value, bit for bit: flows that tied before still tie, so their drains still fall in one
    batch (a component solve gives tied flows one value; a repair recomputes some of them)."""
    # only flows whose rate really changed move in the drain heap
    for k in range(ncf):
        f = NI[k, CF]
        new = NF[f, NR]
        if NI[f, ISNEW] == 1:
            NI[f, ISNEW] = 0
            NF[f, TLAST] = t
        elif new == NF[f, RATE]:
            continue
        elif keep_ties and abs(new - NF[f, RATE]) <= TIE_EPS * NF[f, RATE]:
            continue
        else:
            rem = NF[f, REM] - NF[f, RATE] * (t - NF[f, TLAST])
            NF[f, REM] = rem if rem > 0.0 else 0.0
            NF[f, TLAST] = t
        NF[f, RATE] = new
        a0 = NI[f, AOFF]
        for r in range(a0, a0 + NI[f, PLEN]):
            SD[EI[r, ESLOT], SR] = new
        if new > 0.0:
            isc[DH_N] = _hset(dhk, dhi, dpos, isc[DH_N], f, t + NF[f, REM] / new)
            isc[RH_N] = _hset(rhk, rhi, rpos, isc[RH_N], f, -new)
        else:
            isc[DH_N] = _hremove(dhk, dhi, dpos, isc[DH_N], f)
            isc[RH_N] = _hremove(rhk, rhi, rpos, isc[RH_N], f)


@njit(cache=True, _nrt=False, inline="always")
def _series(t, ncl, SD, LF, LI, isc, ls_t, ls_l, ls_r):
    """Optional piecewise-constant rate series of the local links, whose load may have moved."""
    if isc[SERIES] == 1:
        n = isc[LS_N]
        for j in range(ncl):
            l = LI[CL, j]
            load = 0.0
            k0 = LI[LOFF, l]
            for k in range(k0, k0 + LI[NACT, l]):
                load += SD[k, SW] * SD[k, SR]
            if load != LF[LLOAD, l]:
                LF[LLOAD, l] = load
                ls_t[n] = t
                ls_l[n] = l
                ls_r[n] = load
                n += 1
        isc[LS_N] = n


@njit(cache=True, _nrt=False, inline="always")
def _join_links(f, stamp, ncl, NI, EI, LF, LI, isc):
    """Append flow f's links that are not local yet to the local links (slack ones stay out,
    _slack); returns ncl."""
    p0 = NI[f, POFF]
    for e in range(p0, p0 + NI[f, PLEN]):
        l = EI[e, ELINK]
        if LI[LSTAMP, l] != stamp and not _slack(l, LF, isc):
            ncl = _open_link(l, stamp, ncl, LF, LI)
    return ncl


@njit(cache=True, _nrt=False)
def _recompute(t, theta, NF, NI, EI, ew, SI, SD, LF, LI, lptr, wl, isc, dhk, dhi, dpos,
               rhk, rhi, rpos, ls_t, ls_l, ls_r, chk, chi, cpos, tk, ti):
    """Weighted max-min (progressive filling) over the component reached from the seed links.

    Flows with ``rate < theta`` keep their rate and only reduce the capacity of the links
    they cross (exact when the change since the last solve only removed flows whose rate was
    at least ``theta``; pass ``-inf`` otherwise). Flows whose rate changes get their remaining
    bytes brought up to ``t`` and a new drain time.

    A flow with a slow-start cap c is a flow with a private link of capacity c: it freezes at
    level c unless a shared link froze it earlier (min-heap ``chk`` of caps next to the heap
    of link levels). A flow frozen by its cap queues an event at its next cap doubling.
    """
    isc[STAMP] += 1
    stamp = isc[STAMP]
    ncl = 0
    for k in range(isc[N_SEED]):
        l = LI[SEEDS, k]
        LI[SEEDED, l] = 0
        ncl = _open_link(l, stamp, ncl, LF, LI)
    isc[N_SEED] = 0
    ncf = 0
    q = 0
    pos = wl.shape[0] >> 1  # _fill's entry list, made during the search
    # Removal-only batch and no active flow anywhere at least as fast as the slowest removed
    # one: by the threshold argument nothing changes (all-to-all drains in this order), so
    # skip the search; only the link series of the seed links still needs updating.
    if theta > -np.inf and (isc[RH_N] == 0 or -rhk[0] < theta):
        for j in range(ncl):
            LF[RES, j] = 0.0
        q = ncl
        isc[SKIPPED] += 1
    # ---- breadth-first search over links; frozen load of the slow flows on each link
    while q < ncl:
        l = LI[CL, q]
        frozen = 0.0
        k0 = LI[LOFF, l]
        for k in range(k0, k0 + LI[NACT, l]):
            r = SD[k, SR]
            if r >= theta:
                f = SI[k, SFLOW]
                if NI[f, FSTAMP] != stamp:
                    NI[f, FSTAMP] = stamp
                    NI[ncf, CF] = f
                    ncf += 1
                    ncl, pos = _list_entries(f, pos, stamp, ncl, True, NI, EI, ew, LF, LI, wl, isc)
            else:
                frozen += SD[k, SW] * r
        LF[RES, q] = LF[CAP, l] - frozen
        q += 1
    isc[CF_TOTAL] += ncf
    _fill(t, ncf, ncl, stamp, False, True, NF, NI, EI, ew, SI, SD, LF, LI, lptr, wl, isc, chk,
          chi, cpos, tk, ti)
    _apply(t, ncf, False, NF, NI, EI, SD, isc, dhk, dhi, dpos, rhk, rhi, rpos)
    isc[RECOMP] += 1
    _series(t, ncl, SD, LF, LI, isc, ls_t, ls_l, ls_r)


@njit(cache=True, _nrt=False, inline="always")
def _load_max(l, stamp, NF, NI, SI, SD, LI):
    """(load, largest rate) of link l with the flows of the repaired set (``FSTAMP ==
    stamp``) at their new rates ``NF[f, NR]`` and every other flow at its current one."""
    load = 0.0
    mx = 0.0
    for k in range(LI[LOFF, l], LI[LOFF, l] + LI[NACT, l]):
        g = SI[k, SFLOW]
        x = NF[g, NR] if NI[g, FSTAMP] == stamp else SD[k, SR]
        load += SD[k, SW] * x
        if x > mx:
            mx = x
    return load, mx


@njit(cache=True, _nrt=False, inline="always")
def _has_bottleneck(g, r, stamp, NF, NI, EI, SI, SD, LF, LI, isc):
    """(whether flow g, outside the repaired set at rate r, still has a bottleneck: a
    saturated link on which no flow is faster than g; link slots scanned). Local links read
    the repaired load and largest rate (``LF[RES]``, ``LF[WSUM]`` after the check pass); the
    others carry no flow of the set and are scanned."""
    hi = r * (1.0 + TIE_EPS)
    scanned = 0
    p0 = NI[g, POFF]
    for e in range(p0, p0 + NI[g, PLEN]):
        l = EI[e, ELINK]
        if LI[LSTAMP, l] == stamp:
            j = LI[LLOC, l]
            load = LF[RES, j]
            mx = LF[WSUM, j]
        elif _slack(l, LF, isc):
            continue  # never saturated
        else:
            scanned += LI[NACT, l]
            load, mx = _load_max(l, stamp, NF, NI, SI, SD, LI)
        if load >= LF[CAP, l] * (1.0 - TIE_EPS) and mx <= hi:
            return True, scanned
    return False, scanned


@njit(cache=True, _nrt=False)
def _recompute_local(t, theta, limit, NF, NI, EI, ew, SI, SD, LF, LI, lptr, wl, isc, dhk, dhi,
                     dpos, rhk, rhi, rpos, ls_t, ls_l, ls_r, chk, chi, cpos, tk, ti):
    """Local repair of the max-min allocation after a batch (fluid flows, no caps): re-solve
    a small set S of flows, starting with those on the seed links, every other flow keeping
    its rate, and grow S until the result is the max-min allocation. Returns False, having
    changed nothing but scratch state, when its work (link slots scanned) would exceed
    ``limit`` (the caller then solves the whole component); the seeds are consumed only on
    success.

    Why it is exact (docs/flow_engine.md, "Local repair"): an allocation is the max-min fair
    one iff it is feasible and every flow has a bottleneck, a saturated link on which no
    flow is faster (weights or not). Progressive filling of S over the capacity the others
    leave gives every flow of S such a link, unless a faster outside flow shares it (checked
    at each saturation: that flow joins S). An outside flow's old bottleneck is unchanged
    unless S or the batch touched it; a flow on a local link that is now unsaturated, or
    that now carries a faster flow, is checked for a bottleneck anywhere on its path, and
    joins S without one. Seed links carry only flows of S, so changed capacities are
    covered; links that gain load are bounded by the residual, so the result is feasible.
    Comparisons allow TIE_EPS relative (rounding of sums of rates). ``theta`` (a batch that
    only removed flows; -inf otherwise): flows slower than it keep their rates (the threshold
    argument of ``_recompute``), so S starts with the faster flows of the seed links only; the
    checks would add any other flow that needed it."""
    isc[STAMP] += 1
    stamp = isc[STAMP]
    ncl = 0
    for k in range(isc[N_SEED]):
        ncl = _open_link(LI[SEEDS, k], stamp, ncl, LF, LI)  # seeds are distinct
    nseed = ncl
    ncf = 0
    for q in range(nseed):
        l = LI[CL, q]
        for k in range(LI[LOFF, l], LI[LOFF, l] + LI[NACT, l]):
            f = SI[k, SFLOW]
            if NI[f, FSTAMP] != stamp and SD[k, SR] >= theta:
                NI[f, FSTAMP] = stamp
                NI[ncf, CF] = f
                ncf += 1
                ncl = _join_links(f, stamp, ncl, NI, EI, LF, LI, isc)
    rounds = 0
    work = 0
    while True:
        rounds += 1
        # a round scans every slot of the local links about three times
        for j in range(ncl):
            work += 3 * LI[NACT, LI[CL, j]]
        if work > limit:
            isc[LOCAL_ROUNDS] += rounds
            return False
        if rounds > 1:
            # a new round: the set and the local links are re-marked with a fresh stamp
            isc[STAMP] += 1
            stamp = isc[STAMP]
            for k in range(ncf):
                NI[NI[k, CF], FSTAMP] = stamp
            for j in range(ncl):
                LI[LSTAMP, LI[CL, j]] = stamp
        # residual capacity of each local link: what the flows outside S leave
        for j in range(ncl):
            l = LI[CL, j]
            frozen = 0.0
            for k in range(LI[LOFF, l], LI[LOFF, l] + LI[NACT, l]):
                if NI[SI[k, SFLOW], FSTAMP] != stamp:
                    frozen += SD[k, SW] * SD[k, SR]
            LF[RES, j] = LF[CAP, l] - frozen
            LF[WSUM, j] = 0.0
            LI[CNT, j] = 0
        npend = _fill(t, ncf, ncl, stamp, True, False, NF, NI, EI, ew, SI, SD, LF, LI, lptr, wl,
                      isc, chk, chi, cpos, tk, ti)
        if npend == 0:
            # repaired load and largest rate of each local link (RES, WSUM are free now)
            for j in range(ncl):
                LF[RES, j], LF[WSUM, j] = _load_max(LI[CL, j], stamp, NF, NI, SI, SD, LI)
            # outside flows on a local link that lost saturation or gained a faster flow
            ok = -2 * stamp - 1
            for j in range(ncl):
                l = LI[CL, j]
                sat = LF[RES, j] >= LF[CAP, l] * (1.0 - TIE_EPS)
                mx = LF[WSUM, j]
                for k in range(LI[LOFF, l], LI[LOFF, l] + LI[NACT, l]):
                    g = SI[k, SFLOW]
                    if NI[g, FSTAMP] == stamp or NI[g, FFRZ] == ok or NI[g, FFRZ] == ok + 1:
                        continue
                    r = SD[k, SR]
                    if sat and mx <= r * (1.0 + TIE_EPS):
                        continue
                    has, scanned = _has_bottleneck(g, r, stamp, NF, NI, EI, SI, SD, LF, LI, isc)
                    work += scanned
                    if has:
                        NI[g, FFRZ] = ok
                    else:
                        NI[g, FFRZ] = ok + 1
                        NI[ncf + npend, CF] = g
                        npend += 1
        if npend == 0:
            break
        for i in range(npend):
            ncl = _join_links(NI[ncf + i, CF], stamp, ncl, NI, EI, LF, LI, isc)
        ncf += npend
    for k in range(isc[N_SEED]):
        LI[SEEDED, LI[SEEDS, k]] = 0
    isc[N_SEED] = 0
    isc[LOCAL_ROUNDS] += rounds
    isc[CF_TOTAL] += ncf
    _apply(t, ncf, True, NF, NI, EI, SD, isc, dhk, dhi, dpos, rhk, rhi, rpos)
    isc[RECOMP] += 1
    _series(t, ncl, SD, LF, LI, isc, ls_t, ls_l, ls_r)
    return True


# ================================================================ node life cycle
@njit(cache=True, _nrt=False, inline="always")
def _begin_data(c, t, NF, NI, EI, ew, SI, SD, LF, LI, isc, tk, ti):
    """Transfer c starts sending bytes at t (after its handshake, if any)."""
    NF[c, TDATA] = t
    NI[c, CAPB] = 0
    NI[c, CAPEV] = -1
    if NI[c, PLEN] < 0:  # re-routed during its handshake and left without a path
        NI[c, STATE] = NOPATH if isc[WAITOK] == 1 else STRANDED
    elif NF[c, SIZE] <= 0.0:
        NI[c, STATE] = FLIGHT
        isc[TH_N] = _tpush(tk, ti, isc[TH_N], t + NF[c, TAIL], c * 4 + EV_END)
    else:
        NI[c, STATE] = ACTIVE
        NF[c, REM] = NF[c, SIZE]
        NF[c, SEG0] = NF[c, SIZE]
        NF[c, RATE] = 0.0
        NF[c, TLAST] = t
        NI[c, ISNEW] = 1
        NI[isc[N_ADD], ADDL] = c
        isc[N_ADD] += 1
        _try_activate(c, t, NI, EI, ew, SI, SD, LF, LI, isc)


@njit(cache=True, _nrt=False)
def _start_node(c, t, NF, NI, EI, ew, SI, SD, LF, LI, isc, tk, ti):
    NF[c, TSTART] = t
    k = NI[c, KIND]
    if k == TRANSFER:
        if NI[c, PLEN] < 0:  # no path to the destination when it was last routed
            NI[c, STATE] = NOPATH if isc[WAITOK] == 1 else STRANDED
        elif NF[c, HS] > 0.0:  # tcp: SYN, SYN-ACK, then data behind the third packet
            NI[c, STATE] = HSHAKE
            isc[TH_N] = _tpush(tk, ti, isc[TH_N], t + NF[c, HS], c * 4 + EV_DATA)
        else:
            _begin_data(c, t, NF, NI, EI, ew, SI, SD, LF, LI, isc, tk, ti)
    else:
        NI[c, STATE] = FLIGHT
        isc[TH_N] = _tpush(tk, ti, isc[TH_N], t + NF[c, DUR], c * 4 + EV_END)


@njit(cache=True, _nrt=False)
def _end_node(f, t, NF, NI, EI, ew, SI, SD, LF, LI, cptr, cidx, isc, tk, ti):
    NI[f, STATE] = DONE
    NF[f, TEND] = t
    for k in range(cptr[f], cptr[f + 1]):
        c = cidx[k]
        NI[c, NDEPS] -= 1
        if NI[c, NDEPS] == 0:
            s = NF[c, START]
            if s > t:
                isc[TH_N] = _tpush(tk, ti, isc[TH_N], s, c * 4 + EV_START)
            else:
                _start_node(c, t, NF, NI, EI, ew, SI, SD, LF, LI, isc, tk, ti)


@njit(cache=True, _nrt=False)
def advance(t_stop, mode, NF, NI, cptr, cidx, EI, ew, SI, SD, LF, LI, lptr, wl, tk, ti, dhk,
            dhi, dpos, rhk, rhi, rpos, ls_t, ls_l, ls_r, isc, fsc, chk, chi, cpos, cbuf):
    """Process every event with time < ``t_stop`` (all events of one time stamp as one batch,
    followed by one component-local re-allocation). Returns RC_STOP, or RC_GROW_SERIES when the
    caller must enlarge the link-series arrays before resuming, or RC_GROW_SLOTS when flows of
    the current batch wait for slot room (the caller grows the pool and calls again: the batch
    resumes where it stopped).

    ``mode`` (incremental driving, 0 in batch runs): with M_STOPC, a time stamp at which nodes
    ended stops the loop after its events and before its re-allocation (RC_DEFER; the ended
    nodes are ``cbuf[:isc[NDONE]]``); with M_INCL the instant ``t_stop`` itself is processed and
    deferred the same way (the clock moves to ``t_stop`` even when nothing happens there). The
    next call first finishes the deferred batch, including whatever the caller started at that
    instant, so driving step by step gives the same batches as one batch run."""
    n_links = LI.shape[1]
    if isc[SLOTWAIT] == 0:
        isc[NDONE] = 0
    while True:
        resume = isc[DEFER] == 1
        if resume:
            t = fsc[CLOCK]
        else:
            t = np.inf
            if isc[DH_N] > 0:
                t = dhk[0]
            if isc[TH_N] > 0 and tk[0] < t:
                t = tk[0]
            if isc[PEND] == 1 and fsc[PEND_T] < t:
                t = fsc[PEND_T]
            if (mode & M_INCL) != 0:
                if t > t_stop:
                    # nothing up to the bound: the clock moves there, with an empty batch open
                    # so that what the caller starts at t_stop is solved with it
                    fsc[CLOCK] = t_stop
                    fsc[THETA] = np.inf
                    isc[DFULL] = 0
                    isc[DEFER] = 1
                    return RC_DEFER
            elif not (t < t_stop):
                return RC_STOP
        if isc[SERIES] == 1 and isc[LS_N] + n_links > ls_t.shape[0]:
            return RC_GROW_SERIES
        ndone0 = isc[NDONE]
        if resume:
            isc[DEFER] = 0
            theta = fsc[THETA]
            full = isc[DFULL] == 1
            if isc[SLOTWAIT] == 1:  # the pool has grown: the batch's pending flows start now
                isc[SLOTWAIT] = 0
                ndone0 = isc[NDONE0]
                flush_pending(t, NI, EI, ew, SI, SD, LF, LI, isc)
        else:
            fsc[CLOCK] = t
            theta = np.inf
            full = False
            isc[STEPS] += 1
        if isc[PEND] == 1 and fsc[PEND_T] == t:
            # changes made by Python at this instant (faults, re-routes, added transfers)
            isc[PEND] = 0
            full = True
        nev = 0
        while True:
            progressed = False
            while isc[DH_N] > 0 and dhk[0] <= t:
                f = dhi[0]
                isc[DH_N] = _hremove(dhk, dhi, dpos, isc[DH_N], f)
                isc[RH_N] = _hremove(rhk, rhi, rpos, isc[RH_N], f)
                # the last byte leaves the source: release the links, deliver after the tail
                if NF[f, RATE] < theta:
                    theta = NF[f, RATE]
                _deactivate(f, t, NI, EI, SI, SD, LF, LI, isc)
                _account(f, NF[f, SEG0], NI, EI, ew, LF)
                NF[f, REM] = 0.0
                NF[f, SEG0] = 0.0
                NF[f, RATE] = 0.0
                NI[f, STATE] = FLIGHT
                isc[TH_N] = _tpush(tk, ti, isc[TH_N], t + NF[f, TAIL], f * 4 + EV_END)
                nev += 1
                progressed = True
            while isc[TH_N] > 0 and tk[0] <= t:
                code = ti[0]
                isc[TH_N] = _tpop(tk, ti, isc[TH_N])
                node = code >> 2
                typ = code & 3
                if typ == EV_END:
                    _end_node(node, t, NF, NI, EI, ew, SI, SD, LF, LI, cptr, cidx, isc, tk, ti)
                    if (mode & M_STOPC) != 0:
                        cbuf[isc[NDONE]] = node
                        isc[NDONE] += 1
                    nev += 1
                elif typ == EV_START:
                    _start_node(node, t, NF, NI, EI, ew, SI, SD, LF, LI, isc, tk, ti)
                    nev += 1
                elif typ == EV_DATA:
                    _begin_data(node, t, NF, NI, EI, ew, SI, SD, LF, LI, isc, tk, ti)
                    nev += 1
                else:
                    # slow-start cap doubles; it matters only if the last solve froze the flow
                    # at its cap (otherwise a shared link binds it and a higher cap changes
                    # nothing until that flow is re-solved, which evaluates the cap anew)
                    if NI[node, STATE] == ACTIVE and NI[node, CAPB] == 1:
                        p0 = NI[node, POFF]
                        for e in range(p0, p0 + NI[node, PLEN]):
                            _seed(LI, isc, EI[e, ELINK])
                        full = True
                        nev += 1
                progressed = True
            if not progressed:
                break
        isc[EVENTS] += nev
        if isc[PACT_N] > 0:  # flows wait for slot room: Python grows the pool, then resume
            fsc[THETA] = theta
            isc[DFULL] = 1 if full else 0
            isc[DEFER] = 1
            isc[SLOTWAIT] = 1
            isc[NDONE0] = ndone0
            return RC_GROW_SLOTS
        if isc[N_ADD] > 0:
            full = True
        if ((mode & M_STOPC) != 0 and isc[NDONE] > ndone0) or \
                ((mode & M_INCL) != 0 and t == t_stop):
            fsc[THETA] = theta
            isc[DFULL] = 1 if full else 0
            isc[DEFER] = 1
            return RC_DEFER
        if isc[N_SEED] > 0 or isc[N_ADD] > 0:
            # the threshold is lowered by the tie slack: a flow one rounding below the slowest
            # removed one is its tie, and is re-solved (re-solving more flows is always exact)
            th = -np.inf if full else theta * (1.0 - TIE_EPS)
            done = False
            # local repair first (fluid flows), unless the threshold proves nothing changes;
            # after a repair outgrew its limit, the next 2^k batches (k failures in a row, at
            # most 1,024) go straight to the component solve
            if isc[CAPS] == 0 and isc[N_SEED] > 0 and \
                    not (th > -np.inf and (isc[RH_N] == 0 or -rhk[0] < th)):
                if isc[LOCAL_SKIP] > 0:
                    isc[LOCAL_SKIP] -= 1
                else:
                    done = _recompute_local(t, th, LOCAL_MIN_WORK + isc[ACT_ENT] // LOCAL_SHARE,
                                            NF, NI, EI, ew, SI, SD, LF, LI, lptr, wl, isc, dhk,
                                            dhi, dpos, rhk, rhi, rpos, ls_t, ls_l, ls_r, chk,
                                            chi, cpos, tk, ti)
                    if done:
                        isc[LOCAL_OK] += 1
                        isc[LOCAL_STREAK] = 0
                    else:
                        isc[LOCAL_FAIL] += 1
                        isc[LOCAL_STREAK] += 1
                        isc[LOCAL_SKIP] = 1 << min(isc[LOCAL_STREAK], 10)
            if not done:
                _recompute(t, th, NF, NI, EI, ew, SI, SD, LF, LI, lptr, wl, isc, dhk, dhi,
                           dpos, rhk, rhi, rpos, ls_t, ls_l, ls_r, chk, chi, cpos, tk, ti)
        isc[N_ADD] = 0


# ================================================================ helpers called from Python
@njit(cache=True, _nrt=False)
def start_nodes(nodes, t, NF, NI, EI, ew, SI, SD, LF, LI, isc, fsc, tk, ti):
    """Start (or schedule for their START time) the given parentless nodes, the clock being
    at t: every root before the first advance(), or the nodes added while driving
    incrementally. The ones that start at t are resolved by the next advance() as one batch
    of instant t."""
    for i in range(nodes.shape[0]):
        c = nodes[i]
        s = NF[c, START]
        if s > t:
            isc[TH_N] = _tpush(tk, ti, isc[TH_N], s, c * 4 + EV_START)
        else:
            _start_node(c, t, NF, NI, EI, ew, SI, SD, LF, LI, isc, tk, ti)
    if isc[N_ADD] > 0 or isc[N_SEED] > 0:
        isc[PEND] = 1
        fsc[PEND_T] = t


@njit(cache=True, _nrt=False)
def seed_links(links, LI, isc):
    """Mark links whose capacity Python changed, for the next re-allocation."""
    for k in range(links.shape[0]):
        _seed(LI, isc, links[k])


@njit(cache=True, _nrt=False)
def stop_flows(flows, t, NF, NI, EI, ew, SI, SD, LF, LI, isc, dhk, dhi, dpos, rhk, rhi, rpos):
    """Flows crossing a link that went down at t: bring bytes up to t, credit what was sent on
    the old path, take them off their links and park them as STALLED (rate 0) until they are
    re-routed."""
    for k in range(flows.shape[0]):
        f = flows[k]
        if NI[f, STATE] != ACTIVE:
            continue
        if NI[f, ISNEW] == 1:
            rem = NF[f, REM]
            NI[f, ISNEW] = 0
        else:
            rem = NF[f, REM] - NF[f, RATE] * (t - NF[f, TLAST])
            if rem < 0.0:
                rem = 0.0
        _deactivate(f, t, NI, EI, SI, SD, LF, LI, isc)
        _account(f, NF[f, SEG0] - rem, NI, EI, ew, LF)
        NF[f, REM] = rem
        NF[f, SEG0] = rem
        NF[f, TLAST] = t
        NF[f, RATE] = 0.0
        NI[f, STATE] = STALLED
        isc[DH_N] = _hremove(dhk, dhi, dpos, isc[DH_N], f)
        isc[RH_N] = _hremove(rhk, rhi, rpos, isc[RH_N], f)


@njit(cache=True, _nrt=False)
def resume_flows(flows, t, NF, NI, EI, ew, SI, SD, LF, LI, isc):
    """Re-routed flows (new entries already written) start sending again at t."""
    for k in range(flows.shape[0]):
        f = flows[k]
        NI[f, STATE] = ACTIVE
        NI[f, ISNEW] = 1
        NF[f, RATE] = 0.0
        NF[f, TLAST] = t
        NF[f, SEG0] = NF[f, REM]
        NI[isc[N_ADD], ADDL] = f
        isc[N_ADD] += 1
        _try_activate(f, t, NI, EI, ew, SI, SD, LF, LI, isc)


@njit(cache=True)
def flows_on_links(links, SI, LI):
    """Node ids of the active flows on any of ``links`` (sorted, unique)."""
    out = []
    for i in range(links.shape[0]):
        l = links[i]
        k0 = LI[LOFF, l]
        for k in range(k0, k0 + LI[NACT, l]):
            out.append(SI[k, SFLOW])
    a = np.array(out, dtype=np.int64)
    return np.unique(a)


@njit(cache=True)
def paths_hitting(dead, NI, EI):
    """Transfers not sending yet (WAIT, or in their tcp handshake) whose current path crosses
    a link with dead[l] != 0."""
    out = []
    n = NI.shape[0]
    for f in range(n):
        if NI[f, KIND] != TRANSFER or not (NI[f, STATE] == WAIT or NI[f, STATE] == HSHAKE):
            continue
        p0 = NI[f, POFF]
        for e in range(p0, p0 + NI[f, PLEN]):
            if dead[EI[e, ELINK]] != 0:
                out.append(f)
                break
    return np.array(out, dtype=np.int64)


@njit(cache=True)
def slot_demand(NI, EI, n_links):
    """Per link, the most slots it can ever need from now on: the entries of every transfer
    that may still send (not started, sending, or waiting to be re-routed)."""
    need = np.zeros(n_links, dtype=np.int64)
    for f in range(NI.shape[0]):
        s = NI[f, STATE]
        if NI[f, KIND] != TRANSFER or not (s == WAIT or s == ACTIVE or s == STALLED or
                                           s == HSHAKE):
            continue
        p0 = NI[f, POFF]
        for e in range(p0, p0 + NI[f, PLEN]):
            need[EI[e, ELINK]] += 1
    return need


@njit(cache=True)
def relayout_slots(new_off, new_cap, EI, SI, SD, LI):
    """Move every link's occupied slots to a new layout (same order) in fresh pools."""
    total = 0
    for l in range(new_cap.shape[0]):
        total += new_cap[l]
    SI2 = np.empty((max(total, 1), SI.shape[1]), dtype=np.int64)
    SD2 = np.empty((max(total, 1), SD.shape[1]), dtype=np.float64)
    for l in range(new_cap.shape[0]):
        k0 = LI[LOFF, l]
        j0 = new_off[l]
        for i in range(LI[NACT, l]):
            SI2[j0 + i] = SI[k0 + i]
            SD2[j0 + i] = SD[k0 + i]
            EI[SI[k0 + i, SENT], ESLOT] = j0 + i
        LI[LOFF, l] = j0
        LI[LCAP, l] = new_cap[l]
    return SI2, SD2


@njit(cache=True)
def dedupe_entries(ptr, link, weight):
    """Merge repeated links inside one flow's entry list (summing weights), in place order.
    Returns (ptr, link, weight) unchanged when there is nothing to merge. Linear in the
    entries: a member set's path can cross thousands of links (an all-to-all's class of pairs
    on 16,384 GPUs), where comparing every pair of a flow's entries took minutes."""
    n = ptr.shape[0] - 1
    m_in = link.shape[0]
    if m_in == 0:
        return ptr, link, weight
    n_links = 0
    for a in range(m_in):
        if link[a] + 1 > n_links:
            n_links = link[a] + 1
    seen = np.full(n_links, -1, dtype=np.int64)  # the flow that last met each link
    dup = False
    for f in range(n):
        for a in range(ptr[f], ptr[f + 1]):
            if seen[link[a]] == f:
                dup = True
                break
            seen[link[a]] = f
        if dup:
            break
    if not dup:
        return ptr, link, weight
    seen[:] = -1
    at = np.empty(n_links, dtype=np.int64)  # where the current flow keeps each link
    nptr = np.zeros(n + 1, dtype=np.int64)
    nl = np.empty(m_in, dtype=np.int64)
    nw = np.empty(m_in, dtype=np.float64)
    m = 0
    for f in range(n):
        for a in range(ptr[f], ptr[f + 1]):
            k = link[a]
            if seen[k] == f:
                nw[at[k]] += weight[a]
            else:
                seen[k] = f
                at[k] = m
                nl[m] = k
                nw[m] = weight[a]
                m += 1
        nptr[f + 1] = m
    return nptr, nl[:m].copy(), nw[:m].copy()


@njit(cache=True)
def path_tails(start, end, link, weight, bw, latency, hops, size, mtu):
    """Time added after the last byte leaves the source: propagation latency plus, when
    ``mtu > 0``, one store-and-forward serialisation of the last packet (min(mtu, size) bytes)
    on every hop after the first. Single-path flows (all weights 1) use each hop's own
    bandwidth in hop order; split flows use (hops - 1) packets at their slowest link."""
    n = start.shape[0]
    out = np.empty(n, dtype=np.float64)
    for f in range(n):
        x = latency[f]
        if mtu > 0 and hops[f] > 1:
            pkt = float(mtu) if size[f] > mtu else float(size[f])
            single = True
            for e in range(start[f], end[f]):
                if weight[e] != 1.0:
                    single = False
            if single:
                for e in range(start[f] + 1, end[f]):
                    x += pkt / bw[link[e]]
            else:
                bmin = np.inf
                for e in range(start[f], end[f]):
                    if bw[link[e]] < bmin:
                        bmin = bw[link[e]]
                x += (hops[f] - 1) * pkt / bmin
        out[f] = x
    return out


@njit(cache=True, _nrt=False)
def solve_all(NF, NI, EI, ew, SI, SD, LF, LI, lptr, wl, isc, dhk, dhi, dpos, rhk, rhi, rpos,
              ls_t, ls_l, ls_r, chk, chi, cpos, tk, ti):
    """Every node is an active flow starting now: one full max-min solve (tests, tools).
    Flows with ``CAP0 < CAPMAX`` (and TDATA = 0, RTT > 0) are capped at ``CAP0``."""
    for f in range(NI.shape[0]):
        NI[f, STATE] = ACTIVE
        NI[f, ISNEW] = 1
        NF[f, REM] = NF[f, SIZE]
        _activate(f, 0.0, NI, EI, ew, SI, SD, LF, LI, isc)
    _recompute(0.0, -np.inf, NF, NI, EI, ew, SI, SD, LF, LI, lptr, wl, isc, dhk, dhi, dpos,
               rhk, rhi, rpos, ls_t, ls_l, ls_r, chk, chi, cpos, tk, ti)


@njit(cache=True)
def tcp_path_params(start, end, link, weight, bw, latency, hops, payload, mss, hdr, l2,
                    ack_bytes, syn_bytes, init_cwnd, handshake, first_window):
    """Per transfer, from its path and the protocol's packet sizes (docs/flow_engine.md, "TCP
    start-up"): (tail, handshake delay, RTT, slow-start cap base, first-round cap, cap bound).

    * data packet on the wire: ``mss + hdr + l2`` bytes (the last one ``rest + hdr + l2``);
    * RTT = round-trip propagation + one data packet and one pure ACK serialised per hop
      (ACKs on the reverse directed links ``l ^ 1``);
    * handshake = SYN and SYN-ACK over the path and back, then the third packet (a pure ACK)
      serialised on the first link before the first data packet;
    * first round: n0 full data packets per RTT, n0 = ``init_cwnd``, or after a handshake the
      packets that fit the peer's unscaled window ``first_window`` (bytes, 7 at MSS 8948);
      every ACK adds a packet to the window, so round k >= 1 carries (init_cwnd + n0) 2^(k-1)
      packets: cap base = (init_cwnd + n0) / 2 packets per RTT. The cap bound is the largest
      rate the flow could get on its path (min of bandwidth / weight), where caps stop binding;
    * tail = propagation + a full data packet (the only packet, for one-packet transfers)
      serialised again on every hop after the first.
    Split (spray) flows use their hop count and slowest link instead of per-hop sums.
    """
    n = start.shape[0]
    tail = np.zeros(n)
    hs = np.zeros(n)
    rtt = np.zeros(n)
    cap0 = np.full(n, np.inf)
    capf = np.full(n, np.inf)
    capmax = np.full(n, np.inf)
    pkt = float(mss + hdr + l2)
    n0 = float(init_cwnd)
    if handshake and first_window > 0:
        n0 = float(max(1, min(init_cwnd, first_window // mss)))
    ack = float(ack_bytes + l2)
    syn = float(syn_bytes + l2)
    for f in range(n):
        if end[f] == start[f]:
            continue
        s = payload[f]
        npk = int(np.ceil(s / mss)) if s > 0 else 0
        # the packet whose store-and-forward delays the end: the last one, or, when there are
        # two or more, the full one just before it (the last cannot overtake it at a switch)
        last = pkt if npk > 1 else (s + hdr + l2 if npk == 1 else 0.0)
        lat = latency[f]
        single = True
        bmax = np.inf
        bmin = np.inf
        for e in range(start[f], end[f]):
            if weight[e] != 1.0:
                single = False
            b = bw[link[e]]
            if b < bmin:
                bmin = b
            if b / weight[e] < bmax:
                bmax = b / weight[e]
        if single:
            ser = 0.0
            sa = 0.0
            ss = 0.0
            for e in range(start[f], end[f]):
                l = link[e]
                ser += pkt / bw[l] + ack / bw[l ^ 1]
                ss += syn / bw[l] + syn / bw[l ^ 1]
                if e > start[f]:
                    sa += last / bw[l]
            first = bw[link[start[f]]]
        else:
            h = hops[f]
            ser = h * (pkt + ack) / bmin
            ss = 2 * h * syn / bmin
            sa = (h - 1) * last / bmin
            first = bmin
        r = 2.0 * lat + ser
        rtt[f] = r
        if handshake:
            hs[f] = 2.0 * lat + ss + ack / first
        tail[f] = lat + sa
        cap0[f] = 0.5 * (init_cwnd + n0) * pkt / r
        capf[f] = n0 * pkt / r
        capmax[f] = bmax
    return tail, hs, rtt, cap0, capf, capmax


@njit(cache=True)
def wire_bytes(payload, mss, per_packet):
    """Bytes on the wire of each transfer: payload plus ``per_packet`` header bytes for each of
    its ceil(payload / mss) packets."""
    out = np.empty(payload.shape[0])
    for i in range(payload.shape[0]):
        s = payload[i]
        out[i] = s + np.ceil(s / mss) * per_packet if s > 0 else s
    return out
