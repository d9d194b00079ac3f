"""Scenario loading (netcosim.scenario, netcosim.workloads): strict shape checks, --set
overrides, delegation to the owners' validators, reachability, and a hypothesis fuzz of the
loader (anything but InputError is a bug)."""
import copy
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from netcosim import workloads
from netcosim.scenario import (Scenario, apply_override, load_scenario, parse_override,
                               read_file)
from topo.errors import InputError

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# A small valid scenario: 4 hosts on one switch plus a second switch; flows with a dependency.
BASE = {
    "name": "base",
    "seed": 3,
    "topology": {"kind": "custom", "hosts": 4, "switches": 2,
                 "links": [[0, 4, 100, 1.0], [1, 4, 100, 1.0], [2, 5, 100, 1.0],
                           [3, 5, 100, 1.0], [4, 5, 200, 0.5]]},
    "routing": {"policy": "shortest"},
    "engine": {"kind": "flow"},
    "faults": [{"link": [4, 5], "kind": "degrade", "factor": 0.5, "at_us": 10.0}],
    "workload": {"kind": "flows", "flows": [
        {"src": 0, "dst": 2, "bytes": "1MiB"},
        {"src": 2, "dst": 1, "bytes": 4096, "start_us": 5, "deps": [0]},
    ]},
}


