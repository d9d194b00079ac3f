"""Chakra send/receive with eager semantics (workload.p2p = "eager", the default) against
rendezvous ("rendezvous"), on traces shaped like the MLCommons custom-collective traces
(per-rank chains that post each send before its receive; netcosim/interop/chakra_custom_ring.py
writes them) and on hand-built pairs.

Eager (ASTRA-sim's send/recv): a pair's transfer leaves when the send's parents are done and is
the send's completion; the receive completes when its own parents are done and the data has
arrived (a zero-time ``p2p_recv`` join node)."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import collectives
from netcore.api import simulate
from netcore.schedule import DELAY, TRANSFER, Schedule
from netcosim.interop import chakra_pb2 as pb
from netcosim.interop.chakra_custom_ring import (rank_nodes, ring_all_reduce_traces,
                                                 write_ring_all_reduce)
from netcosim.interop.chakra_reader import frame, read_trace
from netcosim.interop.chakra_to_schedule import load_schedule, to_schedule
from netcosim.interop.chakra_writer import write_schedule
from topo.builders import leaf_spine
from topo.errors import InputError

GM = pb.GlobalMetadata(version="0.0.4")
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _fabric(spines=2):
    return leaf_spine(2, 4, spines, link_gbps=100, latency_us=1.0)


def _write(tmp_path, per_rank: dict, name="t") -> Path:
    d = tmp_path / name
    d.mkdir()
    for r, msgs in per_rank.items():
        (d / f"x.{r}.et").write_bytes(frame(msgs))
    return d


def _i(name, v):
    return pb.AttributeProto(name=name, int64_val=v)


def _label(s: Schedule, name: str) -> np.ndarray:
    return np.flatnonzero(s.label == s.labels.index(name)) if name in s.labels else \
        np.zeros(0, dtype=np.int64)


def _node(s: Schedule, rank: int, cid: int, kind=None) -> int:
    """The schedule node of Chakra node ``cid`` on ``rank`` (of ``kind`` when several)."""
    hit = (s.extra["chakra_rank"] == rank) & (s.extra["chakra_id"] == cid)
    if kind is not None:
        hit &= s.kind == kind
    (i,) = np.flatnonzero(hit)
    return int(i)


# =========================================================================== a single pair
def _pair_trace(send_after_us, recv_after_us, nbytes):
    """Rank 0: compute, send to 1, compute. Rank 1: compute, receive from 0, compute."""
    def comp(i, us, deps=()):
        return pb.Node(id=i, name=f"c{i}", type=pb.COMP_NODE, duration_micros=us,
                       data_deps=list(deps))
    send = pb.Node(id=2, name="send", type=pb.COMM_SEND_NODE, data_deps=[1],
                   attr=[_i("comm_dst", 1), _i("comm_size", nbytes), _i("comm_tag", 0)])
    recv = pb.Node(id=2, name="recv", type=pb.COMM_RECV_NODE, ctrl_deps=[1],
                   attr=[_i("comm_src", 0), _i("comm_size", nbytes), _i("comm_tag", 0)])
    return {0: [GM, comp(1, send_after_us), send, comp(3, 1, [2])],
            1: [GM, comp(1, recv_after_us), recv, comp(3, 2, [2])]}


def test_eager_pair_becomes_a_transfer_and_a_receive_join(tmp_path):
    s = load_schedule(_write(tmp_path, _pair_trace(5, 20, 1 << 20)))
    assert s.meta["p2p"] == "eager" and s.n == 6
    t = _node(s, 0, 2, TRANSFER)  # the transfer is the send's node
    (j,) = _label(s, "p2p_recv")
    assert (s.kind[j], s.src[j], s.duration[j]) == (DELAY, 1, 0.0)
    assert _node(s, 1, 2) == j  # the receive's node
    # the transfer waits for the send's parent only; the join for the transfer and the
    # receive's own parent (a ctrl dep); each side's child waits for its side
    assert set(s.deps_of(t).tolist()) == {_node(s, 0, 1)}
    assert set(s.deps_of(j).tolist()) == {t, _node(s, 1, 1)}
    assert set(s.deps_of(_node(s, 0, 3)).tolist()) == {t}
    assert set(s.deps_of(_node(s, 1, 3)).tolist()) == {j}


@pytest.mark.parametrize("recv_after_us", [20, 2000])
def test_eager_pair_timing(tmp_path, recv_after_us):
    """The data leaves when the send's parents are done (5 us), not when the receiver is ready
    (rendezvous: 20 us); the receive completes when its parents are done and the data has
    arrived, whichever is later; the send completes when the data has been delivered."""
    topo = _fabric()
    d = _write(tmp_path, _pair_trace(5, recv_after_us, 1 << 20))
    s = load_schedule(d, topo)
    r = simulate(topo, s, "ecmp")
    t, j = _node(s, 0, 2, TRANSFER), int(_label(s, "p2p_recv")[0])
    wire = 2 * 1e-6 + (1 << 20) / 12.5e9  # same leaf: 2 hops of 1 us, 100 Gb/s
    assert r.start[t] == pytest.approx(5e-6, rel=1e-12)
    assert r.end[t] == pytest.approx(5e-6 + wire, rel=1e-9)
    assert r.end[j] == pytest.approx(max(r.end[t], recv_after_us * 1e-6), rel=1e-12)
    assert r.start[_node(s, 0, 3)] == r.end[t]
    assert r.start[_node(s, 1, 3)] == r.end[j]
    rz = load_schedule(d, topo, p2p="rendezvous")
    assert rz.n == 5 and "p2p_recv" not in rz.labels
    t_rz = _node(rz, 0, 2)
    # one node for both sides: the children of both wait for it
    assert set(rz.deps_of(_node(rz, 1, 3)).tolist()) == {t_rz}
    assert set(rz.deps_of(t_rz).tolist()) == {_node(rz, 0, 1), _node(rz, 1, 1)}
    assert simulate(topo, rz, "ecmp").start[t_rz] == pytest.approx(recv_after_us * 1e-6,
                                                                    rel=1e-12)


def test_self_send_and_lone_sides_under_eager(tmp_path):
    # a rank sending to itself: a zero-time delay, and the receive still joins after it
    per = {0: [GM, pb.Node(id=1, type=pb.COMM_SEND_NODE, attr=[_i("comm_dst", 0),
                                                               _i("comm_size", 8)]),
               pb.Node(id=2, type=pb.COMM_RECV_NODE, attr=[_i("comm_src", 0), _i("comm_size", 8)],
                       ctrl_deps=[1])]}
    with pytest.warns(UserWarning, match="with its own rank"):
        s = load_schedule(_write(tmp_path, per))
    assert s.n_transfers == 0 and s.n == 2
    j = int(_label(s, "p2p_recv")[0])
    assert set(s.deps_of(j).tolist()) == {_node(s, 0, 1)}
    # a receive whose send is missing is simulated from its side alone, as before: the
    # transfer waits for the receive's parents (there is no send whose parents it could wait
    # for) and no join node is made
    per = {1: [GM, pb.Node(id=1, type=pb.COMP_NODE, duration_micros=3),
               pb.Node(id=2, type=pb.COMM_RECV_NODE, data_deps=[1],
                       attr=[_i("comm_src", 0), _i("comm_size", 64)])]}
    for p2p in ("eager", "rendezvous"):
        with pytest.warns(UserWarning, match="no matching COMM_SEND"):
            s = to_schedule(read_trace(_write(tmp_path, per, name=f"lone_{p2p}")), 8, p2p=p2p)
        (t,) = np.flatnonzero(s.kind == TRANSFER)
        assert s.n == 2 and (s.src[t], s.dst[t]) == (0, 1)
        assert set(s.deps_of(t).tolist()) == {_node(s, 1, 1)}


def test_a_real_deadlock_is_still_a_cycle_under_eager(tmp_path):
    """Every rank posts its receive before its send (and the send waits for it): no semantics
    can run that; the error names the file and node, without the rendezvous hint."""
    per = {}
    for r in range(3):
        per[r] = [GM, pb.Node(id=1, type=pb.COMM_RECV_NODE,
                              attr=[_i("comm_src", (r - 1) % 3), _i("comm_size", 64)]),
                  pb.Node(id=2, type=pb.COMM_SEND_NODE, ctrl_deps=[1],
                          attr=[_i("comm_dst", (r + 1) % 3), _i("comm_size", 64)])]
    d = _write(tmp_path, per)
    with pytest.raises(InputError, match=r"x\.\d\.et: node id \d: dependency cycle") as e:
        load_schedule(d)
    assert "rendezvous" not in str(e.value)


# =========================================================================== custom-collective ring
def test_astra_shaped_ring_deadlocks_under_rendezvous_and_runs_eagerly(tmp_path):
    d = tmp_path / "ring"
    write_ring_all_reduce(d, 8, 8 << 20)  # 8 ranks, 1 chunk, as ASTRA-sim's 8-NPU example
    with pytest.raises(InputError, match=r"custom_allreduce\.\d\.et: node id \d+: dependency "
                                         r"cycle .*p2p = \"rendezvous\".*need p2p = \"eager\""):
        load_schedule(d, p2p="rendezvous")
    s = load_schedule(d)
    assert s.n_transfers == 8 * 2 * 7 and len(_label(s, "p2p_recv")) == 8 * 2 * 7
    assert (s.size[s.kind == TRANSFER] == (8 << 20) // 8).all()


def test_custom_ring_traces_carry_ctrl_and_data_deps():
    nodes = rank_nodes(2, 4, 1024, chunks=2, order="ctrl")
    assert sum(len(n.ctrl_deps) for n in nodes) > 0 and sum(len(n.data_deps) for n in nodes) > 0
    # the first node of the chain is a send (posted before any receive); ids count from 0
    assert nodes[0].type == pb.COMM_SEND_NODE and [n.id for n in nodes] == list(range(len(nodes)))
    only_data = rank_nodes(2, 4, 1024, chunks=2, order="data")
    assert sum(len(n.ctrl_deps) for n in only_data) == 0
    with pytest.raises(InputError, match="nbytes = 1001: not a multiple"):
        ring_all_reduce_traces(4, 1001, chunks=2)


def _ring_dag(n, C, program_order=True):
    """The transfer DAG a custom-ring trace stands for, derived by hand: transfer (r, k, c)
    (rank r -> r+1, step k, chunk c) waits for the block it forwards ((r-1, k-1, c) arrived) and,
    in program order, for the previous chunk's send to be delivered (its own previous transfer)
    and the previous chunk's receive ((r-1) sends it)."""
    K = 2 * (n - 1)

    def idx(r, k, c):
        return ((r % n) * K + k) * C + c
    deps = []
    for r in range(n):
        for k in range(K):
            for c in range(C):
                p = [idx(r - 1, k - 1, c)] if k > 0 else []
                if program_order and (k, c) != (0, 0):
                    pk, pc = (k, c - 1) if c > 0 else (k - 1, C - 1)
                    p += [idx(r, pk, pc), idx(r - 1, pk, pc)]
                deps.append(sorted(set(p)))
    src = np.repeat(np.arange(n), K * C)
    sched = Schedule.from_transfers(src, (src + 1) % n, np.full(n * K * C, 64), deps=deps)
    step = np.tile(np.repeat(np.arange(K), C), n)
    chunk = np.tile(np.arange(C), n * K)
    return sched, src, step, chunk


