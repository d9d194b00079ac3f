"""ASTRA-sim analytical network.yml -> Topology."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netcosim.interop.astra_network import from_dict, load_network, to_custom_table  # noqa: E402
from topo.errors import InputError  # noqa: E402

# The example of ASTRA-sim's analytical network input (3D, 64 NPUs).
EXAMPLE = """\
# 3D topology with 64 NPUs (2 x 8 x 4)
topology: [ Ring, FullyConnected, Switch ]
npus_count: [ 2, 8, 4 ]
bandwidth: [ 200.0, 100.0, 50.0 ]  # GB/s
latency: [ 50.0, 500.0, 2000.0 ]  # ns
"""
GiB = float(1 << 30)


@pytest.fixture
def example(tmp_path):
    p = tmp_path / "network.yml"
    p.write_text(EXAMPLE)
    return p


def _nbrs(t, u):
    ptr, nbr, _ = t.adjacency
    return set(nbr[ptr[u]:ptr[u + 1]].tolist())


def test_example_counts_units_and_layers(example):
    t = load_network(example)
    assert (t.n_hosts, t.n_switches) == (64, 16)
    # 32 two-NPU rings (1 link each) + 8 FC groups of 8 (28 links) + 16 switches x 4 links
    assert t.n_links == 32 + 8 * 28 + 16 * 4
    for d, (gbs, ns) in enumerate(((200, 50), (100, 500), (50, 2000))):
        sel = t.link_layer == d
        assert np.all(t.link_bw[sel] == gbs * GiB)  # 1 GB = 2^30 B, as ASTRA-sim converts
        assert np.allclose(t.link_lat[sel], ns * 1e-9, rtol=0, atol=1e-21)
    assert t.hosts_forward
    dec = load_network(example, gb="decimal")
    assert np.all(dec.link_bw[dec.link_layer == 0] == 200e9)


def test_npu_addresses_follow_astra_sim(example):
    """NPU 47 has address [1, 7, 2] (the worked example in ASTRA-sim's MultiDimTopology)."""
    t = load_network(example)
    nb = _nbrs(t, 47)
    assert 46 in nb  # the 2-NPU ring of dimension 0: [0, 7, 2]
    fc = {1 + 2 * j + 16 * 2 for j in range(8)} - {47}
    assert fc <= nb  # every NPU that differs only in dimension 1
    sw = [v for v in nb if v >= 64]
    assert len(sw) == 1 and _nbrs(t, sw[0]) == {15, 31, 47, 63}
    assert len(nb) == 1 + 7 + 1
    # the first switch is created for the lowest NPUs, like ASTRA-sim does
    assert _nbrs(t, 64) == {0, 16, 32, 48}


def test_ring_dimension_is_a_torus_and_dor_routes_like_astra_sim():
    from topo.routing import Routing

    t = from_dict({"topology": ["Ring", "Ring"], "npus_count": [4, 3],
                   "bandwidth": [100, 100], "latency": [10, 10]})
    assert t.n_switches == 0 and t.n_links == 3 * 4 + 4 * 3
    p = Routing(t, "dor").paths(np.array([0]), np.array([6]))  # 6 = address [2, 1]
    hops = [(int(t.dlink_src[l]), int(t.dlink_dst[l])) for l in p.link]
    # dimension 0 first; distance 2 both ways round the 4-ring -> clockwise (ASTRA-sim's tie)
    assert hops == [(0, 1), (1, 2), (2, 6)]


def test_hop_counts_match_dimension_order_routes(example):
    from topo.routing import Routing

    t = load_network(example)
    p = Routing(t, "ecmp").paths(np.array([0, 0, 0]), np.array([1, 2, 63]))
    # ring 1 hop; FC 1 hop; ring + FC + switch (2 hops) = 4
    assert p.hops.tolist() == [1, 1, 4]


def test_ring_all_reduce_time_matches_the_closed_form():
    import collectives
    from netcore.api import simulate

    t = from_dict({"topology": ["Ring"], "npus_count": [8], "bandwidth": [100],
                   "latency": [500]})
    S = 64 << 20
    m = simulate(t, collectives.ring_all_reduce(list(range(8)), S), "shortest").makespan
    # 2(n-1) steps, each S/n bytes over one dedicated link plus its latency
    assert m == pytest.approx(14 * (S / 8 / (100 * GiB) + 500e-9), rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["Ring", "FullyConnected", "Switch"]),
                          st.integers(2, 5)), min_size=1, max_size=3))
