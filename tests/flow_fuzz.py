"""Random inputs for the flow engine's equivalence tests (tests/test_flow_*.py): transfer DAGs
on the 16 hosts of fat_tree(4) and link faults that go down or degrade and come back up."""
import numpy as np
from hypothesis import strategies as st

from netcore import Schedule
from topo.builders import fat_tree
from topo.faults import DEGRADE, DOWN, UP, LinkFaults

FT4 = fat_tree(4, link_gbps=100, latency_us=1.0)


@st.composite
def tied_dags(draw):
    """Random transfer DAGs on fat_tree(4), many starting together (ties included), with a
    routing policy and a transport."""
    n = draw(st.integers(20, 120))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    src = rng.integers(0, 16, n)
    dst = (src + rng.integers(1, 16, n)) % 16
    size = rng.integers(1_000, 3_000_000, n)
    start = rng.choice([0.0, 5e-6, 20e-6], n)
    deps = [[int(rng.integers(0, i))] if i and rng.random() < 0.4 else [] for i in range(n)]
    policy = draw(st.sampled_from(["ecmp", "spray", "shortest"]))
    transport = draw(st.sampled_from(["fluid", "tcp"]))
    return Schedule.from_transfers(src, dst, size, start=start, deps=deps), policy, transport


def link_faults(seed: int, cables: int, factors, topo=FT4) -> LinkFaults:
    """``cables`` random cables of ``topo`` (both directions) each go down or degrade to one of
    ``factors`` within the first 200 us, and come back up, each direction on its own, within
    300 us after."""
    rng = np.random.default_rng(seed)
    rows = []
    for d in rng.choice(topo.n_dlinks // 2, cables, replace=False) * 2:
        t0 = float(rng.random() * 200e-6)
        kind = int(rng.choice([DOWN, DEGRADE]))
        f = 0.0 if kind == DOWN else float(rng.choice(factors))
        for x in (int(d), int(d) ^ 1):
            rows.append((t0, x, kind, f))
            rows.append((t0 + float(rng.random() * 300e-6), x, UP, 1.0))
    rows.sort()
    return LinkFaults(*(np.array(c) for c in zip(*rows)))