def _transfer_ancestors(s: Schedule, ids: np.ndarray) -> np.ndarray:
    """anc[a, b]: transfer ids[b] is an ancestor of transfer ids[a] (through any nodes)."""
    pos = np.full(s.n, -1)
    pos[ids] = np.arange(len(ids))
    anc = np.zeros((s.n, len(ids)), dtype=bool)
    for i in s.topological_order():
        for p in s.deps_of(i):
            anc[i] |= anc[p]
            if pos[p] >= 0:
                anc[i, pos[p]] = True
    return anc[ids]


@pytest.mark.parametrize("order, deps, program_order", [("ctrl", "both", True),
                                                         ("data", "both", True),
                                                         ("data", "data", True),
                                                         ("ctrl", "data", False)])
def test_custom_ring_maps_onto_the_hand_derived_dag(tmp_path, order, deps, program_order):
    n, C = 4, 2
    d = tmp_path / "ring"
    write_ring_all_reduce(d, n, n * C * 64, chunks=C, order=order)
    s = load_schedule(d, deps=deps)
    ref, src, step, chunk = _ring_dag(n, C, program_order)
    # the schedule's transfers carry their send's rank and node id: name -> (step, chunk)
    where = {}
    for r in range(n):
        for node in rank_nodes(r, n, 64, chunks=C):
            if node.type == pb.COMM_SEND_NODE:
                _, _, k, c = node.name.split("_")
                where[(r, node.id)] = (int(k[1:]), int(c[1:]))
    t = np.flatnonzero(s.kind == TRANSFER)
    key = [(int(s.src[i]),) + where[(int(s.extra["chakra_rank"][i]), int(s.extra["chakra_id"][i]))]
           for i in t]
    ref_pos = {(int(a), int(b), int(c)): i for i, (a, b, c) in enumerate(zip(src, step, chunk))}
    perm = np.array([ref_pos[k] for k in key])
    assert sorted(perm.tolist()) == list(range(ref.n))
    assert (s.dst[t] == ref.dst[perm]).all()
    got = _transfer_ancestors(s, t)
    want = _transfer_ancestors(ref, np.arange(ref.n))[perm][:, perm]
    assert (got == want).all()


