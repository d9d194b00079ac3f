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
    945 cases within 25%; the binomial trees reach +40%). At the start of session 9 this
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
