"""KV-transfer curves measured from one round where the rounds are alike, every used round
elsewhere: the same times, bit for bit, as simulating every round (the original measurement,
``kv_transfer.measure_every_round``), on fabrics where the shortcut applies and where it must
not."""
import copy

import numpy as np
import pytest

from netcosim.inference import kv_rounds, kv_transfer
from netcosim.runner import simulate_scenario
from netcosim.scenario import Scenario
from topo.builders import build
from topo.errors import InputError
from topo.faults import LinkFaults
from topo.routing import Routing

LO, HI = 2e4, 3e8  # bytes per GPU pair: latency- to bandwidth-bound


def pools(tp_p, dp_p, tp_d, dp_d, pp_d=1):
    """(dp, pp, tp) hosts of the prefill pool, packed first, then the decode pool."""
    n_p = tp_p * dp_p
    return (np.arange(n_p).reshape(dp_p, 1, tp_p),
            n_p + np.arange(tp_d * pp_d * dp_d).reshape(dp_d, pp_d, tp_d))


def faults_of(topo, records):
    return LinkFaults.from_records(topo, records) if records else LinkFaults.none()


def first_switch(topo, host, layer="edge"):
    """The switch that ``host``'s ``layer`` link reaches."""
    lay = topo.layer_id(layer)
    for u, v, lk in zip(topo.link_u, topo.link_v, topo.link_layer):
        if lk == lay and host in (u, v):
            return int(v if u == host else u)
    raise AssertionError(host)


def spine_link(topo):
    lay = topo.layer_id("spine")
    i = int(np.flatnonzero(topo.link_layer == lay)[0])
    return [int(topo.link_u[i]), int(topo.link_v[i])]


RAIL = {"kind": "two_tier", "nodes": 8}                       # one leaf per rail
LEAVES = {"kind": "two_tier", "nodes": 8, "nodes_per_leaf": 2}  # 4 leaves per rail, spines
FLAT = {"kind": "fullflat", "n_gpus": 64, "planes": 4, "switch_radix": 64}  # 1 switch a plane
FLAT2 = {"kind": "fullflat", "n_gpus": 64, "planes": 2, "switch_radix": 16}  # leaf-spine planes
FAT = {"kind": "fat_tree", "k": 6}
TOR = {"kind": "two_tier", "nodes": 8, "rails": False, "nodes_per_leaf": 8}  # one ToR leaf

