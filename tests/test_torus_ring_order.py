"""Rings over a whole torus are laid on a cycle of one-hop neighbours (collectives.choose,
torus_ring_order): row-major order has two-hop connections at every row end."""
import numpy as np
import pytest

import collectives as co
from collectives.choose import ordered_ranks, torus_ring_order
from netcosim.commands.collective import _simulated_point
from topo.builders import torus


def hops_around(t, order):
    c = np.asarray(t.coords)[order]
    d = np.abs(c - np.roll(c, -1, axis=0))
    dims = np.asarray(t.params["dims"])
    return np.minimum(d, dims - d).sum(axis=1)


@pytest.mark.parametrize("dims", [(4, 4), (3, 2, 2), (2, 2, 3), (3, 4), (2, 3, 5), (8, 8, 8),
                                  (2, 2), (5, 2, 3, 2)])
def test_every_neighbour_is_one_hop_away(dims):
    t = torus(dims)
    order = torus_ring_order(t)
    assert sorted(order.tolist()) == list(range(t.n_hosts))
    assert (hops_around(t, order) == 1).all()
    assert (hops_around(t, ordered_ranks(t)) > 1).any()  # row-major is not (the test can tell)


@pytest.mark.parametrize("dims", [(3, 3), (5, 3, 7), (6,)])
def test_no_order_where_no_boustrophedon_closes(dims):
    assert torus_ring_order(torus(dims)) is None


def test_the_choice_lays_rings_on_the_cycle_and_the_torus_algorithm_row_major():
    t = torus((4, 4, 4))
    rs = co.choose(t, "reduce_scatter", 1 << 20)
    assert rs.algorithm == "ring" and (hops_around(t, rs.ranks) == 1).all()
    ar = co.choose(t, "all_reduce", 1 << 20)
    assert ar.algorithm == "torus" and ar.ranks.tolist() == ordered_ranks(t).tolist()
    # ranks listed by the user keep their order
    given = list(range(64))
    assert co.choose(t, "reduce_scatter", 1 << 20, given, keep_order=True).ranks.tolist() == \
        given


def test_the_cycle_is_faster_than_row_major_under_ecmp():
    # 8x8x8 torus, ring reduce-scatter of 64 MiB, flow engine: measured 8,284 us on the
    # cycle, 19,044 us in row-major order (two-hop connections collide under ECMP)
    t = torus((8, 8, 8))
    opts = {"protocol": "ll128"}

    def time(order):
        return _simulated_point(t, "reduce_scatter", "ring", [int(x) for x in order], 64 << 20,
                                "flow", "ecmp", dict(opts))["time_s"]

    assert time(torus_ring_order(t)) < 0.6 * time(ordered_ranks(t))
