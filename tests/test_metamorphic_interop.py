"""Metamorphic and round-trip tests of the Chakra / ASTRA-sim interop (docs/interop.md).

* Export then import: a scenario written by `netcosim export --chakra` and run back as a
  `kind = "chakra"` workload gives the same makespan and the same transfers (endpoints, bytes,
  start, end, path) on the flow engine, bit for bit, under both p2p semantics; so does any
  random schedule of transfers, computes and delays written with `write_schedule`.
* Contention-free relations (a mesh with exact binary times): eager never later than
  rendezvous, one more dependency or a split transfer never shorter, zero-time compute equals
  the transfers alone.
* Relabelled ranks placed back with rank_hosts run the same; a trace's collective is the
  scenario's collective.
* ASTRA-sim network.yml: the hand-built custom fabric and the torus builder, bit for bit; its
  --toml table builds its --json fabric.
* Malformed traces and networks: exit 2 with one line naming the file, node and field.
"""
from __future__ import annotations

import csv
import math
import json
import tempfile
import tomllib
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli_helpers import cli, refused, write
from netcore.api import simulate
from netcore.schedule import COMPUTE, DELAY, TRANSFER, Schedule

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
LEAF_SPINE = """
[topology]
kind = "leaf_spine"
leaves = 2
hosts_per_leaf = 3
spines = 2
link_gbps = 100
latency_us = 1.0
"""
TWO_TIER = """
[topology]
kind = "two_tier"
nodes = 2
gpus_per_node = 4
"""
LEAF_SPINE8 = LEAF_SPINE.replace("hosts_per_leaf = 3", "hosts_per_leaf = 4")
TORUS = """
[topology]
kind = "torus"
dims = [2, 3]
"""
SHORTEST = """
[routing]
policy = "shortest"
"""


# =========================================================================== helpers
def _run(capsys, tmp_path, text: str, name: str):
    """(summary, sorted transfer rows) of `netcosim run` on ``text``."""
    rc, _, err = cli(capsys, "run", write(tmp_path, text, f"{name}.toml"), "--out",
                     tmp_path / name)
    assert rc == 0, err
    summary = json.loads((tmp_path / name / "summary.json").read_text())
    with open(tmp_path / name / "flows.csv", newline="") as f:
        # what a transfer is, without the node id and label (the trace numbers and names
        # its nodes its own way)
        rows = sorted((r["src"], r["dst"], r["bytes"], r["start_us"], r["end_us"], r["path"])
                      for r in csv.DictReader(f))
    return summary, rows


def _exported_run(capsys, tmp_path, fabric: str, workload: str, p2p: str):
    """Export fabric + workload as a Chakra trace, run it back with ``p2p``."""
    src = write(tmp_path, fabric + workload, "orig.toml")
    trace = tmp_path / "trace"
    if not trace.exists():
        rc, _, err = cli(capsys, "export", src, "--chakra", trace)
        assert rc == 0, err
    back = fabric + f'[workload]\nkind = "chakra"\npath = "trace"\np2p = "{p2p}"\n'
    return _run(capsys, tmp_path, back, f"back_{p2p}")


# =========================================================================== export round trip
ROUND_TRIP = {
    # a flow with an earliest start: the writer dropped start_us (94.05 us ran as 90.55 us)
    "flows_start": (LEAF_SPINE + SHORTEST, """[workload]
kind = "flows"
flows = [{src = 0, dst = 4, bytes = 100000, start_us = 50},
         {src = 4, dst = 1, bytes = 1000, deps = [0]},
         {src = 2, dst = 5, bytes = "1MiB", start_us = "3.5us"}]
"""),
    # a flow waiting for one between other hosts: Chakra's data_deps stay in one rank's file,
    # and the writer dropped such edges (the second flow ran from 0)
    "flows_cross_rank": (LEAF_SPINE + SHORTEST, """[workload]
kind = "flows"
flows = [{src = 0, dst = 4, bytes = "2MiB"},
         {src = 2, dst = 5, bytes = "1MiB", deps = [0]},
         {src = 1, dst = 3, bytes = 5000, deps = [1]}]
"""),
    # flows hash by their node id under ECMP, a trace's transfers by connection: read back,
    # these three took other spines (898.78 us against 1346.18 us)
    "flows_ecmp": ("seed = 5\n" + LEAF_SPINE, """[workload]
kind = "flows"
flows = [{src = 0, dst = 3, bytes = "8MiB"}, {src = 1, dst = 4, bytes = "8MiB"},
         {src = 2, dst = 5, bytes = "8MiB"}]
"""),
    "ring_chunks": (LEAF_SPINE, """[workload]
kind = "collective"
op = "all_reduce"
algorithm = "ring"
bytes = "3MiB"
chunks = 3
network_detail = "full"
"""),
    "tree_broadcast": (LEAF_SPINE, """[workload]
kind = "collective"
op = "broadcast"
algorithm = "tree"
bytes = "1MiB"
network_detail = "full"
"""),
    "all_to_all": (TORUS, """[workload]
kind = "collective"
op = "all_to_all"
bytes = "1MiB"
network_detail = "full"
"""),
    # a transfer waiting for its receiver's previous step (the receive buffer is free)
    "rhd": (LEAF_SPINE8, """[workload]
kind = "collective"
op = "all_reduce"
algorithm = "recursive_halving_doubling"
protocol = "simple"
step_latency_us = 0
bytes = "1MiB"
network_detail = "full"
"""),
    # compute nodes between the transfers: a pipeline of 2 stages x tensor parallelism 2 (the
    # data-parallel all-reduce waits for a sync node on one rank)
    "training": (TWO_TIER, """[workload]
kind = "training"
gpu = "H100-SXM"
model = { layers = 2, hidden = 256, heads = 4, seq = 128, vocab = 1000 }
network_detail = "full"
[workload.parallel]
tp = 2
pp = 2
micro_batch = 1
global_batch = 4
"""),
    # LL's per-step latency on the receiver waits for the sender's throughput-cap delay: the
    # writer dropped those edges and the read-back all-reduce ran 57 % faster (60.33 us
    # against 141.39 us)
    "ll_tree": (TWO_TIER, """[workload]
kind = "collective"
op = "all_reduce"
algorithm = "double_binary_tree"
protocol = "ll"
bytes = "1MiB"
network_detail = "full"
"""),
}