# (fabric, routing, (tp_p, dp_p, tp_d, dp_d[, pp_d]), faults: fn(topology) -> records,
#  rounds alike?)
CASES = [
    (RAIL, "ecmp", (8, 3, 8, 5), None, True),
    (RAIL, "dmodk", (8, 5, 8, 3), None, True),    # several prefill replicas per decode one
    (RAIL, "spray", (8, 2, 8, 4), None, True),
    (RAIL, "ecmp", (8, 3, 8, 2, 2), None, True),  # 16-GPU decode replicas: 2 shares a GPU
    (RAIL, "ecmp", (8, 2, 4, 6), None, False),    # TP 8 -> TP 4 crosses rails: spines
    (LEAVES, "ecmp", (8, 3, 8, 5), None, False),
    (LEAVES, "dmodk", (8, 3, 8, 5), None, False),
    (TOR, "ecmp", (8, 3, 8, 5), None, True),
    (TOR, "ecmp", (4, 3, 4, 5), None, False),     # node 2 holds prefill and decode GPUs
    (FLAT, "dmodk", (8, 3, 8, 5), None, True),    # striped over the planes
    (FLAT, "ecmp", (4, 5, 8, 3), None, True),
    (FLAT, "spray", (8, 3, 8, 5), None, True),
    (FLAT2, "dmodk", (8, 3, 8, 5), None, False),
    (FLAT2, "ecmp", (8, 3, 8, 5), None, False),
    (FAT, "ecmp", (4, 3, 4, 5), None, False),
    (FAT, "dmodk", (4, 3, 4, 5), None, False),
    # faults: a prefill GPU's NIC at 25% (the same in every round)
    (RAIL, "ecmp", (8, 3, 8, 5),
     lambda t: [{"link": [1, first_switch(t, 1)], "kind": "degrade", "factor": 0.25}], True),
    (RAIL, "dmodk", (8, 5, 8, 3),
     lambda t: [{"link": [9, first_switch(t, 9)], "kind": "degrade", "factor": 0.5}], True),
    # a decode GPU's NIC at 25%: the rounds differ
    (RAIL, "ecmp", (8, 3, 8, 5),
     lambda t: [{"link": [30, first_switch(t, 30)], "kind": "degrade", "factor": 0.25}], False),
    (RAIL, "dmodk", (8, 3, 8, 5),
     lambda t: [{"link": [first_switch(t, 30), 30], "kind": "degrade", "factor": 0.25,
                 "direction": "forward"}], False),
    # ... but toward the decode GPU's rail only (a direction the transfers do not use): alike
    (RAIL, "dmodk", (8, 3, 8, 5),
     lambda t: [{"link": [30, first_switch(t, 30)], "kind": "degrade", "factor": 0.25,
                 "direction": "forward"}], True),
    # a leaf-spine link down: on no KV path
    (RAIL, "ecmp", (8, 3, 8, 5), lambda t: [{"link": spine_link(t), "kind": "down"}], True),
    (LEAVES, "ecmp", (8, 3, 8, 5), lambda t: [{"link": spine_link(t), "kind": "down"}], False),
    # a plane link of a prefill GPU down: that plane drops out of its transfers
    (FLAT, "dmodk", (8, 3, 8, 5),
     lambda t: [{"link": [2, first_switch(t, 2)], "kind": "down"}], False),
    (FLAT, "spray", (8, 3, 8, 5),
     lambda t: [{"link": [2, first_switch(t, 2)], "kind": "degrade", "factor": 0.3}], True),
    (FLAT, "dmodk", (8, 3, 8, 5),
     lambda t: [{"link": [40, first_switch(t, 40)], "kind": "degrade", "factor": 0.3}], False),
    (FAT, "dmodk", (4, 3, 4, 5), lambda t: [{"link": [0, first_switch(t, 0)],
                                             "kind": "degrade", "factor": 0.25}], False),
]


def _id(case):
    fabric, policy, layout, faults, alike = case
    f = fabric["kind"] + ("-tor" if fabric.get("rails") is False else "-leaves"
                          if "nodes_per_leaf" in fabric else "") + \
        ("-2tier" if fabric.get("switch_radix") == 16 else "")
    return f"{f}-{policy}-{'x'.join(map(str, layout))}{'-fault' if faults else ''}"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_measured_curves_match_every_round_bit_for_bit(case):
    fabric, policy, layout, faults, alike = case
    fabric = dict(fabric)
    topo = build(fabric.pop("kind"), fabric)
    flt = faults_of(topo, faults(topo) if faults else None)
    p_hosts, d_hosts = pools(*layout)
    ls, lt, rep = kv_transfer.measure_every_round(topo, policy, flt, "flow", 3, p_hosts,
                                                   d_hosts, LO, HI)
    kv = kv_transfer.measure(topo, policy, flt, "flow", 3, p_hosts, d_hosts, LO, HI)
    assert kv.report["rounds_alike"] is alike
    assert kv.report["rounds_simulated"] == (1 if alike else d_hosts.shape[0])
    assert np.array_equal(kv.log_s, ls)
    assert np.array_equal(kv.pair_log_t(), lt)  # every (prefill, decode) pair, every size
    for k in rep:
        assert kv.report[k] == rep[k]


def _rows_per_round(lt):
    dp_p, dp_d = lt.shape[:2]
    return [lt[np.arange(dp_p), (np.arange(dp_p) + s) % dp_d] for s in range(dp_d)]


def slower_decode_nic(fabric, host=30):
    """``fabric`` built, with ``host``'s NIC link at half speed (a heterogeneous fabric)."""
    fabric = dict(fabric)
    topo = build(fabric.pop("kind"), fabric)
    topo.link_bw = topo.link_bw.copy()
    topo.link_bw[(topo.link_u == host) & (topo.link_layer == topo.layer_id("edge"))] /= 2
    topo.__dict__.pop("dlink_bw", None)  # a cached property
    return topo