# =========================================================================== end to end
def _scenario(tmp_path, workload: dict, engine="flow", spines=2):
    from netcosim.scenario import Scenario

    data = {"name": "eager", "seed": 1,
            "topology": {"kind": "leaf_spine", "leaves": 2, "hosts_per_leaf": 4,
                         "spines": spines, "link_gbps": 100, "latency_us": 1.0},
            "routing": {"policy": "ecmp"}, "engine": {"kind": engine}, "workload": workload}
    p = Scenario.from_dict(data, str(tmp_path / "s.toml")).prepare()
    return simulate(p.topology, p.schedule, p.routing, p.faults, engine=engine).makespan


@pytest.mark.parametrize("chunks, channels", [(4, 1), (1, 2)])
def test_custom_ring_equals_the_collective_workload(tmp_path, chunks, channels):
    """The issue's acceptance check (within 1%): a ring all-reduce written as a custom-collective
    trace, run by kind = "chakra" on the flow engine, against kind = "collective" with the same
    bytes and ranks. Parallel channels carry a chunk each at every step: the bandwidth of the
    unchunked ring, its latency once per step."""
    nbytes = 8 << 20
    write_ring_all_reduce(tmp_path / "trace", 8, nbytes, chunks=chunks, channels=channels)
    t_chakra = _scenario(tmp_path, {"kind": "chakra", "path": "trace"})
    # the trace carries no NCCL protocol costs: the bare collective (Simple, no step latency)
    t_coll = _scenario(tmp_path, {"kind": "collective", "op": "all_reduce",
                                  "algorithm": "ring", "bytes": nbytes, "chunks": chunks,
                                  "protocol": "simple", "step_latency_us": 0})
    assert t_chakra >= 2 * 7 / 8 * nbytes / 12.5e9  # the ring bound 2(n-1)/n S/B
    assert t_chakra == pytest.approx(t_coll, rel=1e-12)


