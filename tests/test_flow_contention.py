"""The flow engine's many-to-many contention model (``[engine] contention``, issue 17):
default unchanged, the fluid model where nothing is shared, slower where many flows share,
its table's interpolation, bad values refused, determinism."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst

from cli_helpers import cli, write
from netcore.api import simulate
from netcore.flow import contention as C
from netcore.flow.options import DEFAULTS, check_options
from netcosim.scenario import Scenario
from topo.errors import InputError


def _run(topology: dict, bytes_matrix=None, per_pair=None, perm=None, **engine):
    n = Scenario.from_dict({"topology": topology}).build_topology().n_hosts
    if perm is not None:
        wl = {"kind": "flows", "flows": [{"src": i, "dst": int(perm[i]), "bytes": 300_000}
                                         for i in range(n) if perm[i] is not None]}
    else:
        wl = {"kind": "collective", "op": "all_to_all", "algorithm": "direct",
              "protocol": "simple", "step_latency_us": 0, "bytes": per_pair * n}
    d = {"name": "t", "seed": 1, "topology": topology, "routing": {"policy": "ecmp"},
         "engine": {"kind": "flow", **engine}, "workload": wl}
    p = Scenario.from_dict(d, default_name="t").prepare()
    return simulate(p.topology, p.schedule, p.routing, p.faults, engine="flow", seed=1,
                    validate=False, **p.engine_options)


STAR8 = {"kind": "leaf_spine", "leaves": 1, "hosts_per_leaf": 8, "spines": 1,
         "link_gbps": 100, "latency_us": 1.0}
FT4 = {"kind": "fat_tree", "k": 4, "link_gbps": 400, "latency_us": 0.5}


def test_default_is_fluid_and_unchanged():
    assert DEFAULTS["contention"] == "fluid"
    assert check_options({})["contention"] == "fluid"
    a = _run(FT4, per_pair=64 << 10)
    b = _run(FT4, per_pair=64 << 10, contention="fluid")
    assert np.array_equal(a.end, b.end) and np.array_equal(a.link_bytes, b.link_bytes)


@pytest.mark.parametrize("model", ["tcp", "dcqcn"])
def test_reduces_to_fluid_when_no_link_is_shared(model):
    # a shift permutation on one switch: every link carries one transfer each way
    perm = (np.arange(8) + 3) % 8
    fluid = _run(STAR8, perm=perm)
    got = _run(STAR8, perm=perm, contention=model)
    assert np.array_equal(fluid.end, got.end)
    # a pair exchange (0 <-> 1) alone: one transfer per link
    pair = np.array([1, 0] + [None] * 6, dtype=object)
    one = _run(STAR8, perm=pair)
    one_c = _run(STAR8, perm=pair, contention=model)
    assert np.array_equal(one.end, one_c.end)


@pytest.mark.parametrize("model", ["tcp", "dcqcn"])
def test_many_to_many_is_slower_and_deterministic(model):
    fluid = _run(FT4, per_pair=256 << 10)
    a = _run(FT4, per_pair=256 << 10, contention=model)
    b = _run(FT4, per_pair=256 << 10, contention=model)
    assert a.makespan > 1.05 * fluid.makespan
    assert np.array_equal(a.end, b.end) and np.array_equal(a.link_busy, b.link_busy)
    # the bytes moved are the same; only the time changes
    assert np.array_equal(a.link_bytes, fluid.link_bytes)


def test_star_all_to_all_reproduces_its_table_point():
    # the table's own representative: n hosts on one switch, 0.5 us links (grid point)
    star = dict(STAR8, link_gbps=400, latency_us=0.5)
    fluid = _run(star, per_pair=1 << 20)
    got = _run(star, per_pair=1 << 20, contention="tcp")
    want = C.efficiency("tcp", np.array([7.0]), np.array([400.0]), np.array([float(1 << 20)]))[0]
    # uplinks at bandwidth x efficiency: the host-link bound stretches by 1 / efficiency
    assert got.makespan == pytest.approx(fluid.makespan / want, rel=0.02)


def test_efficiency_interpolation():
    lf, lg, lb, eff = C.table("dcqcn")
    f, g, b = np.exp(lf[3]), np.exp(lg[1]), np.exp(lb[2])
    assert C.efficiency("dcqcn", [f], [g], [b])[0] == pytest.approx(min(1.0, eff[3, 1, 2]))
    # one flow: no contention; beyond the grid: clamped to its edge
    assert C.efficiency("dcqcn", [1.0], [400.0], [1e6])[0] == 1.0
    big = C.efficiency("tcp", [1e6], [1e5], [1e12])[0]
    assert big == pytest.approx(min(1.0, C.table("tcp")[3][-1, -1, -1]))
    e = C.efficiency("tcp", np.full(50, 20.0), np.full(50, 400.0), np.geomspace(1e4, 1e8, 50))
    assert ((e > 0) & (e <= 1)).all()
    assert C.mismatch("dcqcn", [1.0], [100.0], [1e6])[0] == 1.0
    assert C.mismatch("tcp", [4.0], [100.0], [1e6])[0] == 1.0  # no tcp mismatch table


@pytest.mark.parametrize("bad", ["nope", 3, None, True, "Fluid"])
def test_bad_value_refused(bad):
    with pytest.raises(InputError, match="engine.contention"):
        check_options({"contention": bad})


def test_cli_refuses_bad_contention(tmp_path, capsys):
    text = """
