"""The Schedule container: construction, validation, topological order, concat, subset."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netcore.schedule import (COMPUTE, DELAY, TRANSFER, Schedule, ScheduleBuilder,
                              ScheduleError)
from topo.errors import InputError


def chain(n):
    return Schedule.from_transfers(np.zeros(n, int), np.ones(n, int), np.full(n, 10),
                                   deps=[[]] + [[i] for i in range(n - 1)])


def test_builder_batches_and_parents():
    b = ScheduleBuilder()
    a = b.add_transfers([0, 1], [1, 0], [100, 200])
    c = b.add_transfers([0], [1], [5], parents=[[a[0], a[1]]])
    d = b.add_compute([0], 1e-3, parents=c[:, None], label="gemm")
    e = b.add_delay(0, 2e-6, parents=(np.array([0, 1]), d))
    s = b.build()
    assert s.n == 5 and s.n_transfers == 3 and s.total_bytes == 305
    assert list(s.kind) == [TRANSFER, TRANSFER, TRANSFER, COMPUTE, DELAY]
    assert list(s.deps_of(2)) == [0, 1] and list(s.deps_of(3)) == [2] and list(s.deps_of(4)) == [3]
    assert s.labels[s.label[3]] == "gemm"
    assert e.tolist() == [4]


def test_builder_rejects_forward_parent():
    b = ScheduleBuilder()
    b.add_transfers([0], [1], [1])
    with pytest.raises(ScheduleError, match="parent 5"):
        b.add_transfers([0], [1], [1], parents=[[5]])


@pytest.mark.parametrize("mutate, match", [
    (lambda s: s.size.__setitem__(1, -1), "node 1: bytes -1"),
    (lambda s: s.dst.__setitem__(2, 0), "node 2: a transfer from host 0 to itself"),
    (lambda s: s.start.__setitem__(0, -1.0), "node 0: start time"),
    (lambda s: s.dst.__setitem__(0, 7), "node 0: host 7 does not exist"),
])
def test_validate_names_node_and_field(mutate, match):
    s = chain(3)
    mutate(s)
    with pytest.raises(InputError, match=match):
        s.validate(n_hosts=2)


def test_cycle_detected():
    s = Schedule.from_transfers([0, 1, 0], [1, 0, 1], [1, 1, 1], deps=[[2], [0], [1]])
    with pytest.raises(ScheduleError, match="dependency cycle"):
        s.validate(2)


@st.composite
def random_dags(draw):
    n = draw(st.integers(1, 40))
    deps = [sorted(set(draw(st.lists(st.integers(0, i - 1), max_size=4)))) if i else []
            for i in range(n)]
    perm = draw(st.permutations(range(n)))
    inv = np.argsort(perm)
    # relabel so parents are not always lower ids
    pdeps = [None] * n
    for i in range(n):
        pdeps[perm[i]] = [int(perm[p]) for p in deps[i]]
    return Schedule.from_transfers(np.zeros(n, int), np.ones(n, int), np.arange(n), deps=pdeps), inv


@settings(max_examples=60, deadline=None)
@given(random_dags())
def test_topological_order_respects_every_edge(dag):
    s, _ = dag
    order = s.topological_order()
    pos = np.empty(s.n, int)
    pos[order] = np.arange(s.n)
    assert sorted(order.tolist()) == list(range(s.n))
    for i in range(s.n):
        for p in s.deps_of(i):
            assert pos[p] < pos[i]


@settings(max_examples=40, deadline=None)
@given(random_dags(), random_dags())
def test_concat_after_all_orders_phases(a, b):
    s1, s2 = a[0], b[0]
    s = Schedule.concat([s1, s2], after_all=True)
    assert s.n == s1.n + s2.n
    order = s.topological_order()
    pos = np.empty(s.n, int)
    pos[order] = np.arange(s.n)
    # every node of phase 2 comes after every node of phase 1
    assert pos[s1.n:].min() > pos[:s1.n].max()
    # phase 2's own edges survive, shifted
    for i in range(s2.n):
        assert set((s.deps_of(s1.n + i) - s1.n).tolist()) >= set(s2.deps_of(i).tolist())


def test_subset_drops_edges_to_removed_nodes():
    s = chain(4)
    t = s.subset(np.array([True, False, True, True]))
    assert t.n == 3
    assert [list(t.deps_of(i)) for i in range(3)] == [[], [], [1]]


def test_children_is_reverse_of_parents():
    s = Schedule.from_transfers([0] * 4, [1] * 4, [1] * 4, deps=[[], [0], [0], [1, 2]])
    ptr, idx = s.children()
    kids = [sorted(idx[ptr[i]:ptr[i + 1]].tolist()) for i in range(4)]
    assert kids == [[1, 2], [3], [3], []]