def test_bundled_custom_ring_example_matches_the_collective_scenario():
    from netcosim.scenario import Scenario, load_scenario, read_file

    path = EXAMPLES / "chakra_custom_ring.toml"
    p = load_scenario(path).prepare()
    t_chakra = simulate(p.topology, p.schedule, p.routing, p.faults, engine="flow").makespan
    data = read_file(path)
    data["workload"] = {"kind": "collective", "op": "all_reduce", "algorithm": "ring",
                        "bytes": "64MiB", "chunks": 4, "protocol": "simple",
                        "step_latency_us": 0}
    q = Scenario.from_dict(data, str(path)).prepare()
    t_coll = simulate(q.topology, q.schedule, q.routing, q.faults, engine="flow").makespan
    assert t_chakra == pytest.approx(t_coll, rel=1e-12)
    assert p.schedule.n_transfers == 8 * 2 * 7 * 4
    # the bundled files are what the generator script writes
    msgs = ring_all_reduce_traces(8, 64 << 20, chunks=4, order="ctrl")
    for r, m in msgs.items():
        assert (EXAMPLES / "chakra" / "custom_ring_allreduce_8" /
                f"custom_allreduce.{r}.et").read_bytes() == frame(m)


def test_reductions_add_up_along_the_chain(tmp_path):
    """ASTRA-sim's custom ring example reduces each received chunk in a 7 us COMP node: on every
    rank that is chunks x (n-1) reductions in series with the ring."""
    topo = _fabric()
    base = simulate(topo, collectives.ring_all_reduce(list(range(8)), 6 << 20, chunks=3),
                    "ecmp").makespan
    write_ring_all_reduce(tmp_path / "r", 8, 6 << 20, chunks=3, reduce_us=7)
    t = simulate(topo, load_schedule(tmp_path / "r", topo), "ecmp").makespan
    assert t == pytest.approx(base + 3 * 7 * 7e-6, rel=1e-12)


