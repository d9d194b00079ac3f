"""topo.io: JSON round trip (bit-exact), plain custom-contract JSON, GraphML export."""
from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest

from topo.builders import custom, dragonfly, fat_tree, fullflat, leaf_spine, torus, two_tier
from topo.errors import InputError
from topo.io import load_json, save_json, to_graphml

FABRICS = [
    lambda: fat_tree(4, link_gbps=400, latency_us=0.3),
    lambda: leaf_spine(4, 3, 2, oversubscription=3.0),  # uplinks 1/3 of a Gbps figure: inexact in Gbps
    lambda: torus((3, 4, 2)),
    lambda: fullflat(20, 3, 8, gpu_gbps=1000),
    lambda: two_tier(3, 4, scaleup_latency_us=0.1),
    lambda: dragonfly(4, 2, 2, 3, global_gbps=333, global_latency_us=0.7),
    lambda: custom(3, 1, [[0, 3, 100, 1], [1, 3, 7.3, 0.11], [2, 3, 1e-3, 0]], hosts_forward=True),
]


@pytest.mark.parametrize("make", FABRICS)
def test_json_round_trip_is_exact(make, tmp_path):
    t = make()
    path = tmp_path / "t.json"
    save_json(t, path)
    u = load_json(path)
    assert (u.kind, u.n_hosts, u.n_switches) == (t.kind, t.n_hosts, t.n_switches)
    for name in ("link_u", "link_v", "link_bw", "link_lat", "link_layer", "host_group"):
        np.testing.assert_array_equal(getattr(u, name), getattr(t, name))
    assert u.layer_names == t.layer_names
    assert u.hosts_forward == t.hosts_forward
    assert u.params == t.params
    if t.coords is None:
        assert u.coords is None
    else:
        np.testing.assert_array_equal(u.coords, t.coords)
    assert u.summary() == t.summary()


def test_file_is_custom_contract(tmp_path):
    t = fat_tree(4, link_gbps=100, latency_us=2)
    save_json(t, tmp_path / "t.json")
    d = json.loads((tmp_path / "t.json").read_text())
    assert d["hosts"] == 16 and d["switches"] == 20
    assert d["links"][0] == [0, 16, 100.0, 2.0]
    assert len(d["links"]) == 48


def test_load_plain_custom_json(tmp_path):
    p = tmp_path / "c.json"
    p.write_text(json.dumps({"kind": "custom", "hosts": 2, "switches": 1,
                             "links": [[0, 2, 100, 1], [1, 2, 100, 1]]}))
    t = load_json(p)
    assert t.kind == "custom" and t.n_links == 2
    p.write_text(json.dumps({"hosts": 2, "switches": 1, "links": [[0, 2, 100, 1], [1, 5, 100, 1]]}))
    with pytest.raises(InputError, match=r"topology\.links\[1\]"):
        load_json(p)


def test_load_errors(tmp_path):
    with pytest.raises(InputError, match="cannot read"):
        load_json(tmp_path / "missing.json")
    p = tmp_path / "bad.json"
    p.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        load_json(p)
    p.write_text(json.dumps({"format": "netcosim-topology/1", "kind": "x"}))
    with pytest.raises(InputError, match="malformed"):
        load_json(p)


def test_graphml(tmp_path):
    t = torus((3, 3))
    path = tmp_path / "t.graphml"
    to_graphml(t, path)
    g = nx.read_graphml(path, node_type=int)
    assert g.number_of_nodes() == 9 and g.number_of_edges() == t.n_links
    assert g.nodes[4]["coords"] == "1,1"
    e = g.edges[0, 1]
    assert e["bw"] == pytest.approx(float(t.link_bw[0])) and e["layer"] == "dim1"
    t = two_tier(2, 2)
    to_graphml(t, path)
    g = nx.read_graphml(path, node_type=int)
    assert g.nodes[3]["host_group"] == 1 and g.nodes[5]["kind"] == "switch"
