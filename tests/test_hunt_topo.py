"""Bug hunt in the topology, routing and link-fault layer: each test pins a bug found by
checking a builder's figures, a route or a fault timeline against an independent reference
(brute force over every balanced host split, networkx, a pure-Python model of the policy).
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from _topo_reference import brute_bisection
from topo.builders import build
from topo.metrics import bisection

FAST = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ====================================================================== two_tier bisection
@settings(max_examples=60, **FAST)
@given(nodes=st.sampled_from([2, 4]), G=st.integers(1, 4), rails=st.booleans(),
       npl=st.sampled_from([None, 1, 2, 4]), spines=st.sampled_from([None, 1, 2]),
       o=st.sampled_from([0.5, 1.0, 2.0, 4.0, 100.0]),
       su=st.sampled_from([10, 50, 75, 100, 120, 400, 7200]))
@example(nodes=2, G=4, rails=True, npl=None, spines=1, o=4.0, su=50)
@example(nodes=4, G=3, rails=True, npl=None, spines=1, o=100.0, su=100)
def test_two_tier_closed_form_bisection_is_the_least_balanced_cut(nodes, G, rails, npl,
                                                                   spines, o, su):
    """The closed form n/2 * nic (one leaf per rail) is the node halving's cut, which a rail
    split beats when the scale-up links are slow or the leaves' uplinks cheap: 2 nodes of
    4 GPUs, scale-up 50 Gb/s, NICs 100, oversubscription 4 (1 spine) have a 300 Gb/s
    bisection where the builder gave 400 as exact; 4 nodes of 3 GPUs with scale-up = NIC =
    100 and oversubscription 100: 504 against 600. Whatever the figure's method, it may
    never be above the true least cut, and a closed form must equal it."""
    t = build("two_tier", {"nodes": nodes, "gpus_per_node": G, "rails": rails,
                           "nodes_per_leaf": npl, "spines": spines, "oversubscription": o,
                           "scaleup_gbps": su, "nic_gbps": 100})
    if t.n_hosts < 2 or t.n_hosts > 12:
        return
    truth = brute_bisection(t)
    got, method = bisection(t)
    if "bisection_Bps" in t.params:
        assert got == pytest.approx(truth, rel=1e-12), method
    else:  # computed: the id halving's cut, an upper bound
        assert got >= truth * (1 - 1e-12)


def test_two_tier_keeps_its_closed_form_on_usual_clusters():
    """NVLink-class scale-up over 400 Gb/s NICs, up to 4:1 oversubscribed: the node halving is
    the bisection (the check only drops shapes it cannot prove)."""
    for G in (4, 8, 72):
        for o in (1.0, 2.0, 4.0):
            t = build("two_tier", {"nodes": 16, "gpus_per_node": G, "scaleup_gbps": 3600,
                                   "nic_gbps": 400, "oversubscription": o})
            assert t.params["bisection_Bps"] == 16 * G / 2 * 400e9 / 8


# ====================================================================== topology JSON
def _fabric_json():
    from topo.io import to_dict

    return to_dict(build("fat_tree", {"k": 2}))  # 2 hosts, 5 switches, 6 links


@pytest.mark.parametrize("change,match", [
    # a truthy string made the GPUs relay traffic (routes through hosts)
    ({"hosts_forward": "no"}, r"hosts_forward = 'no'"),
    ({"hosts_forward": 0}, r"hosts_forward = 0"),
    # int(true): 1 host, and host 1 became a switch
    ({"hosts": True, "switches": 6}, r"topology\.hosts = True: expected an integer"),
    ({"hosts": "2"}, r"topology\.hosts = '2': expected an integer"),
    ({"hosts": 1.5, "switches": 5.5}, r"topology\.hosts = 1\.5: expected an integer"),
    ({"kind": 5}, r"topology\.kind = 5"),
    # loaded, then an IndexError in summary()/GraphML, or the last layer's name for -1
    ({"link_layer": [7, 0, 1, 1, 2, 2]}, r"links\[0\]: layer 7 does not exist"),
    ({"link_layer": [-1, 0, 1, 1, 2, 2]}, r"links\[0\]: layer -1 does not exist"),
    ({"layer_names": "edge"}, r"topology\.layer_names = 'edge'"),
    ({"host_group": [0]}, r"host_group has shape \(1,\), expected \(2,\)"),
    ({"coords": [[0]]}, r"coords has shape \(1, 1\), expected \(7, dimensions\)"),
    ({"params": [1, 2]}, r"topology\.params = \[1, 2\]"),
    ({"params": {"bisection_Bps": "x"}}, r"topology\.params\.bisection_Bps = 'x'"),
])
def test_topology_json_refuses_what_it_used_to_coerce(change, match):
    """topo.io.from_dict / load_json took these and built a different fabric (hosts that
    relay, a host turned into a switch) or failed later with an IndexError/AttributeError;
    each is now an InputError naming the field."""
    from topo.errors import InputError
    from topo.io import from_dict

    d = dict(_fabric_json(), **change)
    with pytest.raises(InputError, match=match):
        from_dict(d)


def test_topology_json_round_trip_still_exact():
    from topo.io import from_dict, to_dict

    for kind, p in [("two_tier", {"nodes": 2, "gpus_per_node": 2}), ("torus", {"dims": [3, 2]}),
                    ("custom", {"hosts": 2, "links": [[0, 1, 100, 1.0]]})]:
        t = build(kind, p)
        u = from_dict(to_dict(t))
        assert u.hosts_forward is t.hosts_forward and u.layer_names == t.layer_names
        assert (u.link_layer == t.link_layer).all() and (u.host_group == t.host_group).all()


# ====================================================================== size refusals
@pytest.mark.parametrize("kind,params,field", [
    ("two_tier", {"nodes": 4, "spines": 10**12}, "topology.spines = 1000000000000"),
    ("two_tier", {"nodes": 4, "gpus_per_node": 10**9}, "topology.gpus_per_node = 1000000000"),
    ("two_tier", {"nodes": 10**9}, "topology.nodes = 1000000000"),
    ("leaf_spine", {"leaves": 2, "hosts_per_leaf": 10**9, "spines": 2},
     "topology.hosts_per_leaf = 1000000000"),
    ("leaf_spine", {"leaves": 2, "hosts_per_leaf": 2, "spines": 10**9},
     "topology.spines = 1000000000"),
    ("leaf_spine", {"leaves": 2, "hosts_per_leaf": 2, "spines": 2, "tiers": 3, "pods": 10**9},
     "topology.pods = 1000000000"),
    ("leaf_spine", {"leaves": 2, "hosts_per_leaf": 2, "spines": 2, "tiers": 3,
                    "super_spines": 2 * 10**9}, "topology.super_spines = 2000000000"),
    ("dragonfly", {"groups": 2, "routers_per_group": 2, "hosts_per_router": 10**9,
                   "global_links": 1}, "topology.hosts_per_router = 1000000000"),
])
def test_a_fabric_too_big_names_the_key_that_made_it_so(kind, params, field):
    """Every size refusal named the first count (two_tier 'nodes = 4', leaf_spine
    'leaves = 2', dragonfly 'groups = 2') whichever key was huge."""
    from topo.errors import InputError

    with pytest.raises(InputError, match="^" + field.replace(".", r"\.") + ": the fabric would"):
        build(kind, params)


# ====================================================================== fault times
@settings(max_examples=200, **FAST)
@given(st.one_of(st.integers(0, 10**6).map(lambda n: n / 1000),  # whole ns, as users write
                 st.floats(0, 1e9, allow_nan=False)))
@example(0.1)
@example(0.3)
def test_fault_records_round_trip_strikes_at_the_same_instant(at_us):
    """LinkFaults.to_records gave at_us = seconds * 1e6, which from_records does not always
    map back to the same instant: 0.1 us (1e-07 s) came back as 0.09999999999999999 us, a
    fault at 9.999999999999999e-08 s, before everything else at 0.1 us (3 in 10 of times in
    whole ns up to 1 ms)."""
    from topo.faults import LinkFaults

    t = build("fat_tree", {"k": 4})
    f = LinkFaults.from_records(t, [{"link": [0, 16], "kind": "down", "at_us": at_us},
                                    {"link": [16, 24], "kind": "degrade", "factor": 0.5,
                                     "at_us": at_us}])
    g = LinkFaults.from_records(t, f.to_records(t))
    assert g.time.tolist() == f.time.tolist()
    assert g.dlink.tolist() == f.dlink.tolist() and g.factor.tolist() == f.factor.tolist()
    if at_us * 1e-6 * 1e6 * 1e-6 != at_us * 1e-6:
        assert f.to_records(t)[0]["at_us"] * 1e-6 == at_us * 1e-6
