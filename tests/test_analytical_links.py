"""The analytical estimate against the flow engine where a round's messages share links:
a host with several links (two_tier GPUs: NVLink and NIC; torus nodes: their ports) and ECMP
collisions of connections, routed as the engines route a collective (one path per
connection). Before the busiest-link term these were 35-59% low (docs/collectives.md)."""
import numpy as np
import pytest

import collectives as co
from collectives.analytical import estimate
from collectives.choose import ordered_ranks
from collectives.report import run as run_one
from netcore.api import simulate
from topo.builders import build

TWO_TIER = ("two_tier", {"nodes": 2, "scaleup_gbps": 2960, "nic_gbps": 376})
TORUS = ("torus", {"dims": [4, 4], "link_gbps": 400})
FAT_TREE = ("fat_tree", {"k": 4, "link_gbps": 100})


def _flow(t, algo, ranks, size, proto):
    return run_one(t, "all_reduce", algo, ranks, size, engine="flow", protocol=proto)["time_s"]


@pytest.mark.parametrize("fabric, algo, tol", [
    (TWO_TIER, "ring", 0.03), (TWO_TIER, "bidirectional_ring", 0.04),
    (TWO_TIER, "double_binary_tree", 0.03), (TORUS, "ring", 0.02),
    (TORUS, "bidirectional_ring", 0.02), (TORUS, "recursive_halving_doubling", 0.01),
    (FAT_TREE, "recursive_halving_doubling", 0.04)])
def test_estimate_sees_links_a_round_shares(fabric, algo, tol):
    t = build(*fabric)
    r = ordered_ranks(t, None)
    if algo == "double_binary_tree" and fabric is TWO_TIER:
        # the nodes' ranks interleaved: one double binary tree over the list (whole nodes in
        # order take NCCL's rail trees, test_rail_trees_estimate below)
        r = r.reshape(2, -1).T.reshape(-1)
    size = 64 << 20
    e = estimate(t, "all_reduce", algo, r, size, protocol="simple")
    f = _flow(t, algo, r, size, "simple")
    assert e == pytest.approx(f, rel=tol)


@pytest.mark.parametrize("nodes", [2, 4, 8])
def test_rail_trees_estimate(nodes):
    """NCCL's Tree on whole two_tier nodes (a chain per node, a double binary tree pair per
    rail across them): the estimate against the flow engine. Measured over 1 MiB-512 MiB,
    LL128 and Simple: within 6% on 4 and 8 nodes; on 2 nodes +15% at 64 MiB, where a GPU's
    NVLink carries every tree's chain and the estimate's fill (one chunk level by level)
    does not overlap with the later chunks as the engine's does (docs/collectives.md)."""
    t = build("two_tier", {"nodes": nodes, "scaleup_gbps": 2960, "nic_gbps": 349})
    r = ordered_ranks(t, None)
    errs = []
    for size in (1 << 20, 64 << 20, 512 << 20):
        e = estimate(t, "all_reduce", "double_binary_tree", r, size, protocol="simple")
        f = _flow(t, "double_binary_tree", r, size, "simple")
        errs.append(e / f - 1)
    assert max(abs(x) for x in errs) < (0.17 if nodes == 2 else 0.06), errs


def test_estimate_routes_each_connection_as_the_engine_does():
    """Two cross-node ring edges on one rail leaf: with two spines, ECMP puts both
    connections on one spine uplink or on two; the estimate hashes them as the engine does, so
    it finds the same (here: shared) uplink and the ring at half the NIC rate. (Host 8 is
    left out: on whole nodes a ring is one ring per rail, collectives/rail.py, and no two
    connections share a leaf's uplink.)"""
    t = build(*TWO_TIER)
    r = ordered_ranks(t, None)
    r = r[r != 8]
    size = 64 << 20
    e = estimate(t, "all_reduce", "ring", r, size, protocol="simple")
    nic = 376e9 / 8
    alone = 2 * (len(r) - 1) / len(r) * size / nic  # the ring at the NIC's rate
    f = _flow(t, "ring", r, size, "simple")
    assert f > 1.8 * alone and e > 1.8 * alone