def test_degrees_and_counts_for_any_description(dims):
    blocks = [b for b, _ in dims]
    npus = [n for _, n in dims]
    t = from_dict({"topology": blocks, "npus_count": npus, "bandwidth": [1.0] * len(dims),
                   "latency": [0.0] * len(dims)})
    N = int(np.prod(npus))
    assert t.n_hosts == N
    assert t.n_switches == sum(N // n for b, n in dims if b == "Switch")
    deg = np.bincount(np.concatenate([t.link_u, t.link_v]), minlength=t.n_nodes)
    per = sum({"Ring": 2 if n > 2 else 1, "FullyConnected": n - 1, "Switch": 1}[b]
              for b, n in dims)
    assert np.all(deg[:N] == per)
    assert np.all(deg[N:] == np.repeat([n for b, n in dims if b == "Switch"],
                                       [N // n for b, n in dims if b == "Switch"]))
    # the custom-table form builds the same fabric
    from topo.builders import build

    d = to_custom_table(t)
    u = build("custom", {k: v for k, v in d.items() if k != "kind"})
    assert u.n_links == t.n_links and np.allclose(u.link_bw, t.link_bw)


@pytest.mark.parametrize("text, match", [
    (EXAMPLE + "links_count: [1, 1, 1]\n", r"network\.yml: key 'links_count' is not supported"),
    ("topology: [Ring]\nnpus_count: [4]\nbandwidth: [1]\n", r"key 'latency' is missing"),
    ("topology: [Ring, Switch]\nnpus_count: [4]\nbandwidth: [1, 1]\nlatency: [1, 1]\n",
     r"'npus_count' has 1 entries but topology has 2"),
    ("topology: [Torus]\nnpus_count: [4]\nbandwidth: [1]\nlatency: [1]\n",
     r"topology\[0\] = 'Torus'"),
    ("topology: [Ring]\nnpus_count: [1]\nbandwidth: [1]\nlatency: [1]\n",
     r"npus_count\[0\] = 1: expected an integer > 1"),
    ("topology: [Ring]\nnpus_count: [4]\nbandwidth: [0]\nlatency: [1]\n", r"bandwidth\[0\] = 0"),
    ("topology: [Ring]\nnpus_count: [4]\nbandwidth: [1]\nlatency: [-1]\n", r"latency\[0\] = -1"),
    ("topology: [Ring\n", r"network\.yml: not valid YAML"),
    ("- 1\n- 2\n", r"network\.yml: expected a mapping"),
    ("topology: [FullyConnected, FullyConnected]\nnpus_count: [100000, 100000]\n"
     "bandwidth: [1, 1]\nlatency: [1, 1]\n", r"links; more than a netcosim fabric may have"),
])
def test_bad_files_name_the_file_and_key(tmp_path, text, match):
    p = tmp_path / "network.yml"
    p.write_text(text)
    with pytest.raises(InputError, match=match):
        load_network(p)


def test_import_command_writes_loadable_files(tmp_path, example, capsys):
    from netcosim.cli import main
    from topo.io import load_json

    j, g, tml = tmp_path / "f.json", tmp_path / "f.graphml", tmp_path / "f.toml"
    assert main(["import-astra", str(example), "--json", str(j), "--graphml", str(g),
                 "--toml", str(tml)]) == 0
    assert load_json(j).n_links == 320
    import tomllib

    from topo.builders import build

    d = tomllib.loads(tml.read_text())["topology"]
    assert build("custom", {k: v for k, v in d.items() if k != "kind"}).n_switches == 16
    bad = tmp_path / "bad.yml"
    bad.write_text(EXAMPLE + "foo: 1\n")
    assert main(["import-astra", str(bad)]) == 2
    assert "bad.yml: key 'foo' is not supported" in capsys.readouterr().err