@pytest.mark.parametrize("case", sorted(ROUND_TRIP))
@pytest.mark.parametrize("p2p", ["rendezvous", "eager"])
def test_export_then_import_is_bit_exact(capsys, tmp_path, case, p2p):
    fabric, workload = ROUND_TRIP[case]
    want, want_rows = _run(capsys, tmp_path, fabric + workload, "orig")
    got, got_rows = _exported_run(capsys, tmp_path, fabric, workload, p2p)
    assert got["makespan_us"] == want["makespan_us"]
    assert (got["transfers"], got["bytes"]) == (want["transfers"], want["bytes"])
    assert got_rows == want_rows


# =========================================================================== random schedules
MESH_HOSTS = 6


def _fabric(name: str):
    from topo.builders import build, leaf_spine

    if name == "leaf_spine":  # shared links, two paths per leaf pair
        return leaf_spine(2, 3, 2, link_gbps=100, latency_us=1.0)
    # every pair of hosts joined by its own link: with at most one transfer per ordered pair a
    # transfer's time does not depend on what else runs (no contention)
    links = [[u, v, 100, 1.0] for u in range(MESH_HOSTS) for v in range(u + 1, MESH_HOSTS)]
    return build("custom", {"hosts": MESH_HOSTS, "links": links})


FABRIC = {name: _fabric(name) for name in ("leaf_spine", "mesh")}


@st.composite
def schedules(draw, distinct_pairs: bool = False):
    """A random DAG of transfers, computes and delays over 6 hosts, with earliest starts and
    parents anywhere earlier (so edges between nodes with no host in common too), its
    transfers hashed by connection (as collectives) or by node id (as flows).
    ``distinct_pairs``: no two transfers share an ordered host pair (on the mesh, no
    contention)."""
    pairs = [(a, b) for a in range(MESH_HOSTS) for b in range(MESH_HOSTS) if a != b]
    pairs = draw(st.permutations(pairs)) if distinct_pairs else pairs
    n = draw(st.integers(1, 12))
    kind, src, dst, size, dur, start, deps = [], [], [], [], [], [], []
    for i in range(n):
        k = draw(st.sampled_from([TRANSFER, TRANSFER, COMPUTE, DELAY]))
        if k == TRANSFER:
            a, b = pairs[i] if distinct_pairs else draw(st.sampled_from(pairs))
        else:
            a, b = draw(st.integers(0, MESH_HOSTS - 1)), -1
        kind.append(k)
        src.append(a)
        dst.append(b)
        size.append(draw(st.sampled_from([0, 1000, 1 << 16, 3 << 20])) if k == TRANSFER else 0)
        dur.append(0.0 if k == TRANSFER else draw(st.sampled_from([0.0, 1e-6, 2.5e-5, 1.3e-4])))
        start.append(draw(st.sampled_from([0.0, 0.0, 0.0, 7e-6, 3.1e-5])))
        deps.append(sorted(draw(st.sets(st.integers(0, i - 1), max_size=3))) if i else [])
    s = Schedule(kind=np.array(kind), src=np.array(src), dst=np.array(dst),
                 size=np.array(size), duration=np.array(dur), start=np.array(start),
                 dep_ptr=np.concatenate([[0], np.cumsum([len(d) for d in deps])]),
                 dep_idx=np.array([p for d in deps for p in d], dtype=np.int64))
    return s.with_connections() if draw(st.booleans()) else s


def _read_back(s: Schedule, topo, tmp_dir) -> dict:
    from netcosim.interop.chakra_to_schedule import load_schedule
    from netcosim.interop.chakra_writer import write_schedule

    d = tempfile.mkdtemp(dir=tmp_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # cross-rank edges are counted in a warning
        write_schedule(s, d)
        return {p2p: load_schedule(d, topo, p2p=p2p) for p2p in ("rendezvous", "eager")}


def _transfer_ancestors(s: Schedule) -> dict:
    """transfer -> the transfers it waits for, through any chain of nodes, by original index
    (a read-back transfer's comm_tag, its tag, is its index in the schedule written)."""
    anc = [set() for _ in range(s.n)]
    for i in s.topological_order():
        for p in s.deps_of(i):
            anc[i] |= anc[p]
            if s.kind[p] == TRANSFER:
                anc[i].add(int(s.tag[p]))
    return {int(s.tag[i]): anc[i] for i in np.flatnonzero(s.kind == TRANSFER)}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schedules(), st.sampled_from(sorted(FABRIC)))
def test_any_schedule_written_and_read_back(tmp_path_factory, s, fab):
    """Read back under either p2p semantics, a written schedule is itself: the same transfers,
    each waiting for the same transfers, and on the flow engine the same start and end of
    every transfer, bit for bit. (Eager reading let a transfer start before a node only on its
    receiver: a training step's data-parallel all-reduce before the backward pass.)"""
    topo = FABRIC[fab]
    s.tag = np.arange(s.n)
    want = simulate(topo, s, "ecmp")
    t = np.flatnonzero(s.kind == TRANSFER)
    anc = _transfer_ancestors(s)
    for p2p, b in _read_back(s, topo, tmp_path_factory.mktemp("rt")).items():
        bt = np.flatnonzero(b.kind == TRANSFER)
        orig = b.tag[bt]
        assert sorted(orig.tolist()) == t.tolist()
        for col in ("src", "dst", "size"):
            assert (getattr(b, col)[bt] == getattr(s, col)[orig]).all(), col
        assert _transfer_ancestors(b) == anc, p2p
        r = simulate(topo, b, "ecmp")
        assert r.makespan == want.makespan, p2p
        assert (r.start[bt] == want.start[orig]).all() and (r.end[bt] == want.end[orig]).all()


