"""topo.faults: LinkFaults.from_records / to_records, timelines, random_failures."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topo.builders import fat_tree, torus
from topo.errors import InputError
from topo.topology import us
from topo.faults import (DEGRADE, DOWN, MIN_DEGRADE_FACTOR, UP, FaultError, LinkFaults,
                         random_failures)


@pytest.fixture(scope="module")
def ft():
    return fat_tree(4)


def test_from_records_both_directions(ft):
    # host 0 - edge switch 16 is physical link 0
    f = LinkFaults.from_records(ft, [{"link": [0, 16], "kind": "down", "at_us": 5}])
    assert len(f) == 2
    assert sorted(f.dlink.tolist()) == [0, 1]
    assert (f.time == us(5)).all() and (f.kind == DOWN).all() and (f.factor == 0).all()


def test_from_records_forward_direction_is_u_to_v(ft):
    f = LinkFaults.from_records(ft, [{"link": [16, 0], "kind": "degrade", "factor": 0.5,
                                      "direction": "forward"}])
    assert f.dlink.tolist() == [ft.dlink_id(16, 0)] == [1]
    assert f.kind.tolist() == [DEGRADE] and f.factor.tolist() == [0.5]


def test_timeline_order_and_capacity(ft):
    recs = [{"link": [0, 16], "kind": "up", "at_us": 30},
            {"link": [0, 16], "kind": "degrade", "factor": 0.25, "at_us": 10},
            {"link": [0, 16], "kind": "down", "at_us": 20},
            {"link": [1, 16], "kind": "down", "at_us": 20, "direction": "forward"}]
    f = LinkFaults.from_records(ft, recs)
    assert (np.diff(f.time) >= 0).all()
    n = ft.n_dlinks
    d01 = ft.dlink_id(1, 16)
    assert (f.capacity_factor_at(n, 0.0) == 1).all()
    c = f.capacity_factor_at(n, 10e-6)
    assert c[0] == c[1] == 0.25 and c[d01] == 1
    c = f.capacity_factor_at(n, 25e-6)
    assert c[0] == c[1] == 0 and c[d01] == 0 and c[d01 ^ 1] == 1
    alive = f.alive_at(n, 25e-6)
    assert not alive[0] and alive[d01 ^ 1]
    c = f.capacity_factor_at(n, 30e-6)
    assert c[0] == c[1] == 1 and c[d01] == 0


def test_same_instant_events_apply_in_written_order(ft):
    recs = [{"link": [0, 16], "kind": "down", "at_us": 1},
            {"link": [0, 16], "kind": "up", "at_us": 1}]
    f = LinkFaults.from_records(ft, recs)
    assert f.capacity_factor_at(ft.n_dlinks, 1e-6)[0] == 1.0
    f = LinkFaults.from_records(ft, recs[::-1])
    assert f.capacity_factor_at(ft.n_dlinks, 1e-6)[0] == 0.0


def test_to_records_round_trip(ft):
    recs = [{"link": [0, 16], "kind": "degrade", "factor": 0.5, "at_us": 3},
            {"link": [16, 24], "kind": "down", "at_us": 1}]
    f = LinkFaults.from_records(ft, recs)
    g = LinkFaults.from_records(ft, f.to_records(ft))
    for name in ("time", "dlink", "kind", "factor"):
        np.testing.assert_array_equal(getattr(f, name), getattr(g, name))


@pytest.mark.parametrize("rec,match", [
    ({"link": [0, 17]}, r"faults\[0\]\.link = \[0, 17\].*no link"),
    ({"link": [0, 999]}, r"faults\[0\]\.link"),
    ({"link": [0]}, r"faults\[0\]\.link"),
    ({"link": [0, True]}, r"faults\[0\]\.link"),
    ({"link": [0, 16], "kind": "flaky"}, r"faults\[0\]\.kind = 'flaky'"),
    ({"link": [0, 16], "at_us": -1}, r"faults\[0\]\.at_us = -1"),
    ({"link": [0, 16], "at_us": float("nan")}, r"faults\[0\]\.at_us"),
    ({"link": [0, 16], "kind": "degrade"}, r"faults\[0\]\.factor = None"),
    ({"link": [0, 16], "kind": "degrade", "factor": 1.5}, r"faults\[0\]\.factor = 1\.5"),
    ({"link": [0, 16], "kind": "down", "factor": 0.5}, r"faults\[0\]\.factor"),
    # a denormal factor underflowed the link rate (flow engine: stranded as "blocked")
    ({"link": [0, 16], "kind": "degrade", "factor": 5e-324}, r"faults\[0\]\.factor = 5e-324.*down"),
    ({"link": [0, 16], "kind": "degrade", "factor": 9.9e-10}, r"faults\[0\]\.factor = 9\.9e-10"),
    ({"link": [0, 16], "direction": "back"}, r"faults\[0\]\.direction = 'back'"),
    ({"link": [0, 16], "at": 3}, r"faults\[0\]\.at = 3: unknown key"),
    ("down", r"faults\[0\] = 'down'"),
])
def test_from_records_errors(ft, rec, match):
    with pytest.raises(FaultError, match=match):
        LinkFaults.from_records(ft, [rec])
    assert issubclass(FaultError, InputError)


def test_random_failures_seeded_and_layered(ft):
    a = random_failures(ft, count=5, layer="core", seed=7)
    b = random_failures(ft, count=5, layer="core", seed=7)
    np.testing.assert_array_equal(a.dlink, b.dlink)
    assert len(a) == 10
    phys = np.unique(a.dlink // 2)
    assert len(phys) == 5  # distinct links, both directions each
    assert (ft.link_layer[phys] == ft.layer_id("core")).all()
    assert sorted(a.dlink.tolist()) == sorted((2 * phys).tolist() + (2 * phys + 1).tolist())
    c = random_failures(ft, count=5, layer="core", seed=8)
    assert not np.array_equal(a.dlink, c.dlink)


def test_random_failures_fraction_and_degrade(ft):
    f = random_failures(ft, fraction=0.25, kind="degrade", factor=0.5, at_us=2.0, seed=1)
    assert len(f) == 2 * round(0.25 * ft.n_links)
    assert (f.kind == DEGRADE).all() and (f.factor == 0.5).all() and (f.time == 2e-6).all()
    f = random_failures(ft, fraction=1e-6, seed=1)  # at least one link when fraction > 0
    assert len(f) == 2


def test_random_failures_on_torus_dimension():
    t = torus((4, 4))
    f = random_failures(t, count=3, layer="dim1", seed=0)
    assert (t.link_layer[f.dlink // 2] == 1).all()


@pytest.mark.parametrize("kwargs,match", [
    (dict(count=5, layer="spine"), r"layer = 'spine'"),
    (dict(count=17, layer="core"), r"count = 17"),
    (dict(count=-1), r"count = -1"),
    (dict(count=2.5), r"count = 2\.5"),
    (dict(fraction=0.0), r"fraction = 0\.0"),
    (dict(fraction=1.0), r"fraction = 1\.0"),
    (dict(), r"exactly one"),
    (dict(fraction=0.1, count=2), r"exactly one"),
    (dict(count=1, kind="up"), r"kind = 'up'"),
    (dict(count=1, kind="degrade", factor=0), r"factor = 0"),
    (dict(count=1, kind="degrade", factor="x"), r"factor = 'x'"),
    (dict(count=1, kind="degrade", factor=1e-300), r"factor = 1e-300"),
    (dict(count=1, at_us=-3), r"at_us = -3"),
])
def test_random_failures_errors(ft, kwargs, match):
    with pytest.raises(FaultError, match=match):
        random_failures(ft, **kwargs)


@given(st.lists(st.dictionaries(
    st.sampled_from(["link", "kind", "at_us", "factor", "direction", "extra"]),
    st.one_of(st.integers(-2, 40), st.floats(allow_nan=True), st.text(max_size=4),
              st.lists(st.integers(-1, 40), max_size=3), st.none(),
              st.sampled_from(["down", "degrade", "up", "both", "forward"])),
    max_size=6), max_size=4))
@settings(max_examples=300, deadline=None)
def test_from_records_fuzz(records):
    t = fat_tree(4)
    try:
        f = LinkFaults.from_records(t, records)
    except InputError:
        return
    assert (f.dlink >= 0).all() and (f.dlink < t.n_dlinks).all()
    assert (np.diff(f.time) >= 0).all()
    assert set(f.kind.tolist()) <= {DOWN, DEGRADE, UP}


def test_none():
    f = LinkFaults.none()
    assert len(f) == 0
    assert (f.capacity_factor_at(4, 1.0) == 1).all()


def test_smallest_degrade_factor_is_accepted(ft):
    f = LinkFaults.from_records(ft, [{"link": [0, 16], "kind": "degrade",
                                      "factor": MIN_DEGRADE_FACTOR}])
    assert (f.factor == MIN_DEGRADE_FACTOR).all()


@pytest.mark.parametrize("engine", ["flow", "packet"])
@pytest.mark.parametrize("kind,factor", [(DEGRADE, 5e-324), (DEGRADE, 1.5), (DOWN, 0.5),
                                          (UP, 0.0)])
def test_engines_refuse_hand_built_factors(ft, engine, kind, factor):
    """LinkFaults built in code skip from_records; both engines re-check the factors (the
    packet engine did not: a denormal degrade ran it out of event numbers)."""
    from netcore.api import simulate
    from netcore.schedule import Schedule

    faults = LinkFaults(np.array([0.0]), np.array([ft.dlink_id(0, 16)]), np.array([kind]),
                        np.array([factor]))
    sched = Schedule.from_transfers([0], [5], [1_000_000])
    with pytest.raises(InputError, match=r"faults\[0\]\.factor"):
        simulate(ft, sched, engine=engine, faults=faults)