name = "x"
[topology]
kind = "leaf_spine"
leaves = 1
hosts_per_leaf = 4
spines = 1
[routing]
policy = "ecmp"
[engine]
kind = "flow"
contention = "ideal"
[workload]
kind = "flows"
flows = [{src = 0, dst = 1, bytes = 1000}]
"""
    rc, _, err = cli(capsys, "validate", write(tmp_path, text, "s.toml"))
    assert rc == 2 and "engine.contention" in err and "Traceback" not in err, err


def test_incremental_runs_refuse_the_model():
    from netcore.flow.incremental import FlowIncremental

    topo = Scenario.from_dict({"topology": STAR8}).build_topology()
    with pytest.raises(InputError, match="engine.contention"):
        FlowIncremental(topo, "ecmp", contention="tcp")
    FlowIncremental(topo, "ecmp", contention="fluid")  # the default is fine


@pytest.mark.parametrize("model", ["tcp", "dcqcn"])
def test_chain_of_transfers_on_one_link_is_not_contention(model):
    # eight transfers 0 -> 1 one after the other share the link but never at once
    flows = [{"src": 0, "dst": 1, "bytes": 200_000, **({"deps": [i - 1]} if i else {})}
             for i in range(8)]
    d = {"name": "c", "seed": 1, "topology": STAR8, "routing": {"policy": "ecmp"},
         "workload": {"kind": "flows", "flows": flows}}
    ends = []
    for c in ("fluid", model):
        p = Scenario.from_dict({**d, "engine": {"kind": "flow", "contention": c}},
                               default_name="c").prepare()
        ends.append(simulate(p.topology, p.schedule, p.routing, p.faults, engine="flow",
                             seed=1, validate=False, **p.engine_options).end)
    assert np.array_equal(ends[0], ends[1])


def test_dag_levels():
    # 0 -> 1 -> 3, 0 -> 2 -> 3, 4 alone
    ndeps = np.array([0, 1, 1, 2, 0])
    cptr = np.array([0, 2, 3, 4, 4, 4])
    cidx = np.array([1, 2, 3, 3])
    assert C.dag_levels(ndeps, cptr, cidx).tolist() == [0, 1, 1, 2, 0]


def test_a_degraded_link_keeps_its_efficiency():
    # a degrade fault sets capacity = bandwidth x factor x efficiency, so the contention
    # run stays slower than the fluid one with the same fault
    d = {"name": "f", "seed": 1, "topology": dict(STAR8, link_gbps=400),
         "routing": {"policy": "ecmp"},
         "workload": {"kind": "collective", "op": "all_to_all", "algorithm": "direct",
                      "protocol": "simple", "step_latency_us": 0, "bytes": (1 << 20) * 8},
         "faults": [{"link": [0, 8], "kind": "degrade", "factor": 0.5, "at_us": 5.0}]}
    out = {}
    for c in ("fluid", "tcp"):
        p = Scenario.from_dict({**d, "engine": {"kind": "flow", "contention": c}},
                               default_name="f").prepare()
        out[c] = simulate(p.topology, p.schedule, p.routing, p.faults, engine="flow", seed=1,
                          validate=False, **p.engine_options).makespan
    eff = C.efficiency("tcp", [7.0], [400.0], [float(1 << 20)])[0]
    assert out["tcp"] == pytest.approx(out["fluid"] / eff, rel=0.03)


def _spy_efficiency(monkeypatch) -> dict:
    """Record the per-link efficiency the next flow run computes (``seen["eff"]``)."""
    seen = {}
    real = C.link_efficiency

    def spy(st, topo, transport):
        seen["eff"] = real(st, topo, transport)
        return seen["eff"]

    monkeypatch.setattr(C, "link_efficiency", spy)
    return seen


def _a2a_eff(topology: dict, policy: str, per_pair: int, model: str, monkeypatch):
    """(Result, per-directed-link efficiency, Topology) of a direct all-to-all."""
    seen = _spy_efficiency(monkeypatch)
    topo = Scenario.from_dict({"topology": topology}).build_topology()
    d = {"name": "t", "seed": 1, "topology": topology, "routing": {"policy": policy},
         "engine": {"kind": "flow", "contention": model},
         "workload": {"kind": "collective", "op": "all_to_all", "algorithm": "direct",
                      "protocol": "simple", "step_latency_us": 0,
                      "bytes": per_pair * topo.n_hosts}}
    p = Scenario.from_dict(d, default_name="t").prepare()
    res = simulate(p.topology, p.schedule, p.routing, p.faults, engine="flow", seed=1,
                   validate=False, **p.engine_options)
    return res, seen.get("eff"), p.topology


RING8 = {"kind": "torus", "dims": [8], "link_gbps": 100, "latency_us": 1.0}
TORUS33 = {"kind": "torus", "dims": [3, 3], "link_gbps": 100, "latency_us": 1.0}


def test_tcp_leaves_forwarding_host_links_at_full_rate(monkeypatch):
    # on a ring under dor every link leaving a host also forwards other hosts' transfers: a
    # forwarding port, not a NIC queue, so tcp keeps the fluid answer exactly ...
    fluid, _, _ = _a2a_eff(RING8, "dor", 256 << 10, "fluid", monkeypatch)
    tcp, eff, _ = _a2a_eff(RING8, "dor", 256 << 10, "tcp", monkeypatch)
    assert np.all(eff == 1.0)
    assert np.array_equal(fluid.end, tcp.end)
    # ... which the rule is what gives (without it every ring link is lowered)
    monkeypatch.setattr(C, "TCP_FORWARD_RULE", False)
    slow, eff_off, _ = _a2a_eff(RING8, "dor", 256 << 10, "tcp", monkeypatch)
    assert np.all(eff_off < 1.0) and slow.makespan > 1.2 * fluid.makespan


def test_tcp_lowers_a_host_link_that_carries_only_its_own_transfers(monkeypatch):
    # 3x3 torus, dor: a host's first-dimension links carry only transfers that start there
    # (every first-dimension peer is one hop away), its second-dimension links also forward
    # the transfers that turned at it
    _, eff, topo = _a2a_eff(TORUS33, "dor", 256 << 10, "tcp", monkeypatch)
    layer = topo.link_layer[np.arange(topo.n_dlinks) // 2]
    lowered = eff < 1.0
    assert lowered.any() and not lowered.all()
    # one dimension lowered everywhere, the other nowhere
    assert sorted({bool(lowered[layer == d].all()) for d in (0, 1)}) == [False, True]
    assert sorted({bool(lowered[layer == d].any()) for d in (0, 1)}) == [False, True]
    own = np.unique(eff[lowered])
    # the star's efficiency at the number of transfers on such a link (3 peers per direction
    # ... the peers reached first over that link)
    assert np.all(own == C.efficiency("tcp", [3.0], [100.0], [float(256 << 10)])[0])


LS_OVER = {"kind": "leaf_spine", "leaves": 2, "hosts_per_leaf": 4, "spines": 1,
           "oversubscription": 2.0, "link_gbps": 100, "latency_us": 1.0}


def test_tcp_oversubscribed_core_takes_the_dumbbell_efficiency(monkeypatch):
    # 2 leaves x 4 hosts at 100 Gb/s, one spine, 2:1: each leaf-spine link runs at 200 Gb/s
    # and carries the 16 cross-leaf transfers of its direction (load 16 S / 200G = 8 S / 100G)
    # while each host link carries 7 (load 7 S / 100G): load ratio 8 / 7
    S = 1 << 20
    _, eff, topo = _a2a_eff(LS_OVER, "ecmp", S, "tcp", monkeypatch)
    core = (topo.dlink_src >= topo.n_hosts) & (topo.dlink_dst >= topo.n_hosts)
    want = C.oversub("tcp", [8 / 7], [100.0], [float(S)])[0]
    assert 0.5 < want < 1.0
    assert np.allclose(eff[core], want, rtol=0, atol=1e-12)
    # host uplinks: the star's value at 7 transfers; downlinks of the switches stay at 1
    up = topo.dlink_src < topo.n_hosts
    assert np.allclose(eff[up], C.efficiency("tcp", [7.0], [100.0], [float(S)])[0])
    assert np.all(eff[~up & ~core] == 1.0)


def test_tcp_ecmp_hot_spots_of_a_non_blocking_core_are_not_oversubscription(monkeypatch):
    # fat_tree k=4 (non-blocking): ECMP collisions make some core links busier than the host
    # links, but each layer as a whole is not: no switch-to-switch link is lowered
    _, eff, topo = _a2a_eff(FT4, "ecmp", 64 << 10, "tcp", monkeypatch)
    core = (topo.dlink_src >= topo.n_hosts) & (topo.dlink_dst >= topo.n_hosts)
    assert np.all(eff[core] == 1.0)


def test_dcqcn_speed_ratio_of_an_oversubscribed_core_is_divided_by_its_load_ratio(
        monkeypatch):
    # the 2:1 leaf-spine above: leaf-spine links at 200 Gb/s over 100 Gb/s receivers
    # (rho = 2), layer load ratio 8 / 7: the mismatch factor is read at rho = 2 / (8 / 7)
    S = 1 << 20
    _, eff, topo = _a2a_eff(LS_OVER, "ecmp", S, "dcqcn", monkeypatch)
    up_core = (topo.dlink_src >= topo.n_hosts) & (topo.dlink_dst >= topo.n_hosts)
    base = C.efficiency("dcqcn", [16.0], [200.0], [float(S)])[0]
    want = base * C.mismatch("dcqcn", [2 / (8 / 7)], [100.0], [float(S)])[0]
    assert np.allclose(eff[up_core], want, rtol=0, atol=1e-12)
    # without the rule: the full rho = 2 factor, lower
    monkeypatch.setattr(C, "DCQCN_RHO_RULE", False)
    _, eff_off, _ = _a2a_eff(LS_OVER, "ecmp", S, "dcqcn", monkeypatch)
    assert np.all(eff_off[up_core] < eff[up_core])


# a hot receiver on one switch (8 hosts, 100 Gb/s): every host sends HOT bytes to host 0
# and COLD bytes to every other host, all at once (one DAG depth)
HOT, COLD = 8 << 20, 256 << 10


def _hot_receiver(model: str, monkeypatch, incast_rule: bool = True):
    """(Result, per-directed-link efficiency, Topology); the rule as committed, or off."""
    if not incast_rule:
        monkeypatch.setattr(C, "DCQCN_INCAST_RULE", False)
    topology = dict(STAR8, latency_us=0.5)
    flows = [{"src": i, "dst": j, "bytes": HOT if j == 0 else COLD}
             for i in range(8) for j in range(8) if i != j]
    seen = _spy_efficiency(monkeypatch)
    d = {"name": "h", "seed": 1, "topology": topology, "routing": {"policy": "ecmp"},
         "engine": {"kind": "flow", "contention": model},
         "workload": {"kind": "flows", "flows": flows}}
    p = Scenario.from_dict(d, default_name="h").prepare()
    res = simulate(p.topology, p.schedule, p.routing, p.faults, engine="flow", seed=1,
                   validate=False, **p.engine_options)
    return res, seen.get("eff"), p.topology


def test_dcqcn_hot_receiver_link_blends_the_star_and_the_incast(monkeypatch):
    res, eff, topo = _hot_receiver("dcqcn", monkeypatch)
    into0 = np.flatnonzero(topo.dlink_dst == 0)
    assert len(into0) == 1
    into0 = into0[0]
    # host 0's link: 7 transfers of HOT bytes; load 7 HOT against its senders' uplinks'
    # HOT + 6 COLD (host 0's own uplink carries 7 COLD, but no transfer into host 0 starts
    # there): q = 7 HOT / (HOT + 6 COLD)
    q = 7 * HOT / (HOT + 6 * COLD)
    star = C.efficiency("dcqcn", [7.0], [100.0], [float(HOT)])[0]
    want = C.incast_efficiency("dcqcn", [7.0], [100.0], [float(HOT)], [q])[0]
    assert want < star  # the incast representative loses more than the star at 7 flows
    assert eff[into0] == pytest.approx(want, rel=1e-12)
    # by hand: 1 / eff = (1/q) / star + (1 - 1/q) / incast
    inc = C.incast_efficiency("dcqcn", [7.0], [100.0], [float(HOT)], [1e300])[0]
    assert 1 / want == pytest.approx((1 / q) / star + (1 - 1 / q) / inc, rel=1e-12)
    # the other receiver links are not hot (q < 1: their senders are busier than they)
    others = (topo.dlink_dst < topo.n_hosts) & (topo.dlink_dst != 0)
    assert np.all(eff[others] == C.efficiency("dcqcn", [7.0], [100.0],
                                               [float(COLD)])[0])
    # without the rule the hot link keeps the star's value, and the run is faster
    off, eff_off, _ = _hot_receiver("dcqcn", monkeypatch, incast_rule=False)
    assert eff_off[into0] == pytest.approx(star, rel=1e-12)
    assert np.array_equal(np.delete(eff, into0), np.delete(eff_off, into0))
    assert res.makespan > 1.02 * off.makespan


@pytest.mark.parametrize("model", ["fluid", "tcp"])
def test_incast_rule_leaves_fluid_and_tcp_alone(model, monkeypatch):
    on, _, _ = _hot_receiver(model, monkeypatch, incast_rule=True)
    off, _, _ = _hot_receiver(model, monkeypatch, incast_rule=False)
    assert np.array_equal(on.end, off.end)
    assert C.incast_table("tcp") is None  # only dcqcn has an incast representative


def test_uniform_all_to_all_is_not_an_incast(monkeypatch):
    # every receiver link of a uniform all-to-all is exactly as loaded as its senders: the
    # rule changes nothing (bit-identical)
    on, eff_on, _ = _a2a_eff(FT4, "ecmp", 1 << 20, "dcqcn", monkeypatch)
    monkeypatch.setattr(C, "DCQCN_INCAST_RULE", False)
    off, eff_off, _ = _a2a_eff(FT4, "ecmp", 1 << 20, "dcqcn", monkeypatch)
    assert np.array_equal(eff_on, eff_off) and np.array_equal(on.end, off.end)


@settings(max_examples=60, deadline=None)
@given(flows=hst.floats(2.0, 200.0), gbps=hst.floats(50.0, 10_000.0),
       nbytes=hst.floats(1e4, 1e8), q1=hst.floats(1.0, 1e4), q2=hst.floats(1.0, 1e4))
def test_incast_efficiency_moves_from_the_star_to_the_incast(flows, gbps, nbytes, q1, q2):
    star = C.efficiency("dcqcn", [flows], [gbps], [nbytes])[0]
    inc = C.incast_efficiency("dcqcn", [flows], [gbps], [nbytes], [1e300])[0]
    lo, hi = min(star, inc), max(star, inc)
    a, b = C.incast_efficiency("dcqcn", [flows, flows], [gbps, gbps], [nbytes, nbytes],
                               [min(q1, q2), max(q1, q2)])
    assert C.incast_efficiency("dcqcn", [flows], [gbps], [nbytes], [1.0])[0] == \
        pytest.approx(star, rel=1e-12)
    for e in (a, b):
        assert lo * (1 - 1e-12) <= e <= hi * (1 + 1e-12) and 0 < e <= 1
    # a hotter receiver (larger q) is further from the star, toward the incast
    assert abs(b - star) >= abs(a - star) * (1 - 1e-12) - 1e-15