# On the mesh at 2^33 bytes/s with 2^-20 s links, sizes in 2^14 bytes and durations in 2^-20 s,
# every time is a short binary fraction: no rounding, so order relations hold exactly.
DYADIC = 2.0**-20
DYADIC_MESH = None


def _dyadic_mesh():
    from topo.builders import build

    global DYADIC_MESH
    if DYADIC_MESH is None:
        gbps = 2**33 * 8 / 1e9  # 2^33 bytes/s
        lat_us = DYADIC * 1e6  # 0.95367431640625 us = 2^-20 s, exactly
        DYADIC_MESH = build("custom", {"hosts": MESH_HOSTS, "links": [
            [u, v, gbps, lat_us] for u in range(MESH_HOSTS) for v in range(u + 1, MESH_HOSTS)]})
        assert DYADIC_MESH.link_bw[0] == 2.0**33 and DYADIC_MESH.link_lat[0] == DYADIC
    return DYADIC_MESH


def _dyadic(s: Schedule) -> Schedule:
    s = s.copy()
    s.size = (s.size >> 6) << 14  # 0, 1000, 2^16, 3 MiB -> multiples of 2^14
    s.duration = np.round(s.duration / 1e-6) * DYADIC
    s.start = np.round(s.start / 1e-6) * DYADIC
    return s


def _foreign(src_dir, out_dir):
    """The trace as a tool other than netcosim writes it: without netcosim's attributes."""
    from netcosim.interop import chakra_pb2 as pb
    from netcosim.interop.chakra_reader import frame, read_trace

    out_dir.mkdir()
    for t in read_trace(src_dir):
        nodes = []
        for n in t.nodes:
            m = pb.Node()
            m.CopyFrom(n)
            keep = [a for a in m.attr if not a.name.startswith("netcosim_")]
            del m.attr[:]
            m.attr.extend(keep)
            nodes.append(m)
        (out_dir / f"x.{t.rank}.et").write_bytes(frame([t.metadata] + nodes))


def _receiver_only_waits(s: Schedule) -> int:
    """Edges "transfer i waits for p" with p on i's receiver, not its sender, or on neither:
    what a trace without netcosim's attributes cannot make the transfer itself wait for under
    eager semantics (docs/interop.md)."""
    def ranks(p):
        return {int(s.src[p]), int(s.dst[p])} if s.kind[p] == TRANSFER else {max(int(s.src[p]), 0)}
    return sum(1 for i in np.flatnonzero(s.kind == TRANSFER) for p in s.deps_of(i)
               if int(s.src[i]) not in ranks(p))


def _by_tag(s: Schedule, x: np.ndarray) -> np.ndarray:
    t = np.flatnonzero(s.kind == TRANSFER)
    return x[t][np.argsort(s.tag[t])]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schedules(distinct_pairs=True), st.data())
def test_contention_free_relations(tmp_path_factory, s, data):
    """Where no transfer shares a link with another (the mesh, every ordered pair at most
    once) and no time is rounded, a trace's times are longest paths, so:
    * eager never ends a transfer later than rendezvous on a trace without netcosim's
      attributes (eager drops waits, never adds one), and equals it with no receiver-only
      waits;
    * a written schedule with one more dependency never reads back shorter;
    * one transfer split into two halves, the second waiting for the first, never shorter;
    * every compute and delay of the trace at 0 s (its start delays too) gives the makespan
      of the transfers alone, each waiting for the transfers its compute chain waited for."""
    from netcosim.interop.chakra_to_schedule import load_schedule
    from netcosim.interop.chakra_writer import write_schedule

    topo = _dyadic_mesh()
    s = _dyadic(s)
    s.tag = np.arange(s.n)
    d = tmp_path_factory.mktemp("mesh")

    def makespan(x: Schedule, p2p="eager", name=None) -> float:
        name = name or f"s{len(list(d.iterdir()))}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            write_schedule(x, d / name)
            return simulate(topo, load_schedule(d / name, topo, p2p=p2p), "shortest").makespan

    base = makespan(s, name="base")
    _foreign(d / "base", d / "foreign")
    sched = {p: load_schedule(d / "foreign", topo, p2p=p) for p in ("eager", "rendezvous")}
    res = {p: simulate(topo, x, "shortest") for p, x in sched.items()}
    ends = {p: _by_tag(sched[p], res[p].end) for p in res}
    assert (ends["eager"] <= ends["rendezvous"]).all()
    if _receiver_only_waits(s) == 0:
        assert (ends["eager"] == ends["rendezvous"]).all()

    deps = [s.deps_of(i).tolist() for i in range(s.n)]

    def rebuilt(deps, **cols) -> Schedule:
        c = {k: getattr(s, k) for k in ("kind", "src", "dst", "size", "duration", "start")}
        c.update(cols)
        return Schedule(**c, dep_ptr=np.concatenate([[0], np.cumsum([len(x) for x in deps])]),
                        dep_idx=np.array([p for x in deps for p in x], dtype=np.int64))

    if s.n >= 2:
        c = data.draw(st.integers(1, s.n - 1), label="child")
        p = data.draw(st.integers(0, c - 1), label="parent")
        more = [list(x) for x in deps]
        more[c] = sorted(set(more[c]) | {p})
        assert makespan(rebuilt(more)) >= base

    t = np.flatnonzero(s.kind == TRANSFER)
    if t.size:
        i = int(data.draw(st.sampled_from(t.tolist()), label="split"))
        # node i carries the first half; the second half is a new last node waiting for it,
        # and i's children wait for the second half
        half = int(s.size[i]) // 2
        split = [[s.n if p == i else p for p in x] for x in deps] + [[i]]
        cols = {k: np.append(getattr(s, k), getattr(s, k)[i]) for k in
                ("kind", "src", "dst", "duration", "start")}
        cols["size"] = np.append(s.size, s.size[i] - half)
        cols["size"][i] = half
        assert makespan(rebuilt(split, **cols)) >= base

    # compute and delays at 0 s in the trace, against the transfers alone
    zero = s.copy()
    zero.duration = np.zeros(s.n)
    zero.start = np.zeros(s.n)
    via = [set() for _ in range(s.n)]  # the transfers each node's compute chain waited for
    for j in s.topological_order():
        for p in deps[j]:
            via[j] |= {p} if s.kind[p] == TRANSFER else via[p]
    comm = Schedule.from_transfers(s.src[t], s.dst[t], s.size[t], deps=[
        sorted(int(np.searchsorted(t, p)) for p in via[j]) for j in t])
    for p2p in ("eager", "rendezvous"):
        assert makespan(zero, p2p) == makespan(comm, p2p)


