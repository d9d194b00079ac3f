"""The flow engine merges a link repeated inside one flow's path (netcore/flow/_kernels.py
dedupe_entries): weights summed, first-seen order kept, linear in the entries."""
import numpy as np
from hypothesis import given, settings, strategies as st

from netcore.flow import _kernels as K


def _reference(ptr, link, weight):
    out_ptr, out_l, out_w = [0], [], []
    for f in range(len(ptr) - 1):
        seen = {}
        for a in range(ptr[f], ptr[f + 1]):
            k = int(link[a])
            if k in seen:
                out_w[seen[k]] += float(weight[a])
            else:
                seen[k] = len(out_l)
                out_l.append(k)
                out_w.append(float(weight[a]))
        out_ptr.append(len(out_l))
    return out_ptr, out_l, out_w


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 12), st.sampled_from([0.25, 0.5, 1.0])),
                         max_size=9), max_size=6))
def test_merges_repeated_links_as_the_reference_does(flows):
    ptr = np.concatenate([[0], np.cumsum([len(f) for f in flows])]).astype(np.int64)
    link = np.array([k for f in flows for k, _ in f], dtype=np.int64)
    weight = np.array([w for f in flows for _, w in f], dtype=np.float64)
    p, lk, w = K.dedupe_entries(ptr, link, weight)
    rp, rl, rw = _reference(ptr, link, weight)
    assert p.tolist() == rp and lk.tolist() == rl
    np.testing.assert_allclose(w, rw)


def test_long_distinct_paths_pass_through_unchanged():
    # 2,000 flows of 5,000 distinct links each: quadratic comparison took seconds here
    n, L = 2000, 5000
    ptr = np.arange(n + 1, dtype=np.int64) * L
    link = np.tile(np.arange(L, dtype=np.int64), n)
    weight = np.ones(n * L)
    p, lk, w = K.dedupe_entries(ptr, link, weight)
    assert p is ptr and lk is link and w is weight