def test_collective_command_keys_connections_as_run_does():
    """`netcosim collective --engine flow` and `netcosim run` of the same collective take the
    same paths (one ECMP hash per connection) and so the same time."""
    from netcore.api import simulate

    t = build(*TORUS)
    r = ordered_ranks(t, None)
    s = co.build("all_reduce", "ring", r, 16 << 20, fabric=t, protocol="simple")
    per_transfer = simulate(t, s, routing="ecmp", engine="flow").makespan
    keyed = simulate(t, s.with_connections(), routing="ecmp", engine="flow").makespan
    assert keyed != per_transfer  # the keying matters on this fabric ...
    assert _flow(t, "ring", r, 16 << 20, "simple") == keyed  # ... and the command keys


def test_one_switch_estimate_stays_exact():
    """A non-blocking single switch: the busiest-link term is the host-link term."""
    t = build("leaf_spine", {"leaves": 1, "hosts_per_leaf": 8, "spines": 1, "link_gbps": 100})
    r = np.arange(8)
    for algo in ("ring", "recursive_halving_doubling", "direct"):
        e = estimate(t, "all_reduce", algo, r, 8 << 20, protocol="simple")
        assert e == pytest.approx(_flow(t, algo, r, 8 << 20, "simple"), rel=1e-3)


def test_unequal_messages_price_their_busiest_link():
    """An all-to-all-v whose cross-node messages (4 MiB) dwarf the NVLink ones (64 KiB) is
    bound by each GPU's NIC; its round (unequal bytes) routes its messages again for their
    link loads, and follows the flow engine (84% low when a GPU's NVLink and NIC counted as
    one injection figure)."""
    t = build(*TWO_TIER)
    n = t.n_hosts
    node = np.arange(n) // 8
    m = np.where(node[:, None] != node[None, :], 4 << 20, 64 << 10) + \
        (np.arange(n * n).reshape(n, n) % 3) * 4096
    e = estimate(t, "all_to_all_v", "direct", np.arange(n), m, protocol="simple")
    f = run_one(t, "all_to_all_v", "direct", np.arange(n), m, engine="flow",
                protocol="simple")["time_s"]
    assert e == pytest.approx(f, rel=0.02)


FULLFLAT = ("fullflat", {"n_gpus": 16, "planes": 4, "switch_radix": 32, "gpu_gbps": 800})
SMALL_TWO_TIER = ("two_tier", {"nodes": 2, "gpus_per_node": 4, "scaleup_gbps": 1600,
                               "nic_gbps": 200})


@pytest.mark.parametrize("fabric, routing, op, algo, size", [
    (SMALL_TWO_TIER, "ecmp", "broadcast", "ring", 1 << 20),  # was +247%: every hop the slowest
    (SMALL_TWO_TIER, "ecmp", "reduce", "ring", 1 << 24),  # the reduce chain's own hops
    (FULLFLAT, "spray", "all_reduce", "recursive_halving_doubling", 1 << 24),  # was +209%
    (FULLFLAT, "spray", "all_gather", "ring", 1 << 24)])
def test_estimate_cases_a_fuzz_found(fabric, routing, op, algo, size):
    """Found by comparing the estimate with the flow engine over fabrics x routings x
    algorithms: a chain's fill priced every hop at the slowest hop's time and the reduce chain
    took the broadcast's hops; a sprayed flow's bottleneck ignored that each plane carries
    only its share of it."""
    t = build(*fabric)
    r = ordered_ranks(t, None)
    if fabric is SMALL_TWO_TIER:
        r = r[r != 5]  # one chain: whole nodes take one chain per rail (collectives/rail.py)
    e = estimate(t, op, algo, r, size, routing=routing, protocol="simple")
    f = run_one(t, op, algo, r, size, engine="flow", routing=routing, protocol="simple")
    assert e == pytest.approx(f["time_s"], rel=0.02)


@pytest.mark.parametrize("fabric, routing", [
    (("fat_tree", {"k": 4, "link_gbps": 100}), "ecmp"),
    (("torus", {"dims": [3, 3, 2], "link_gbps": 100}), "ecmp"),
    (SMALL_TWO_TIER, "ecmp"), (FULLFLAT, "spray")])