# =========================================================================== malformed traces
def _node(nid, ty, deps=(), **attrs):
    from netcosim.interop import chakra_pb2 as pb

    at = []
    for name, v in attrs.items():
        if isinstance(v, list):
            at.append(pb.AttributeProto(name=name, int64_list=pb.Int64List(values=v)))
        elif isinstance(v, str):
            at.append(pb.AttributeProto(name=name, string_val=v))
        elif isinstance(v, float):
            at.append(pb.AttributeProto(name=name, double_val=v))
        elif v >= 2**63:
            at.append(pb.AttributeProto(name=name, uint64_val=v))
        else:
            at.append(pb.AttributeProto(name=name, int64_val=v))
    return pb.Node(id=nid, name=f"n{nid}", type=getattr(pb, ty) if isinstance(ty, str) else ty,
                   data_deps=list(deps), attr=at, duration_micros=1)


def pb_node(nid, ty, **fields):
    from netcosim.interop import chakra_pb2 as pb

    return pb.Node(id=nid, name=f"n{nid}", type=getattr(pb, ty), **fields)


def _trace_scenario(tmp_path, per_rank: dict, extra: str = ""):
    """A scenario running ``per_rank`` (rank -> nodes) on a 6-host leaf-spine."""
    from netcosim.interop import chakra_pb2 as pb
    from netcosim.interop.chakra_reader import frame

    d = tmp_path / "t"
    d.mkdir()
    for r, nodes in per_rank.items():
        (d / f"x.{r}.et").write_bytes(frame([pb.GlobalMetadata(version="0.0.4")] + nodes))
    return write(tmp_path, LEAF_SPINE + f'[workload]\nkind = "chakra"\npath = "t"\n{extra}')


def _pair(send_attrs: dict, recv_attrs: dict | None = None):
    return {0: [_node(1, "COMM_SEND_NODE", comm_dst=1, **send_attrs)],
            1: [_node(1, "COMM_RECV_NODE", comm_src=0, **(recv_attrs or {}))]}


def test_bad_route_key_is_refused(capsys, tmp_path):
    refused(capsys, "run", _trace_scenario(tmp_path, _pair({"netcosim_route_key": -3})), "--out",
            tmp_path / "o", has=("x.0.et: node id 1", "netcosim_route_key = -3"))


@pytest.mark.parametrize("value, has", [
    ([1], "expected an integer list of (rank, node id) pairs"),
    ("0 1", "(string_val): expected an integer list"),
    ([7, 1], "names rank 7, which has no trace file"),
    ([1, 99], "names node id 99 of rank 1, which is not in"),
    ([0, 1], "depends on itself (netcosim_rank_deps)"),
])
def test_bad_rank_dependencies_are_refused(capsys, tmp_path, value, has):
    per = {0: [_node(1, "COMP_NODE", netcosim_rank_deps=value)], 1: [_node(1, "COMP_NODE")]}
    out = tmp_path / "o"
    refused(capsys, "run", _trace_scenario(tmp_path, per), "--out", out,
            has=("x.0.et: node id 1", "netcosim_rank_deps", has))
    assert not out.exists()


# =========================================================================== relabelled ranks
def _relabel(src_dir, perm, out_dir):
    """The trace with rank r renamed perm[r]: its file and every comm_src/comm_dst naming it."""
    from netcosim.interop import chakra_pb2 as pb
    from netcosim.interop.chakra_reader import frame, read_trace

    out_dir.mkdir()
    for t in read_trace(src_dir):
        nodes = []
        for n in t.nodes:
            m = pb.Node()
            m.CopyFrom(n)
            for a in m.attr:
                if a.name in ("comm_src", "comm_dst"):
                    a.int64_val = perm[a.int64_val]
            nodes.append(m)
        (out_dir / f"x.{perm[t.rank]}.et").write_bytes(frame([t.metadata] + nodes))


def _transfers(s: Schedule, r) -> list:
    t = np.flatnonzero(s.kind == TRANSFER)
    return sorted(zip(s.src[t].tolist(), s.dst[t].tolist(), s.size[t].tolist(),
                      r.start[t].tolist(), r.end[t].tolist()))


COLLECTIVES = [("all_reduce", "ring", 2), ("all_reduce", "double_binary_tree", 1),
               ("all_to_all", "direct", 1), ("all_gather", "ring", 1), ("broadcast", "tree", 2)]


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(COLLECTIVES), st.permutations(range(MESH_HOSTS)),
       st.sampled_from([None, 0, MESH_HOSTS - 1]), st.sampled_from(["eager", "rendezvous"]))