def test_packet_engine_runs_the_custom_ring(tmp_path):
    """One spine: one path per pair, so routing hashes play no part. One chunk per step: the
    same DAG as the library ring, the same makespan. Two chunks: the trace's program order
    (chunk c's receive before chunk c+1's send) is stricter than the library's pipeline, which
    the packet engine (transfers not in lock step) shows; the makespan is that of the
    hand-derived DAG."""
    topo = _fabric(spines=1)
    write_ring_all_reduce(tmp_path / "one", 8, 1 << 20)
    s = load_schedule(tmp_path / "one", topo)
    ref = collectives.ring_all_reduce(list(range(8)), 1 << 20)
    t = simulate(topo, s, "ecmp", engine="packet").makespan
    assert t == simulate(topo, ref, "ecmp", engine="packet").makespan
    assert t > simulate(topo, ref, "ecmp", engine="flow").makespan  # packets: not free
    write_ring_all_reduce(tmp_path / "two", 8, 1 << 20, chunks=2)
    s2 = load_schedule(tmp_path / "two", topo)
    dag, *_ = _ring_dag(8, 2)
    dag.size[:] = (1 << 20) // 16
    assert simulate(topo, s2, "ecmp", engine="packet").makespan == \
        simulate(topo, dag, "ecmp", engine="packet").makespan


def test_collective_schedules_written_by_netcosim_read_back_alike(tmp_path):
    """The writer puts a schedule edge on both ranks of a transfer; the library's collectives
    have every edge on the sender's rank too, so eager and rendezvous give the same makespan."""
    topo = _fabric()
    for alg, chunks in (("ring", 2), ("double_binary_tree", 4)):
        ref = collectives.build("all_reduce", alg, list(range(8)), 4 << 20, chunks=chunks)
        d = tmp_path / alg
        write_schedule(ref, d)
        want = simulate(topo, ref, "ecmp").makespan
        for p2p in ("eager", "rendezvous"):
            got = simulate(topo, load_schedule(d, topo, p2p=p2p), "ecmp").makespan
            assert got == pytest.approx(want, rel=1e-12), (alg, p2p)


# =========================================================================== bad input
@pytest.mark.parametrize("value, shown", [('"foo"', "'foo'"), ("3", "3"), ('"Eager"', "'Eager'")])
def test_unknown_p2p_value_exits_2_naming_the_field(tmp_path, capsys, value, shown):
    from netcosim.cli import main

    d = tmp_path / "trace"
    d.mkdir()
    (d / "x.0.et").write_bytes(b"\xff\xff\xff")  # corrupt: the option is checked first
    scen = tmp_path / "s.toml"
    scen.write_text('[topology]\nkind = "leaf_spine"\nleaves = 2\nhosts_per_leaf = 4\n'
                    f'spines = 2\n[workload]\nkind = "chakra"\npath = "trace"\np2p = {value}\n')
    assert main(["run", str(scen), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"workload.p2p = {shown}: expected \"eager\" (the default) or \"rendezvous\"" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_unknown_p2p_value_in_the_python_api(tmp_path):
    d = _write(tmp_path, _pair_trace(1, 1, 64))
    with pytest.raises(InputError, match=r"chakra\.p2p = 'lazy': expected"):
        load_schedule(d, p2p="lazy")
    with pytest.raises(InputError, match=r"chakra\.deps = 'ctrl': expected"):
        load_schedule(d, deps="ctrl")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_schedule(d, p2p="rendezvous").meta["p2p"] == "rendezvous"


@pytest.mark.parametrize("fabric, n", [
    ("leaf_spine", 8), ("torus", 8), ("torus", 9)])
def test_a_trace_is_routed_by_connection_as_the_collective_is(tmp_path, fabric, n):
    """A trace's sends between two ranks share one connection (one ECMP hash), as NCCL's queue
    pairs do and as the library routes its collectives. Keyed by node id, a one-chunk ring
    written as a trace took other paths than the same ring as a collective on fabrics with
    several paths per pair (3x3 torus: +25% with 8 ranks, -26% with 9, read back in the flow
    engine). Now equal in both engines."""
    from topo.builders import torus

    topo = _fabric() if fabric == "leaf_spine" else torus((3, 3), link_gbps=100)
    size = n << 17
    write_ring_all_reduce(tmp_path / "r", n, size)
    s = load_schedule(tmp_path / "r", topo)
    ref = collectives.ring_all_reduce(list(range(n)), size).with_connections()
    for engine in ("flow", "packet"):
        assert simulate(topo, s, "ecmp", engine=engine).makespan == \
            simulate(topo, ref, "ecmp", engine=engine).makespan, engine