@pytest.mark.parametrize("topo,faults,reason", [
    (lambda: build("two_tier", {"nodes": 8, "nodes_per_leaf": 2}), None, "share no switch"),
    (lambda: build("fat_tree", {"k": 6}), None, "share no switch"),
    (lambda: build("two_tier", {"nodes": 8}),
     lambda t: [{"link": [30, first_switch(t, 30)], "kind": "degrade", "factor": 0.25}],
     "into a decode GPU"),
    (lambda: slower_decode_nic(RAIL), None, "differ in bandwidth"),
], ids=["leaves", "fat-tree", "decode-fault", "slower-decode-nic"])
def test_a_wrongly_copied_round_would_be_caught(topo, faults, reason, monkeypatch):
    """Where kv_rounds refuses, the rounds do differ: pretending they are alike gives other
    times, so the comparison above fails if it accepted such a fabric."""
    topo = topo()
    flt = faults_of(topo, faults(topo) if faults else None)
    p_hosts, d_hosts = pools(4, 3, 4, 5) if topo.kind == "fat_tree" else pools(8, 3, 8, 5)
    _, lt, _ = kv_transfer.measure_every_round(topo, "dmodk", flt, "flow", 3, p_hosts,
                                                d_hosts, LO, HI)
    rows = _rows_per_round(lt)
    assert any(not np.array_equal(r, rows[0]) for r in rows[1:])
    assert reason in kv_transfer.measure(topo, "dmodk", flt, "flow", 3, p_hosts, d_hosts, LO,
                                         HI).report["rounds_differ"]
    monkeypatch.setattr(kv_transfer, "rounds_alike", lambda *a: None)
    kv = kv_transfer.measure(topo, "dmodk", flt, "flow", 3, p_hosts, d_hosts, LO, HI)
    assert not np.array_equal(kv.pair_log_t(), lt)


def test_rounds_alike_says_why_not():
    topo = build("two_tier", {"nodes": 8})
    p_hosts, d_hosts = pools(8, 3, 8, 5)
    ok = kv_rounds.rounds_alike(topo, Routing(topo, "ecmp"), None, "flow", p_hosts, d_hosts)
    assert ok is None
    assert "engine" in kv_rounds.rounds_alike(topo, Routing(topo, "ecmp"), None, "packet",
                                              p_hosts, d_hosts)
    assert "valiant" in kv_rounds.rounds_alike(topo, Routing(topo, "valiant"), None, "flow",
                                               p_hosts, d_hosts)
    flat = build("fullflat", {"n_gpus": 64, "planes": 4, "switch_radix": 64})
    unstriped = Routing(flat, "ecmp").unstriped()
    assert "chooses among 4" in kv_rounds.rounds_alike(flat, unstriped, None, "flow",
                                                        p_hosts, d_hosts)


def test_a_cut_pair_is_refused_as_before():
    topo = build("two_tier", {"nodes": 8})
    flt = faults_of(topo, [{"link": [3, first_switch(topo, 3)], "kind": "down"}])
    p_hosts, d_hosts = pools(8, 3, 8, 5)
    msgs = []
    for fn in (kv_transfer.measure_every_round, kv_transfer.measure):
        with pytest.raises(InputError) as e:
            fn(topo, "ecmp", flt, "flow", 3, p_hosts, d_hosts, LO, HI)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]
    assert "prefill replica 0 to decode replica 0 cannot complete" in msgs[0]


# ===================================================================== rounds no request uses
def test_rounds_used_by_round_robin_requests():
    req = np.arange(1000)
    assert kv_transfer.rounds_used(req % 4, req % 4, 4).tolist() == [0]
    assert kv_transfer.rounds_used(req % 8, req % 4, 4).tolist() == [0]
    assert kv_transfer.rounds_used(req % 2, req % 6, 6).tolist() == [0, 2, 4]
    assert kv_transfer.rounds_used(req % 3, req % 5, 5).tolist() == [0, 1, 2, 3, 4]
    few = np.arange(2)
    assert kv_transfer.rounds_used(few % 3, few % 5, 5).tolist() == [0]