def test_relabelled_ranks_placed_back_run_the_same(tmp_path_factory, case, perm, missing, p2p):
    """Renaming rank r to perm[r] in every file and peer, with rank_hosts putting rank perm[r]
    back on host r, is the same workload on the same hosts: the same transfers at the same
    times, bit for bit, on a fabric that is not symmetric (leaf-spine). Also with one rank's
    file missing (its peers' sends and receives are simulated from their side): a send to it
    goes to the host rank_hosts gives it (it went to the host of its number)."""
    import collectives
    from netcosim.interop.chakra_to_schedule import load_schedule
    from netcosim.interop.chakra_writer import write_schedule

    op, algo, chunks = case
    topo = FABRIC["leaf_spine"]
    d = tmp_path_factory.mktemp("relabel")
    kw = {"chunks": chunks} if chunks > 1 else {}
    write_schedule(collectives.build(op, algo, list(range(MESH_HOSTS)), 6 << 16, **kw),
                   d / "a")
    if missing is not None:
        (d / "a" / f"netcosim.{missing}.et").unlink()
    _relabel(d / "a", perm, d / "b")
    inv = np.argsort(perm).tolist()  # rank perm[r] on host r
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the missing rank's peers are warned about
        a = load_schedule(d / "a", topo, p2p=p2p)
        b = load_schedule(d / "b", topo, p2p=p2p, rank_hosts=inv)
    ra, rb = simulate(topo, a, "ecmp"), simulate(topo, b, "ecmp")
    assert rb.makespan == ra.makespan
    assert _transfers(b, rb) == _transfers(a, ra)


@settings(max_examples=10, deadline=None)
@given(st.sampled_from(COLLECTIVES), st.permutations(range(MESH_HOSTS)))
def test_relabelled_ranks_on_a_symmetric_fabric(tmp_path_factory, case, perm):
    """On hosts that all hang off one switch, any relabelling of the ranks (without rank_hosts)
    leaves the makespan unchanged."""
    import collectives
    from netcosim.interop.chakra_to_schedule import load_schedule
    from netcosim.interop.chakra_writer import write_schedule
    from topo.builders import leaf_spine

    star = leaf_spine(1, MESH_HOSTS, 1, link_gbps=100, latency_us=1.0)
    op, algo, chunks = case
    d = tmp_path_factory.mktemp("star")
    kw = {"chunks": chunks} if chunks > 1 else {}
    write_schedule(collectives.build(op, algo, list(range(MESH_HOSTS)), 6 << 16, **kw),
                   d / "a")
    _relabel(d / "a", perm, d / "b")
    ms = [simulate(star, load_schedule(d / x, star), "ecmp").makespan for x in ("a", "b")]
    assert ms[0] == ms[1]


def test_send_to_a_rank_without_a_file_goes_to_its_rank_hosts_host(capsys, tmp_path):
    """Rank 0 (on host 3) sends to rank 1, whose file is missing; rank_hosts puts rank 1 on
    host 2. The transfer went to host 1."""
    path = _trace_scenario(tmp_path, {0: _pair({"comm_size": 1000})[0]},
                           "rank_hosts = [3, 2]\n")
    rc, _, err = cli(capsys, "run", path, "--out", tmp_path / "o")
    assert rc == 0, err
    with open(tmp_path / "o" / "flows.csv", newline="") as f:
        (row,) = list(csv.DictReader(f))
    assert (row["src"], row["dst"], row["bytes"]) == ("3", "2", "1000")


@pytest.mark.parametrize("send, extra, has", [
    ({"comm_dst": 2}, "rank_hosts = [3, 2]\n",
     "comm_dst = 2: rank 2 has no host in workload.rank_hosts (2 entries)"),
    ({"comm_dst": -1}, "", "comm_dst = -1: expected a rank >= 0"),
    ({"comm_dst": 1}, "rank_hosts = [3, 2, 2]\n", "workload.rank_hosts = [3, 2, 2]: two ranks"),
    ({"comm_dst": 1}, "rank_hosts = [3, 2, 6]\n", "workload.rank_hosts[2] = 6: outside"),
])
def test_peers_and_placements_without_a_host_are_refused(capsys, tmp_path, send, extra, has):
    per = {0: [_node(1, "COMM_SEND_NODE", comm_size=10, **send)]}
    refused(capsys, "run", _trace_scenario(tmp_path, per, extra), "--out", tmp_path / "o",
            has=(has,))
    assert not (tmp_path / "o").exists()


def test_negative_peer_without_a_fabric_is_an_input_error(tmp_path):
    """load_schedule without a topology formatted the fabric's last host from None: a
    TypeError instead of the trace's fault."""
    from netcosim.interop.chakra_to_schedule import load_schedule
    from topo.errors import InputError

    _trace_scenario(tmp_path, {0: [_node(1, "COMM_SEND_NODE", comm_dst=-2, comm_size=10)]})
    with pytest.raises(InputError, match=r"x\.0\.et: node id 1 .*comm_dst = -2: expected a rank"):
        load_schedule(tmp_path / "t")


def _attr_of(kind: str, v):
    from netcosim.interop import chakra_pb2 as pb

    if kind in ("int64_val", "uint64_val", "double_val", "string_val", "bool_val"):
        return pb.AttributeProto(name="comm_size", **{kind: v})
    return pb.AttributeProto(name="comm_size", int64_list=pb.Int64List(values=[v]))


SIZE_VALUES = st.one_of(
    st.tuples(st.just("int64_val"), st.integers(-2**63, 2**63 - 1)),
    st.tuples(st.just("uint64_val"), st.integers(0, 2**64 - 1)),
    st.tuples(st.just("double_val"), st.floats(allow_nan=True, allow_infinity=True)),
    st.tuples(st.just("double_val"), st.integers(0, 2**20).map(float)),
    st.tuples(st.just("string_val"), st.sampled_from(["1000", "1MiB", ""])),
    st.tuples(st.just("bool_val"), st.booleans()),
    st.tuples(st.just("int64_list"), st.integers(0, 10)))


