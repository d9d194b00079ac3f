"""Exporting fabrics (GraphML, JSON) and workloads (Chakra) for other tools."""
from __future__ import annotations

from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from netcosim.interop.export import write_graphml, write_json
from topo.errors import InputError

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _fabric():
    from topo.builders import leaf_spine

    return leaf_spine(2, 4, 2, link_gbps=100, latency_us=1.0)


def test_graphml_is_networkx_readable_with_bandwidth_and_kinds(tmp_path):
    t = _fabric()
    p = write_graphml(t, tmp_path / "f.graphml")
    g = nx.read_graphml(p, node_type=int)
    assert g.number_of_nodes() == t.n_nodes and g.number_of_edges() == t.n_links
    kinds = nx.get_node_attributes(g, "kind")
    assert [kinds[i] for i in range(t.n_nodes)] == ["host"] * t.n_hosts + ["switch"] * t.n_switches
    for u, v, d in g.edges(data=True):
        i = int(d["index"])
        assert {u, v} == {int(t.link_u[i]), int(t.link_v[i])}
        assert d["bw"] == t.link_bw[i] and d["latency"] == t.link_lat[i]


def test_json_round_trip_is_exact(tmp_path):
    from topo.io import load_json

    t = _fabric()
    u = load_json(write_json(t, tmp_path / "f.json"))
    for a in ("link_u", "link_v", "link_bw", "link_lat", "link_layer", "host_group"):
        assert np.array_equal(getattr(u, a), getattr(t, a)), a
    assert (u.n_hosts, u.n_switches, u.hosts_forward) == (t.n_hosts, t.n_switches,
                                                           t.hosts_forward)


def test_bad_targets_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="is a directory"):
        write_json(_fabric(), tmp_path)
    with pytest.raises(InputError, match="does not exist"):
        write_graphml(_fabric(), tmp_path / "no" / "f.graphml")


def test_export_command_writes_fabric_and_chakra_trace(tmp_path):
    from netcosim.cli import main
    from netcosim.interop.chakra_to_schedule import load_schedule
    from netcosim.scenario import load_scenario

    scen = EXAMPLES / "ring_allreduce_fat_tree.toml"
    sc = load_scenario(scen, ["workload.bytes=1MiB"])
    topo = sc.build_topology()
    orig = sc.with_full_detail().build_schedule(topo)  # a trace has every transfer
    out = tmp_path / "trace"
    rc = main(["export", str(scen), "--set", "workload.bytes=1MiB", "--graphml",
               str(tmp_path / "f.graphml"), "--json", str(tmp_path / "f.json"),
               "--chakra", str(out), "--gzip"])
    assert rc == 0
    files = sorted(out.iterdir())
    assert len(files) == topo.n_hosts and all(f.name.endswith(".et.gz") for f in files)
    assert nx.read_graphml(tmp_path / "f.graphml").number_of_edges() == topo.n_links
    back = load_schedule(out, topo)
    assert back.n_transfers == orig.n_transfers and back.total_bytes == orig.total_bytes
    assert main(["export", str(scen)]) == 2  # nothing to write


def test_unwritable_target_is_an_input_error_naming_the_option(tmp_path):
    t = _fabric()
    with pytest.raises(InputError, match=r"--graphml '/proc/x.graphml': cannot write"):
        write_graphml(t, "/proc/x.graphml")
    with pytest.raises(InputError, match=r"--json '/proc/x.json': cannot write"):
        write_json(t, "/proc/x.json")
