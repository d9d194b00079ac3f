"""The continuous-batching serving loop of one replica (vLLM-like), compiled with numba.

Every iteration at time t:

1. admit waiting requests that have arrived, in arrival order, while the batch has fewer than
   ``max_seqs`` requests and the KV cache can hold the newcomer's whole context (input + output
   tokens are reserved at admission, so nothing is ever preempted; requests wait while HBM is
   full);
2. fill a token budget: one decode token for every request past its prompt, then prompt chunks
   for the others in admission order (chunked prefill);
3. price the iteration: compute (compute.inference.iteration_compute, which this compiled loop
   inlines; see INLINED_SHA1) plus communication from the fabric's cost curves (TP
   all-reduces, EP all-to-alls, pipeline sends), not overlapped;
4. advance t; a request whose prompt completes emits its first token at t, a decoding request
   its next one; a request that has all its output tokens leaves and frees its KV cache.

With a closed loop (``closed`` > 0 clients) a finished request releases the next one at t.

``prefilled`` (disaggregated serving, the decode pool): requests arrive with their prompt's KV
cache already computed (moved from a prefill replica); each decodes from its first iteration,
and the iteration that samples its first token sets ``first``. A prefill pool is this loop
with one output token per request: a request leaves when its prompt is done.
"""
from __future__ import annotations

import numba
import numpy as np

from compute.inference import iteration_compute
from netcosim.inference.fabric import curve_time

# Numba's disk cache keys this module's compiled code by this file's time stamp, not by the
# code it inlines from other files: after an edit of the cost model alone, the cached loop
# would go on pricing with the old one. INLINED_SHA1 is a hash of those files;
# tests/test_numba_inlined_sources.py fails when they change, and updating it here (an edit
# of this file) makes Numba recompile.
INLINED_FROM = ("compute/inference.py", "netcosim/inference/fabric.py")
INLINED_SHA1 = "2e76308d9e9a9e86"

# per-iteration record columns
IT_START, IT_DUR, IT_COMM, IT_PREFILL, IT_DECODE, IT_SEQS, IT_KV = range(7)
IT_COLS = 7