@settings(max_examples=60, deadline=None)
@given(SIZE_VALUES, st.booleans())
def test_any_comm_size_is_carried_exactly_or_refused_naming_it(tmp_path_factory, value, coll):
    """A comm_size that is a whole number of bytes from 0 to 2^63 - 1 moves exactly that many
    (a collective's member that many as nbytes); anything else is an InputError naming the
    node and comm_size. A string, a fraction or a bool was read as an absent comm_size: the
    transfer moved 0 bytes (warned as 'no comm_size'), the collective became a zero-time
    barrier (not even warned)."""
    from netcosim.interop import chakra_pb2 as pb
    from netcosim.interop.chakra_to_schedule import load_schedule
    from topo.errors import InputError

    kind, v = value
    size = _attr_of(kind, v)
    tmp = tmp_path_factory.mktemp("size")
    if coll:
        per = {r: [pb.Node(id=1, type=pb.COMM_COLL_NODE, attr=[
            pb.AttributeProto(name="comm_type", int64_val=pb.ALL_GATHER), size])]
            for r in range(2)}
    else:
        per = {0: [pb.Node(id=1, type=pb.COMM_SEND_NODE, attr=[
            pb.AttributeProto(name="comm_dst", int64_val=1), size])],
            1: [pb.Node(id=1, type=pb.COMM_RECV_NODE, attr=[
                pb.AttributeProto(name="comm_src", int64_val=0)])]}
    _trace_scenario(tmp, per)
    whole = kind in ("int64_val", "uint64_val") or (
        kind == "double_val" and math.isfinite(v) and float(v).is_integer())
    good = whole and 0 <= v < 2**63
    try:
        s = load_schedule(tmp / "t", FABRIC["leaf_spine"])
    except InputError as e:
        assert not good, e
        assert "x.0.et: node id 1" in str(e) and ("comm_size" in str(e) or "nbytes" in str(e))
        return
    assert good
    # an all-gather of nbytes moves (n - 1) / n of it into each of its 2 ranks
    assert s.total_bytes == int(v)


@pytest.mark.parametrize("nodes, has", [
    ([_node(1, 99)], "node type 99 is not a Chakra NodeType"),
    ([_node(1, "COMM_SEND_NODE", comm_dst=1, comm_size=10.5)], "comm_size = 10.5: expected a"),
    ([_node(1, "COMM_SEND_NODE", comm_dst="1", comm_size=10)], "comm_dst = '1': expected a"),
    ([_node(1, "COMM_SEND_NODE", comm_dst=1, comm_size=-5)], "comm_size = -5: expected a"),
    ([_node(1, "COMM_SEND_NODE", comm_dst=1, comm_size=2**63)],
     "comm_size 9223372036854775808 is beyond"),
    ([_node(1, "COMM_COLL_NODE", comm_type=0, comm_size="1MiB")], "comm_size = '1MiB'"),
    ([_node(1, "COMP_NODE"), _node(1, "COMP_NODE")], "duplicate node id"),
    ([_node(1, "COMP_NODE", deps=[7])], "depends on node id 7, which is not in this file"),
    # durations past the engines' clock were refused as "workload: node 0: a duration of ..."
    ([_node(1, "COMP_NODE", duration_s=1e300)], "duration_s = 1e+300: 1e+306 us, beyond"),
    ([pb_node(1, "COMP_NODE", duration_micros=2**64 - 1)],
     "duration_micros = 18446744073709551615: 1.84467e+19 us, beyond the engines' clock"),
    ([pb_node(1, "MEM_LOAD_NODE", duration_micros=2**63)], "duration_micros = 9223372036854775808"),
])
def test_malformed_nodes_exit_2_naming_them(capsys, tmp_path, nodes, has):
    refused(capsys, "run", _trace_scenario(tmp_path, {0: nodes, 1: [_node(1, "COMP_NODE")]}),
            "--out", tmp_path / "o", has=("x.0.et: node id 1", has))
    assert not (tmp_path / "o").exists()


def test_a_priced_operator_past_the_clock_is_refused_naming_it(capsys, tmp_path):
    per = {0: [_node(1, "COMP_NODE", num_ops=1e40, tensor_size=1)]}
    per[0][0].duration_micros = 0
    refused(capsys, "run", _trace_scenario(tmp_path, per, 'gpu = "h100_sxm"\n'), "--out",
            tmp_path / "o", has=("x.0.et: node id 1", "num_ops = 1e+40, tensor_size = 1:",
                                 "beyond the engines' clock"))