def test_every_algorithm_near_the_engine(fabric, routing):
    """Every op and algorithm without a fabric layout of its own, 1 MiB: the estimate within
    45% of the flow engine (the grid of validation.experiments.analytical_links has 99% of
    945 cases within 25%; the binomial reduce reaches +36%). At the start of session 9 this
    grid's worst case was +253%."""
    import collectives as co
    from topo.errors import InputError

    t = build(*fabric)
    r = ordered_ranks(t, None)
    worst = []
    for op, algos in co.ALGORITHMS.items():
        if op in ("all_to_all_v", "send_recv"):
            continue
        for algo in algos:
            if algo in ("nvls", "sharp", "nvls_tree", "torus", "hierarchical"):
                continue
            try:
                e = estimate(t, op, algo, r, 1 << 20, routing=routing, protocol="simple")
            except InputError:
                continue
            f = run_one(t, op, algo, r, 1 << 20, engine="flow", routing=routing,
                        protocol="simple")["time_s"]
            worst.append((abs(e / f - 1), op, algo))
    assert len(worst) >= 15
    assert max(worst)[0] <= 0.45, max(worst)


def _star(n, lat_us):
    from topo.topology import Topology, gbps, us

    return Topology("custom", n, 1, np.arange(n), np.full(n, n), np.full(n, gbps(100)),
                    np.full(n, us(lat_us)), np.zeros(n))


@pytest.mark.parametrize("n", [3, 5, 6, 9, 12])
@pytest.mark.parametrize("size, lat_us", [(12_345, 2.0), (1 << 20, 0.5)])
def test_binomial_reduce_leaves_send_at_once(n, size, lat_us):
    """A rank of the binomial reduce sends once its children's sums arrived, so on n not a
    power of two leaves of different depths send in the same stage (into one receiver: it
    shares its link). The estimate mirrored the broadcast's rounds and put them a round
    apart: +67% on 3 ranks at 12,345 bytes, +50% on 5. Now equal on 3 and within 10% (its
    stages are still barriers: a later stage waits for the slowest message of the one
    before, where the engine lets the other branches go on)."""
    t = _star(n, lat_us)
    e = estimate(t, "reduce", "tree", n, size, chunks=1)
    f = simulate(t, co.build("reduce", "tree", n, size, chunks=1), routing="shortest",
                 engine="flow").makespan
    assert e == pytest.approx(f, rel=1e-4 if n == 3 else 0.10)


@pytest.mark.parametrize("n, g", [(4, 2), (8, 4), (9, 3)])
@pytest.mark.parametrize("size", [12_345, 1 << 26])
def test_hierarchical_all_to_all_gathers_beside_the_on_node_pieces(n, g, size):
    """The node-leader all-to-all sends on-node pieces and the gather to the leader at once
    (neither waits for the other): +28% at 12,345 bytes with 2 us links when the estimate ran
    them one after the other. As one round, a sender's big gather message beside its small
    on-node ones finishes when the link has carried both (processor sharing), not at its
    1/k share throughout (+11% to +23% at 64 MiB). Now equal on a star."""
    t = _star(n, 2.0)
    e = estimate(t, "all_to_all", "hierarchical", n, size, group_size=g)
    f = simulate(t, co.build("all_to_all", "hierarchical", n, size, group_size=g),
                 routing="shortest", engine="flow").makespan
    assert e == pytest.approx(f, rel=1e-3)


@pytest.mark.parametrize("fabric, proto, tol", [
    (("torus", {"dims": [4, 4], "link_gbps": 100}), "simple", 0.10),
    (("torus", {"dims": [3, 3, 2], "link_gbps": 100}), "ll", 0.15),
    (("two_tier", {"nodes": 4, "gpus_per_node": 8, "scaleup_gbps": 2960, "nic_gbps": 376}),
     "ll", 0.15)])
def test_binomial_broadcast_root_sends_its_children_in_turn(fabric, proto, tol):
    """A rank of the binomial broadcast sends each chunk to its children one after another,
    so hosts with several links (torus ports, a GPU's NVLink and NIC) do not carry two of them
    at once: the estimate's beat let them share and came out -26% (4x4 torus, Simple), -64%
    (3x3x2 torus, LL) and -63% (4 x 8 two_tier, LL) at 16 MiB. The root's chunk now costs
    the sum of its sends alone."""
    t = build(*fabric)
    r = ordered_ranks(t, None)
    e = estimate(t, "broadcast", "tree", r, 1 << 24, protocol=proto)
    f = run_one(t, "broadcast", "tree", r, 1 << 24, engine="flow", protocol=proto)["time_s"]
    assert e == pytest.approx(f, rel=tol)