def test_only_the_rounds_asked_for_are_simulated_and_they_match():
    topo = build("two_tier", {"nodes": 8, "nodes_per_leaf": 2})
    p_hosts, d_hosts = pools(8, 2, 8, 6)
    _, lt, _ = kv_transfer.measure_every_round(topo, "ecmp", None, "flow", 3, p_hosts,
                                                d_hosts, LO, HI)
    kv = kv_transfer.measure(topo, "ecmp", None, "flow", 3, p_hosts, d_hosts, LO, HI,
                             rounds=[2, 4])
    assert kv.report["rounds_simulated"] == 3  # round 0 too: the report's curve
    got = kv.pair_log_t()
    for p in range(2):
        for d in range(6):
            if (d - p) % 6 in (0, 2, 4):
                assert np.array_equal(got[p, d], lt[p, d])
            else:
                assert np.isnan(got[p, d]).all()
    with pytest.raises(ValueError, match="not measured"):
        kv_transfer.transfer_times(np.array([0]), np.array([1]), np.array([1e6]), kv.log_s,
                                   kv.log_t, kv.row0)


# ===================================================================== whole runs
def scenario(topology, prefill, decode, faults=None, policy="ecmp"):
    d = {"name": "kvc", "seed": 5, "topology": topology, "routing": {"policy": policy},
         "workload": {"kind": "inference", "model": "llama3-8b", "gpu": "h100_sxm",
                      "disaggregated": {"prefill": prefill, "decode": decode},
                      "requests": {"arrival": "poisson", "rate": 20, "count": 60,
                                   "input_tokens": {"dist": "uniform", "min": 500,
                                                    "max": 3000},
                                   "output_tokens": 20}}}
    if faults:
        d["faults"] = faults
    return d


def every_round(topology, routing, faults, engine, seed, p_hosts, d_hosts, lo, hi,
                rounds=None):
    """``measure`` answered from the original measurement, every round simulated."""
    ls, lt, rep = kv_transfer.measure_every_round(topology, routing, faults, engine, seed,
                                                   p_hosts, d_hosts, lo, hi)
    dp_p, dp_d = lt.shape[:2]
    log_t = np.concatenate(_rows_per_round(lt))
    return kv_transfer.KVCurves(ls, log_t, np.arange(dp_d) * dp_p, dp_p, rep)


def figures(d):
    prepared, _, _ = simulate_scenario(Scenario.from_dict(copy.deepcopy(d), default_name="k"))
    figs = dict(prepared.schedule.meta["inference"])
    kv = figs["comm_curves"]["kv_transfer"]
    figs["comm_curves"] = dict(figs["comm_curves"],
                               kv_transfer={k: kv[k] for k in ("bytes_per_gpu_pair",
                                                               "seconds_prefill0_to_decode0",
                                                               "gpu_pairs")})
    return figs, kv


@pytest.mark.parametrize("d,alike", [
    (scenario({"kind": "two_tier", "nodes": 5}, {"tp": 8, "dp": 2}, {"tp": 8, "dp": 3}), True),
    # hosts 0-39, node switches 40-44, rail leaves 45-52: host 3 (prefill) NIC [3, 48], host
    # 20 (decode) NIC [20, 49]
    (scenario({"kind": "two_tier", "nodes": 5}, {"tp": 8, "dp": 3}, {"tp": 8, "dp": 2},
              faults=[{"link": [3, 48], "kind": "degrade", "factor": 0.25}]), True),
    (scenario({"kind": "two_tier", "nodes": 5}, {"tp": 8, "dp": 2}, {"tp": 8, "dp": 3},
              faults=[{"link": [20, 49], "kind": "degrade", "factor": 0.25}]), False),
    (scenario({"kind": "two_tier", "nodes": 6, "nodes_per_leaf": 2}, {"tp": 8, "dp": 2},
              {"tp": 8, "dp": 4}, policy="dmodk"), False),
])
def test_a_run_serves_the_same_as_with_every_round_measured(d, alike, monkeypatch):
    new, kv = figures(d)
    assert kv["rounds_alike"] is alike
    monkeypatch.setattr(kv_transfer, "measure", every_round)
    old, _ = figures(d)
    assert new == old