# =========================================================================== ASTRA-sim networks
def _spec_links(blocks, npus, gbps, lat_us):
    """docs/interop.md's mapping written out link by link: NPU i has address a with dimension
    0 fastest; dimension d joins the NPUs that differ only in a_d (Ring: j -- j+1, one link for
    2 NPUs; FullyConnected: every pair; Switch: a new switch per group, ids after the NPUs in
    creation order), each link at gbps[d] Gb/s and lat_us[d] us."""
    N = math.prod(npus)
    stride = [math.prod(npus[:d]) for d in range(len(npus))]
    links, nxt = [], N
    for d, (b, n) in enumerate(zip(blocks, npus)):
        for base in (i for i in range(N) if (i // stride[d]) % n == 0):
            m = [base + stride[d] * j for j in range(n)]
            if b == "Ring":
                pairs = [(m[0], m[1])] if n == 2 else [(m[j], m[(j + 1) % n]) for j in range(n)]
            elif b == "FullyConnected":
                pairs = [(m[j], m[k]) for j in range(n) for k in range(j + 1, n)]
            else:
                pairs, nxt = [(x, nxt) for x in m], nxt + 1
            links += [[u, v, gbps[d], lat_us[d]] for u, v in pairs]
    return {"hosts": N, "switches": nxt - N, "links": links,
            "hosts_forward": not (len(blocks) == 1 and blocks[0] != "Ring")}


def _same_fabric(a, b):
    for col in ("link_u", "link_v", "link_bw", "link_lat"):
        assert np.array_equal(getattr(a, col), getattr(b, col)), col
    assert (a.n_hosts, a.n_switches, a.hosts_forward) == (b.n_hosts, b.n_switches,
                                                           b.hosts_forward)


DIMS = st.lists(st.tuples(st.sampled_from(["Ring", "FullyConnected", "Switch"]),
                          st.integers(2, 4), st.sampled_from([12.5, 25, 50, 100, 3.3, 0.75]),
                          st.one_of(st.integers(0, 5000), st.sampled_from([0.5, 2.25, 13.7]))),
                min_size=1, max_size=3)


@settings(max_examples=40, deadline=None)
@given(DIMS)
def test_astra_network_is_its_hand_built_custom_fabric(dims):
    """A network.yml in decimal GB/s and ns is, link for link and bit for bit, the custom
    fabric written by hand from the documented mapping in Gb/s (8 x GB/s) and us (ns / 1000),
    and `--toml`'s table builds it back. Its latencies were ns * 1e-9, which differs from a
    scenario's us by an ulp for 2 integer ns in 3 (500 ns: 5.000000000000001e-07 s against
    latency_us = 0.5's 5e-07)."""
    from netcosim.commands.import_astra import _toml_table
    from netcosim.interop.astra_network import from_dict, to_custom_table
    from topo.builders import build

    blocks, npus, gbs, ns = (list(x) for x in zip(*dims))
    t = from_dict({"topology": blocks, "npus_count": npus, "bandwidth": gbs, "latency": ns},
                  gb="decimal")
    hand = build("custom", _spec_links(blocks, npus, [8 * g for g in gbs],
                                       [x / 1e3 for x in ns]))
    _same_fabric(t, hand)
    table = tomllib.loads(_toml_table(to_custom_table(t)))["topology"]
    _same_fabric(t, build("custom", {k: v for k, v in table.items() if k != "kind"}))
    # binary GB (ASTRA-sim's 2^30 bytes): the same fabric but bandwidth x 2^30 / 10^9, exactly
    b = from_dict({"topology": blocks, "npus_count": npus, "bandwidth": gbs, "latency": ns})
    assert np.array_equal(b.link_lat, t.link_lat)
    assert np.array_equal(b.link_bw, np.asarray(gbs)[b.link_layer] * 2.0**30)


@settings(max_examples=12, deadline=None)
@given(st.lists(st.integers(2, 4), min_size=1, max_size=3),
       st.sampled_from([12.5, 50, 100]), st.integers(0, 2000))
def test_astra_rings_are_the_torus_builders_torus(npus, gbs, ns):
    """Ring dimensions are netcosim's torus with the dimensions reversed (ASTRA-sim numbers
    dimension 0 fastest, the torus builder the last): the same links, coordinates and, with
    dimension-order routing, the same ring all-reduce makespan, bit for bit."""
    import collectives
    from netcosim.interop.astra_network import from_dict
    from topo.builders import build

    a = from_dict({"topology": ["Ring"] * len(npus), "npus_count": npus,
                   "bandwidth": [gbs] * len(npus), "latency": [ns] * len(npus)}, gb="decimal")
    t = build("torus", {"dims": npus[::-1], "link_gbps": 8 * gbs, "latency_us": ns / 1e3})

    def links(x):
        return {(min(u, v), max(u, v)): (b, l) for u, v, b, l in
                zip(x.link_u.tolist(), x.link_v.tolist(), x.link_bw.tolist(),
                    x.link_lat.tolist())}
    assert links(a) == links(t)
    assert np.array_equal(a.coords[:, ::-1], t.coords)
    s = collectives.build("all_reduce", "ring", list(range(a.n_hosts)), 1 << 20)
    assert simulate(a, s, "dor").makespan == simulate(t, s, "dor").makespan


def test_import_astra_json_and_toml_are_one_fabric(capsys, tmp_path):
    """`netcosim import-astra --json --toml` on the documented example (binary GB): the
    scenario table builds the JSON's fabric bit for bit."""
    from topo.builders import build
    from topo.io import load_json

    yml = write(tmp_path, "topology: [ Ring, FullyConnected, Switch ]\nnpus_count: [ 2, 8, 4 ]\n"
                          "bandwidth: [ 200.0, 100.0, 50.0 ]\nlatency: [ 50.0, 500.0, 2000.0 ]\n",
                "network.yml")
    rc, _, err = cli(capsys, "import-astra", yml, "--json", tmp_path / "f.json", "--toml",
                     tmp_path / "f.toml")
    assert rc == 0, err
    table = tomllib.loads((tmp_path / "f.toml").read_text())["topology"]
    _same_fabric(load_json(tmp_path / "f.json"),
                 build("custom", {k: v for k, v in table.items() if k != "kind"}))
    assert table["links"][0][2:] == [1717.9869184, 0.05]  # 200 x 2^30 x 8 / 1e9 Gb/s, 50 ns


NETWORK = "topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ {bw} ]\nlatency: [ {lat} ]\n"


@pytest.mark.parametrize("bw, lat, has", [
    ("1.0e+300", "500", "bandwidth[0] = 1e+300: inf Gb/s, outside the link rates"),
    ("1.0e-300", "500", "bandwidth[0] = 1e-300: 8.58993e-300 Gb/s, outside the link rates"),
    ("100", "1.0e+25", "latency[0] = 1e+25: expected at most 1.153e+15 ns"),
])
def test_astra_rates_and_latencies_beyond_the_engines_are_refused(capsys, tmp_path, bw, lat,
                                                                   has):
    """A bandwidth whose bytes/s overflow (inf: refused as 'links[0]: bandwidth inf Gbps',
    naming neither file nor key) or underflow (1e-300 GB/s ran an all-reduce in 1.5e297 s), or
    a latency beyond the engines' 2^60 ps (accepted, then its --toml table refused): exit 2
    naming the file and key, nothing written."""
    yml = write(tmp_path, NETWORK.format(bw=bw, lat=lat), "network.yml")
    refused(capsys, "import-astra", yml, "--json", tmp_path / "f.json", "--toml",
            tmp_path / "f.toml", has=("network.yml: ", has))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["network.yml"]


@pytest.mark.parametrize("bw, lat, same", [("1e2", "5e2", ("100", "500")),
                                           ("1.0e2", "5.0E+2", ("100.0", "500.0")),
                                           (".125e3", "2.5e-1", ("125", "0.25"))])
def test_astra_numbers_with_an_exponent_are_numbers(tmp_path, bw, lat, same):
    """ASTRA-sim (yaml-cpp) reads 1e2 as 100; PyYAML's YAML 1.1 read it as the string '1e2'
    and the file was refused ('bandwidth[0] = '1e2': expected a number of GB/s > 0')."""
    from netcosim.interop.astra_network import load_network

    a = load_network(write(tmp_path, NETWORK.format(bw=bw, lat=lat), "a.yml"))
    b = load_network(write(tmp_path, NETWORK.format(bw=same[0], lat=same[1]), "b.yml"))
    _same_fabric(a, b)


def test_export_of_a_serving_run_is_refused(capsys, tmp_path):
    """A serving run's Schedule is one delay as long as the served span: exported, it was one
    Chakra file per GPU holding that delay and no transfer (exit 0)."""
    from cli_helpers import SERVE_HEAD

    path = write(tmp_path, SERVE_HEAD + "[workload.requests]\nrate = 10\ncount = 4\n"
                                        "input_tokens = 128\noutput_tokens = 16\n")
    refused(capsys, "export", path, "--chakra", tmp_path / "trace", "--json", tmp_path / "f.json",
            has=("--chakra", "workload.kind = 'inference'", "no Chakra trace"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.toml"]


def test_writing_a_scalable_schedule_is_refused(tmp_path):
    """A scenario's ring all-reduce runs as one stream standing for every transfer
    (network_detail = "auto"); written, each such node became one transfer of its first
    member (128 hosts, 1 MiB: 4,161,536 bytes read back of 532,676,608)."""
    from netcosim.interop.chakra_writer import write_schedule
    from netcosim.scenario import load_scenario
    from topo.errors import InputError

    sc = load_scenario(EXAMPLES / "ring_allreduce_fat_tree.toml", ["workload.bytes=1MiB"])
    topo = sc.build_topology()
    with pytest.raises(InputError, match=r"scalable form \(\d+ transfer nodes standing for "
                                         r"[\d,]+ transfers\); build it with network_detail"):
        write_schedule(sc.build_schedule(topo), tmp_path / "t")
    assert not (tmp_path / "t").exists()
    full = sc.with_full_detail().build_schedule(topo)
    write_schedule(full, tmp_path / "t")
    assert len(list((tmp_path / "t").iterdir())) == topo.n_hosts


@pytest.mark.parametrize("op, alg", [("all_reduce", "nvls"), ("all_reduce", "sharp"),
                                     ("all_reduce", "hierarchical"), ("all_reduce", "torus"),
                                     ("all_gather", "nvls"), ("all_to_all", "hierarchical")])
def test_trace_algorithms_that_need_the_fabric_are_refused_up_front(capsys, tmp_path, op, alg):
    """They failed on the trace's first collective with the library's API advice ("fabric =
    None: ... (collectives.build(..., fabric=topology))") a scenario cannot follow."""
    per = {r: [_node(1, "COMM_COLL_NODE", comm_type=0, comm_size=4096)] for r in range(2)}
    path = _trace_scenario(tmp_path, per, f'algorithms = {{ {op} = "{alg}" }}\n')
    line = refused(capsys, "run", path, "--out", tmp_path / "o",
                   has=(f"workload.algorithms.{op} = '{alg}': not available for a trace's "
                        f"collectives", "use one of"))
    assert "collectives.build" not in line and alg not in line.split("use one of")[1]


@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # capsys: read per run
@given(st.permutations(range(MESH_HOSTS)), st.sets(st.integers(0, MESH_HOSTS - 1), min_size=2),
       st.sampled_from([(0, "all_reduce", "ring"), (0, "all_reduce", "double_binary_tree"),
                        (2, "all_gather", "ring"), (6, "all_to_all", "direct")]))
def test_trace_collective_is_the_scenario_collective(capsys, tmp_path_factory, hosts, members,
                                                     case):
    """A COMM_COLL_NODE over comm_groups' members, placed by rank_hosts, runs the collective
    scenario over those hosts (in rank order) without protocol costs, bit for bit."""
    from netcosim.interop import chakra_pb2 as pb

    ctype, op, alg = case
    tmp = tmp_path_factory.mktemp("coll")
    per = {r: [_node(1, "COMM_COLL_NODE", comm_type=ctype, comm_size=3 << 18, pg_name="g")]
           if r in members else [_node(1, "COMP_NODE")] for r in range(MESH_HOSTS)}
    assert pb.CollectiveCommType.Name(ctype).lower() == op
    ranks = [hosts[r] for r in sorted(members)]
    path = _trace_scenario(tmp, per, f'comm_groups = {{ g = {sorted(members)} }}\n'
                                     f'rank_hosts = {list(hosts)}\n'
                                     f'algorithms = {{ {op} = "{alg}" }}\n')
    got, _ = _run(capsys, tmp, path.read_text(), "trace")
    want, _ = _run(capsys, tmp, LEAF_SPINE + f'''[workload]
kind = "collective"
op = "{op}"
algorithm = "{alg}"
bytes = {3 << 18}
ranks = {ranks}
protocol = "simple"
step_latency_us = 0
chunks = 1
network_detail = "full"
''', "collective")
    assert got["makespan_us"] == want["makespan_us"]
    assert (got["transfers"], got["bytes"]) == (want["transfers"], want["bytes"])