@numba.njit(cache=True)
def serve(arr, inp, out, closed, p, gn, gk, gc, log_s, log_t, comm, budget, max_seqs, kv_cap,
          first, finish, its, prefilled=False):
    """Run one replica. ``arr`` (arrivals, NaN for closed-loop requests not yet sent) is
    updated in place; ``first``/``finish`` receive the first-token and finish times; ``its``
    (capacity x IT_COLS) the iterations. ``comm``: layers, dense layers, MoE layers, tp, ep,
    pp, hidden, top_k. ``its[:, IT_DECODE]`` counts inter-token gaps (decode steps of requests
    that already have a token), so it sums to output tokens - requests. Returns the number of
    iterations, or -1 if ``its`` is too small."""
    n = arr.shape[0]
    cap = its.shape[0]
    run = np.empty(max_seqs, np.int64)
    chunk = np.zeros(max_seqs, np.int64)
    pf = np.zeros(n, np.int64)
    if prefilled:
        pf[:] = inp
    gen = np.zeros(n, np.int64)
    released = n
    if closed > 0:
        released = min(closed, n)
        for i in range(released):
            arr[i] = 0.0
    nrun = 0
    nxt = 0
    kv_used = 0
    t = 0.0
    it = 0
    done = 0
    layers, dense, moe = comm[0], comm[1], comm[2]
    tp, ep, pp, hid, topk = comm[3], comm[4], comm[5], comm[6], comm[7]
    while done < n:
        while (nxt < n and nrun < max_seqs and arr[nxt] <= t
               and kv_used + inp[nxt] + out[nxt] <= kv_cap):
            run[nrun] = nxt
            nrun += 1
            kv_used += inp[nxt] + out[nxt]
            nxt += 1
        if nrun == 0:
            if nxt < n and arr[nxt] == arr[nxt]:
                t = max(t, arr[nxt])
                continue
            break  # cannot happen: a closed-loop request is released before the batch empties
        left = budget
        n_dec = 0
        n_gap = 0
        dec_ctx = 0.0
        for j in range(nrun):
            i = run[j]
            chunk[j] = 0
            if pf[i] == inp[i]:
                n_dec += 1
                dec_ctx += inp[i] + gen[i]
                if gen[i] > 0:
                    n_gap += 1
        left -= n_dec
        n_pf = 0
        pf_tok = 0
        pf_ctx = 0.0
        pf_kv = 0.0
        logits = n_dec
        for j in range(nrun):
            if left <= 0:
                break
            i = run[j]
            if pf[i] < inp[i]:
                c = min(inp[i] - pf[i], left)
                chunk[j] = c
                left -= c
                n_pf += 1
                pf_tok += c
                pf_ctx += c * (pf[i] + c / 2.0)
                pf_kv += pf[i] + c
                if pf[i] + c == inp[i]:
                    logits += 1
        tokens = pf_tok + n_dec
        comp = iteration_compute(p, gn, gk, gc, float(tokens), float(logits), float(n_pf),
                                 pf_ctx, pf_kv, float(n_dec), dec_ctx)
        act = tokens * hid * 2.0
        c_t = 0.0
        if tp > 1:
            ar = curve_time(log_s[0], log_t[0], act)
            if ep > 1:
                # an expert layer: the attention all-reduce, then dispatch and combine
                a2a = curve_time(log_s[1], log_t[1], act * topk / ep)
                c_t += dense * 2.0 * ar + moe * (ar + 2.0 * a2a)
            else:
                c_t += layers * 2.0 * ar
        if pp > 1:
            c_t += (pp - 1) * curve_time(log_s[2], log_t[2], act)
        dur = comp + c_t
        if it >= cap:
            return -1
        its[it, IT_START] = t
        its[it, IT_DUR] = dur
        its[it, IT_COMM] = c_t
        its[it, IT_PREFILL] = pf_tok
        its[it, IT_DECODE] = n_gap
        its[it, IT_SEQS] = nrun
        its[it, IT_KV] = kv_used
        it += 1
        t += dur
        k = 0
        for j in range(nrun):
            i = run[j]
            gone = False
            if chunk[j] > 0:
                pf[i] += chunk[j]
                if pf[i] == inp[i]:
                    first[i] = t
                    gen[i] = 1
                    gone = gen[i] >= out[i]
            elif pf[i] == inp[i]:
                gen[i] += 1
                if gen[i] == 1:  # a prefilled request's first token
                    first[i] = t
                gone = gen[i] >= out[i]
            if gone:
                finish[i] = t
                kv_used -= inp[i] + out[i]
                done += 1
                if released < n:
                    arr[released] = t
                    released += 1
            else:
                run[k] = i
                k += 1
        nrun = k
    return it


def serve_pool(groups, arrival, inp, out, conc, cm, comm, log_s, log_t, budget, max_seqs,
               kv_cap, prefilled=False):
    """Run every replica of a pool: ``groups[r]`` lists the requests replica r serves, in the
    order it sees them arrive; ``log_t``: (kinds, replicas, POINTS). Returns (arrival, first,
    finish, one iterations array per replica) over all requests (NaN where not served)."""
    n = len(arrival)
    first = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    arrival = arrival.copy()
    iterations = []
    dp = len(groups)
    for r, idx in enumerate(groups):
        c_r = (conc // dp + (r < conc % dp)) if conc else 0
        cap = 4 * len(idx) + 1024
        while True:
            a = arrival[idx].copy()
            f_r, e_r = np.full(len(idx), np.nan), np.full(len(idx), np.nan)
            its = np.zeros((cap, IT_COLS))
            k = serve(a, inp[idx], out[idx], c_r, cm.params, cm.gemm_n, cm.gemm_k, cm.gemm_c,
                      log_s, log_t[:, r], comm, budget, max_seqs, kv_cap, f_r, e_r, its,
                      prefilled)
            if k >= 0:
                break
            cap *= 2
        arrival[idx], first[idx], finish[idx] = a, f_r, e_r
        iterations.append(its[:k])
    return arrival, first, finish, iterations
