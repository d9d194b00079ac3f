"""The compiled max-min solver against its definition and the pure-Python reference."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from netcore.flow import reference
from netcore.flow.engine import max_min_rates


@st.composite
def instances(draw):
    n_links = draw(st.integers(1, 6))
    cap = draw(st.lists(st.floats(0.5, 100.0), min_size=n_links, max_size=n_links))
    n_flows = draw(st.integers(1, 9))
    split = draw(st.booleans())
    paths = []
    for _ in range(n_flows):
        links = draw(st.lists(st.integers(0, n_links - 1), min_size=1, max_size=min(3, n_links),
                              unique=True))
        if split:
            w = draw(st.lists(st.sampled_from([0.25, 0.5, 1.0, 1 / 3]), min_size=len(links),
                              max_size=len(links)))
        else:
            w = [1.0] * len(links)
        paths.append(list(zip(links, w)))
    return paths, cap


def _csr(paths):
    ptr = np.concatenate([[0], np.cumsum([len(p) for p in paths])])
    link = np.array([l for p in paths for l, _ in p], dtype=np.int64)
    weight = np.array([w for p in paths for _, w in p], dtype=np.float64)
    return ptr, link, weight


@settings(max_examples=150, deadline=None)
@given(instances())
def test_matches_reference_and_is_max_min(inst):
    paths, cap = inst
    ptr, link, weight = _csr(paths)
    rates = max_min_rates(ptr, link, weight, np.array(cap))
    ref = reference.max_min_rates(paths, cap)
    np.testing.assert_allclose(rates, ref, rtol=1e-9, atol=0)
    load = np.zeros(len(cap))
    np.add.at(load, link, weight * np.repeat(rates, np.diff(ptr)))
    # no link over capacity
    assert np.all(load <= np.array(cap) * (1 + 1e-9))
    # every flow has a bottleneck: a saturated link on which no flow is faster
    for f, p in enumerate(paths):
        ok = False
        for l, _ in p:
            on_l = [g for g, q in enumerate(paths) if any(ll == l for ll, _ in q)]
            saturated = load[l] >= cap[l] * (1 - 1e-9)
            fastest = rates[f] >= max(rates[g] for g in on_l) * (1 - 1e-9)
            ok |= saturated and fastest
        assert ok, f"flow {f} has no bottleneck link"


def test_two_flows_share_a_link_equally():
    rates = max_min_rates([0, 1, 2], [0, 0], [1.0, 1.0], np.array([10.0]))
    assert rates.tolist() == [5.0, 5.0]


def test_split_flow_weights_load_links_fractionally():
    # flow 0 is sprayed half/half over links 0 and 1; flow 1 uses link 0 only
    rates = max_min_rates([0, 2, 3], [0, 1, 0], [0.5, 0.5, 1.0], np.array([3.0, 100.0]))
    # link 0: 0.5 r0 + r1 = 3 with r0 = r1 -> 2 each
    np.testing.assert_allclose(rates, [2.0, 2.0], rtol=1e-15)