def write(tmp_path, data, name="s.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(data))
    return p


def prepare(data):
    return Scenario.from_dict(copy.deepcopy(data)).prepare(check_engine=False)


# --------------------------------------------------------------------------- happy paths
def test_base_builds_every_part(tmp_path):
    prep = load_scenario(write(tmp_path, BASE)).prepare(check_engine=False)
    assert prep.topology.n_hosts == 4 and prep.topology.n_links == 5
    assert prep.routing.policy == "shortest"
    assert len(prep.faults) == 2  # one record, both directions
    s = prep.schedule
    assert list(s.src) == [0, 2] and list(s.dst) == [2, 1] and list(s.size) == [2**20, 4096]
    assert s.start[1] == pytest.approx(5e-6)
    assert list(s.deps_of(1)) == [0]


def test_toml_and_json_give_the_same_scenario(tmp_path):
    toml = """
name = "base"
seed = 3
[topology]
kind = "custom"
hosts = 4
switches = 2
links = [[0, 4, 100, 1.0], [1, 4, 100, 1.0], [2, 5, 100, 1.0], [3, 5, 100, 1.0], [4, 5, 200, 0.5]]
[routing]
policy = "shortest"
[engine]
kind = "flow"
[[faults]]
link = [4, 5]
kind = "degrade"
factor = 0.5
at_us = 10.0
[workload]
kind = "flows"
[[workload.flows]]
src = 0
dst = 2
bytes = "1MiB"
[[workload.flows]]
src = 2
dst = 1
bytes = 4096
start_us = 5
deps = [0]
"""
    p = tmp_path / "s.toml"
    p.write_text(toml)
    assert read_file(p) == read_file(write(tmp_path, BASE))


def test_defaults(tmp_path):
    data = {"topology": {"kind": "custom", "hosts": 2, "links": [[0, 1, 10, 0]]}}
    s = load_scenario(write(tmp_path, data, "my_run.json"))
    assert s.name == "my_run" and s.seed == 0 and s.policy == "ecmp"
    assert s.engine_kind == "flow" and s.faults == [] and s.workload is None


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.toml")), ids=lambda p: p.name)
def test_examples_load_and_build_their_fabric(path):
    s = load_scenario(path)
    t = s.build_topology()
    s.build_faults(t)
    assert t.n_hosts >= 2


# --------------------------------------------------------------------------- --set
def test_parse_override_values():
    assert parse_override("topology.k=8") == (["topology", "k"], 8)
    assert parse_override("workload.bytes=256MiB") == (["workload", "bytes"], "256MiB")
    assert parse_override("engine.kind=packet") == (["engine", "kind"], "packet")
    assert parse_override('name="a b"') == (["name"], "a b")
    assert parse_override("faults.0.at_us=1.5") == (["faults", 0, "at_us"], 1.5)
    assert parse_override("topology.dims=[2, 2]") == (["topology", "dims"], [2, 2])
    assert parse_override("engine.link_series=true") == (["engine", "link_series"], True)


@pytest.mark.parametrize("bad,msg", [
    ("topology.k", "expected key=value"), ("topology.k=", "no value"), ("=3", "dotted key"),
    ("topology..k=3", "dotted key"), ("0.k=3", "start with an index"),
    ("topology.k=[1,", "not a TOML value"), ("name=a b", "not a TOML value"),
    ('x=1\ny = 2', "not a TOML value"),
])
def test_parse_override_refusals(bad, msg):
    with pytest.raises(InputError, match=msg):
        parse_override(bad)


def test_apply_override_paths():
    d = copy.deepcopy(BASE)
    apply_override(d, ["workload", "flows", 1, "bytes"], "2KiB")
    apply_override(d, ["routing", "policy"], "ecmp")
    apply_override(d, ["engine", "mtu"], 9000)  # new key: allowed here, judged later
    assert d["workload"]["flows"][1]["bytes"] == "2KiB" and d["engine"]["mtu"] == 9000
    for path, msg in ((["faults", 3, "at_us"], "has 1 entries"), (["name", "x"], "a string"),
                      (["topology", 0], "not an array"), (["faults", "x"], "not an index")):
        with pytest.raises(InputError, match=msg):
            apply_override(copy.deepcopy(BASE), path, 1)


def test_overrides_apply_in_order_and_unknown_keys_are_then_refused(tmp_path):
    p = write(tmp_path, BASE)
    s = load_scenario(p, ["seed=9", "seed=11", "workload.flows.0.bytes=2MiB"])
    assert s.seed == 11 and s.workload["flows"][0]["bytes"] == "2MiB"
    with pytest.raises(InputError, match=r"routing\.polcy: unknown key"):
        load_scenario(p, ["routing.polcy=ecmp"])


# --------------------------------------------------------------------------- strictness
def mutated(path, value):
    d = copy.deepcopy(BASE)
    apply_override(d, path, value)
    return d


@pytest.mark.parametrize("path,value,needle", [
    (["colour"], "red", "colour: unknown key"),
    (["routing", "polcy"], "x", "routing.polcy: unknown key"),
    (["faults", 0, "when"], 1, "faults[0].when: unknown key"),
    (["workload", "byts"], 1, "workload.byts: unknown key"),
    (["workload", "flows", 0, "size"], 1, "workload.flows[0].size: unknown key"),
    (["topology", "kk"], 8, "topology.kk"),
    (["engine", "kind"], "quantum", "engine.kind = 'quantum'"),
    (["seed"], "one", "seed = 'one'"),
    (["seed"], -1, "seed = -1"),
    (["name"], 5, "name = 5"),
    (["topology"], 5, "topology = 5"),
    (["faults"], {"link": [4, 5]}, "faults = "),
    (["workload", "kind"], "dance", "workload.kind = 'dance'"),
    (["workload", "flows", 0, "src"], "a", "workload.flows[0].src = 'a'"),
    (["workload", "flows", 0, "dst"], 9, "workload.flows[0].dst = 9"),
    (["workload", "flows", 0, "bytes"], True, "workload.flows[0].bytes = True"),
    (["workload", "flows", 0, "bytes"], -5, "workload.flows[0].bytes = -5"),
    (["workload", "flows", 0, "deps"], [7], "workload.flows[0].deps: flow 7 does not exist"),
    (["workload", "flows", 0, "deps"], [1], "dependency cycle"),
    (["workload", "flows", 0, "dst"], 0, "workload.flows[0]: a transfer from host 0 to itself"),
    (["workload", "flows", 1, "start_us"], -3, "workload.flows[1].start_us = -3"),
    (["topology", "links", 0, 2], -100, "topology.links[0][2] (gbps) = -100"),
    (["topology", "links", 0, 1], 9, "node 9 does not exist"),
    (["faults", 0, "link"], [0, 1], "faults[0].link = [0, 1]"),
    (["faults", 0, "factor"], 3, "faults[0].factor = 3"),
    (["faults", 0, "kind"], [], "faults[0].kind = []"),  # found by the fuzz below
    (["routing", "policy"], "magic", "routing.policy = 'magic'"),
    (["routing", "policy"], "dor", "routing.policy = 'dor'"),
])
def test_bad_values_name_field_and_value(path, value, needle):
    with pytest.raises(InputError) as e:
        prepare(mutated(path, value))
    assert needle in str(e.value)


def test_odd_fat_tree_and_negative_bandwidth():
    for topo, needle in (({"kind": "fat_tree", "k": 5}, "topology.k = 5"),
                         ({"kind": "fat_tree", "k": 4, "link_gbps": -100},
                          "topology.link_gbps = -100")):
        d = copy.deepcopy(BASE)
        d["topology"] = topo
        with pytest.raises(InputError, match=needle.replace(".", r"\.")):
            prepare(d)


def test_disconnected_custom_fabric():
    d = mutated(["topology", "links"], [[0, 4, 100, 1], [1, 4, 100, 1], [2, 5, 100, 1],
                                        [3, 5, 100, 1]])
    with pytest.raises(InputError, match="disconnected"):
        prepare(d)


# --------------------------------------------------------------------------- reachability
def test_flow_over_a_link_down_from_the_start_is_refused():
    d = mutated(["faults"], [{"link": [4, 5], "kind": "down", "at_us": 0}])
    with pytest.raises(InputError, match=r"workload\.flows\[0\]: host 0 cannot reach host 2"):
        prepare(d)


def test_flow_cut_only_later_is_not_an_input_error():
    prepare(mutated(["faults"], [{"link": [4, 5], "kind": "down", "at_us": 50}]))
    # down at 0, back up at 30 us: reachable during the run, the engine decides the rest
    prepare(mutated(["faults"], [{"link": [4, 5], "kind": "down", "at_us": 0},
                                 {"link": [4, 5], "kind": "up", "at_us": 30}]))


def test_one_direction_down_cuts_only_that_direction():
    rec = {"link": [4, 5], "kind": "down", "direction": "forward"}  # 4->5 dead, 5->4 alive
    d = mutated(["faults"], [rec])
    with pytest.raises(InputError, match="host 0 cannot reach host 2"):
        prepare(d)
    d["workload"]["flows"] = [{"src": 2, "dst": 0, "bytes": 10}]
    prepare(d)


def test_hosts_do_not_forward_on_switched_fabrics():
    # host 2 hangs off host 1 only: connected as a graph, but a GPU does not relay traffic
    d = mutated(["topology"], {"kind": "custom", "hosts": 3, "switches": 1,
                               "links": [[0, 3, 100, 1], [1, 3, 100, 1], [1, 2, 100, 1]]})
    d["faults"] = []
    d["workload"]["flows"] = [{"src": 0, "dst": 2, "bytes": 10}]
    with pytest.raises(InputError, match="host 0 cannot reach host 2"):
        prepare(d)


# --------------------------------------------------------------------------- workloads
def test_planned_kind_without_a_builder_is_not_available_yet(monkeypatch):
    workloads._discover()
    reg = {k: v for k, v in workloads._REGISTRY.items() if k != "chakra"}
    monkeypatch.setattr(workloads, "_REGISTRY", reg)
    with pytest.raises(InputError, match="workload kind 'chakra' is not available yet"):
        prepare(mutated(["workload"], {"kind": "chakra", "path": "trace/"}))


def test_workload_registry_is_pluggable(monkeypatch):
    monkeypatch.setattr(workloads, "_REGISTRY", dict(workloads._REGISTRY))
    from netcore.schedule import Schedule

    def build(topology, spec, where, seed):
        n = spec.get("count", 1)
        return Schedule.from_transfers([0] * n, [1] * n, [spec.get("size", 8)] * n)

    workloads.register_workload("burst", build, ("count", "size"),
                                report=lambda spec, s, r: {"step_time_s": 1.0})
    d = mutated(["workload"], {"kind": "burst", "count": 3})
    assert prepare(d).schedule.n_transfers == 3
    assert workloads.report(d["workload"], None, None) == {"step_time_s": 1.0}
    with pytest.raises(InputError, match=r"workload\.cnt: unknown key"):
        prepare(mutated(["workload"], {"kind": "burst", "cnt": 3}))


COLL = {"kind": "collective", "op": "all_reduce", "algorithm": "ring", "bytes": "1MiB"}


@pytest.mark.parametrize("change,needle", [
    ({"ranks": [0, 9]}, "workload.ranks[1] = 9"),
    ({"ranks": "some"}, "workload.ranks = 'some'"),
    ({"bytes": "lots"}, "workload.bytes = 'lots'"),
    ({"chunks": 0}, "workload.chunks = 0"),
    ({"op": 3}, "workload.op = 3"),
    ({"op": "all_dance"}, "all_dance"),
    ({"algorithm": "zigzag"}, "zigzag"),
    ({"options": {"colour": 1}}, "colour"),
    ({"step_latency_us": -1}, "workload.step_latency_us = -1"),
    # a collective needs bytes > 0: the message says so for 0 and for negatives alike
    ({"bytes": 0}, "workload.bytes = 0: a size must be > 0"),
    ({"bytes": -5}, "workload.bytes = -5: a size must be > 0"),
    ({"bytes_matrix": [[0, 1], [1, 0]]}, "workload.bytes_matrix: only op"),
    # all_to_all_v: a per-pair matrix, validated entry by entry
    ({"op": "all_to_all_v", "algorithm": "direct"}, "workload.bytes: all_to_all_v takes"),
    ({"op": "all_to_all_v", "bytes": None, "bytes_matrix": [[0, 1], [1, 0]]},
     "workload.bytes_matrix = [[0, 1], [1, 0]]: expected 4 rows"),
    ({"op": "all_to_all_v", "bytes": None, "ranks": [0, 1], "bytes_matrix": [[0, 1], [1]]},
     "workload.bytes_matrix[1] = [1]: expected 2 sizes"),
    ({"op": "all_to_all_v", "bytes": None, "ranks": [0, 1], "bytes_matrix": [[0, 1], [-3, 0]]},
     "workload.bytes_matrix[1][0] = -3"),
    ({"op": "all_to_all_v", "bytes": None, "ranks": [0, 1], "bytes_matrix": [[0, "x"], [1, 0]]},
     "workload.bytes_matrix[0][1] = 'x'"),
    ({"op": "all_to_all_v", "bytes": None, "ranks": [0, 1], "bytes_matrix": [[5, 0], [0, 0]]},
     "workload.bytes_matrix: moves no bytes"),
])
def test_collective_workload_bad_values(change, needle):
    w = {k: v for k, v in {**COLL, **change}.items() if v is not None}  # None: key left out
    with pytest.raises(InputError) as e:
        prepare(mutated(["workload"], w))
    assert needle in str(e.value)


def test_all_to_all_v_from_a_scenario_matrix():
    m = [[0, "1KiB", 5, 0], [7, 0, 0, 3], [1, 2, 0, 9], [4, 4, 4, 0]]
    w = {**COLL, "op": "all_to_all_v", "algorithm": "direct", "bytes_matrix": m}
    del w["bytes"]
    want = np.array([[0, 1024, 5, 0], [7, 0, 0, 3], [1, 2, 0, 9], [4, 4, 4, 0]])
    # Simple puts the payload on the wire; LL twice the payload (8-byte lines, 4 data bytes)
    for protocol, factor in (("simple", 1), ("ll", 2)):
        s = prepare(mutated(["workload"], {**w, "protocol": protocol})).schedule
        t = s.kind == 0
        got = np.zeros((4, 4), dtype=np.int64)
        np.add.at(got, (s.src[t], s.dst[t]), s.size[t])
        assert np.array_equal(got, factor * want)
        assert s.meta["bytes"] == 1029  # the largest send buffer, for algbw/busbw


def test_collective_workload_builds_over_all_hosts_by_default():
    s = prepare(mutated(["workload"], {**COLL, "network_detail": "full"})).schedule
    # ring all-reduce: 2(n-1) steps of n transfers over the 4 hosts
    assert s.n_transfers == 2 * 3 * 4
    assert set(s.src[s.kind == 0]) == {0, 1, 2, 3}
    # the default (auto) runs the ring as one stream standing for the same transfers
    a = prepare(mutated(["workload"], dict(COLL))).schedule
    assert a.n_transfers == 1 and a.n_member_transfers == 2 * 3 * 4
    assert a.total_bytes == s.total_bytes
    assert a.meta["network_detail_used"] == "auto"
    s = prepare(mutated(["workload"], {**COLL, "ranks": [1, 3],
                                       "network_detail": "full"})).schedule
    assert set(s.src[s.kind == 0]) | set(s.dst[s.kind == 0]) == {1, 3}


def test_hierarchical_takes_group_size_from_the_fabric():
    d = copy.deepcopy(BASE)
    d["topology"] = {"kind": "two_tier", "nodes": 2, "gpus_per_node": 4}
    d["faults"] = []
    d["workload"] = {**COLL, "algorithm": "hierarchical"}
    s = prepare(d).schedule
    # 2 nodes x 4 GPUs: group_size 4 inferred; intra RS + AG (2 x 3 steps) and inter RS + AG
    # (2 x 1 step), each step one transfer per rank
    assert s.meta["group_size"] == 4
    assert s.n_member_transfers == (2 * 3 + 2 * 1) * 8
    # as phases of ring streams (network_detail "auto", one chunk): a flow per node in each
    # intra phase, one per rail across
    assert s.n_transfers == 2 + 4 + 2
    d["workload"]["ranks"] = [0, 4, 1, 5, 2, 6, 3, 7]  # interleaved: no grouping to infer
    with pytest.raises(InputError, match="group_size"):
        prepare(d)


# --------------------------------------------------------------------------- files
@pytest.mark.parametrize("name,text,needle", [
    ("a.toml", "name = \n", "malformed TOML"),
    ("a.toml", "[topology]\nkind = 'x'\n[topology]\n", "malformed TOML"),
    ("a.json", "{\"name\": ", "malformed JSON"),
    ("a.json", "[1, 2]", "top level must be an object"),
    ("a.json", "{\"seed\": NaN}", "NaN is not a valid value"),
    ("a.json", "{\"seed\": 1, \"seed\": 2}", "'seed' appears twice"),
    ("a.yaml", "name: x", "expected a .toml or .json file"),
    ("a.json", "\"" + "[" * 100000, "malformed JSON"),
])
def test_file_errors(tmp_path, name, text, needle):
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(InputError, match=needle):
        load_scenario(p)


def test_missing_file_and_binary(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        load_scenario(tmp_path / "nope.toml")
    p = tmp_path / "b.toml"
    p.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(InputError, match="not UTF-8"):
        load_scenario(p)


# --------------------------------------------------------------------------- fuzz
json_scalars = (st.none() | st.booleans() | st.integers(-10, 40) |
                st.sampled_from([2**63, -2**63, 10**30, 0.5, -1.5, 1e308, "1MiB", "x", "",
                                 "ecmp", "custom", "fat_tree", "down", "flows", "collective"]) |
                st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8))
KEYS = st.sampled_from(["name", "seed", "topology", "routing", "engine", "faults", "workload",
                        "kind", "k", "hosts", "switches", "links", "policy", "flows", "src",
                        "dst", "bytes", "deps", "link", "at_us", "factor", "op", "ranks",
                        "mtu", "dims"]) | st.text(max_size=6)
json_values = st.recursive(json_scalars, lambda kids: st.lists(kids, max_size=4) |
                           st.dictionaries(KEYS, kids, max_size=5), max_leaves=20)


def _paths(v, prefix=()):
    yield prefix
    if isinstance(v, dict):
        for k, x in v.items():
            yield from _paths(x, prefix + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from _paths(x, prefix + (i,))


def _mutate(data, path, op, value):
    if not path:
        return value if op == "replace" else data
    node = data
    for seg in path[:-1]:
        node = node[seg]
    last = path[-1]
    if op == "delete":
        del node[last]
    elif op == "add" and isinstance(node[last], dict):
        node[last]["extra_key"] = value
    elif op == "add" and isinstance(node[last], list):
        node[last].append(value)
    else:
        node[last] = value
    return data


def _load_and_prepare(tmp_path, data):
    p = tmp_path / "fuzz.json"
    p.write_text(json.dumps(data))
    try:
        load_scenario(p).prepare(check_engine=False)
    except InputError:
        pass


FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


@settings(FUZZ, max_examples=300)
@given(data=st.data())
def test_fuzz_mutations_of_a_valid_scenario_raise_only_input_errors(tmp_path, data):
    scen = copy.deepcopy(BASE)
    paths = list(_paths(scen))
    path = data.draw(st.sampled_from(paths))
    op = data.draw(st.sampled_from(["replace", "delete", "add"]))
    value = data.draw(json_values)
    _load_and_prepare(tmp_path, _mutate(scen, list(path), op, value))


@FUZZ
@given(doc=st.dictionaries(KEYS, json_values, max_size=8))
def test_fuzz_random_documents_raise_only_input_errors(tmp_path, doc):
    _load_and_prepare(tmp_path, doc)


@FUZZ
@given(section=st.sampled_from(["topology", "routing", "engine", "workload"]),
       table=st.dictionaries(KEYS, json_values, max_size=6))
def test_fuzz_random_sections_raise_only_input_errors(tmp_path, section, table):
    scen = copy.deepcopy(BASE)
    scen[section] = {**scen[section], **table}
    _load_and_prepare(tmp_path, scen)
