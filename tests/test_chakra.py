"""Chakra execution traces: reader, writer, mapping onto a Schedule, bad input, fuzzing.

Every trace here is written by the project itself (chakra_writer or hand-built protobuf
messages with the published Chakra field numbers)."""
from __future__ import annotations

import gzip
import time
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import collectives  # noqa: E402
from netcosim.interop import chakra_pb2 as pb  # noqa: E402
from netcosim.interop.chakra_reader import (ChakraTraceError, frame, parse, read_file,  # noqa: E402
                                            read_trace)
from netcosim.interop.chakra_to_schedule import load_schedule, to_schedule  # noqa: E402
from netcosim.interop.chakra_writer import write_schedule  # noqa: E402
from netcore.schedule import COMPUTE, TRANSFER  # noqa: E402
from topo.errors import InputError  # noqa: E402

GM = pb.GlobalMetadata(version="0.0.4")


def _edges(s, perm=None):
    perm = np.arange(s.n) if perm is None else perm
    return {(int(perm[i]), int(perm[p])) for i in range(s.n) for p in s.deps_of(i)}


def _same_up_to_permutation(orig, back):
    """``back`` holds every transfer of ``orig`` once, tagged with its original index."""
    perm = back.tag
    assert sorted(perm.tolist()) == list(range(orig.n))
    for col in ("kind", "src", "dst", "size"):
        assert (getattr(back, col) == getattr(orig, col)[perm]).all(), col
    assert _edges(back, perm) == _edges(orig)


def _write(tmp_path, per_rank: dict, name="t", gz=False):
    d = tmp_path / name
    d.mkdir()
    for r, msgs in per_rank.items():
        data = frame(msgs)
        (d / f"x.{r}.et{'.gz' if gz else ''}").write_bytes(gzip.compress(data) if gz else data)
    return d


def _attr(name, v):
    if isinstance(v, str):
        return pb.AttributeProto(name=name, string_val=v)
    return pb.AttributeProto(name=name, int64_val=v)


# =========================================================================== round trip
@pytest.mark.parametrize("compress", [False, True])
def test_ring_all_reduce_round_trip_is_exact(tmp_path, compress):
    orig = collectives.ring_all_reduce(list(range(8)), 1 << 20, chunks=2)
    paths = write_schedule(orig, tmp_path / "ring", compress=compress)
    assert len(paths) == 8
    # rendezvous: a transfer waits for the parents of both its send and its receive, as the
    # writer encodes a schedule edge (tests/test_chakra_eager.py covers the eager default)
    back = load_schedule(tmp_path / "ring", p2p="rendezvous")
    assert back.n_transfers == orig.n_transfers == 8 * 2 * 7 * 2
    _same_up_to_permutation(orig, back)


def test_written_files_are_chakra_shaped(tmp_path):
    orig = collectives.ring_all_reduce(list(range(4)), 4096)
    write_schedule(orig, tmp_path / "r")
    t = read_file(tmp_path / "r" / "netcosim.2.et")
    assert t.rank == 2 and t.version == "0.0.4"
    types = {n.type for n in t.nodes}
    assert types == {pb.COMM_SEND_NODE, pb.COMM_RECV_NODE}
    # ids are 0.. in topological order: every dependency points backwards
    ids = [n.id for n in t.nodes]
    assert ids == list(range(len(ids)))
    assert all(d < n.id for n in t.nodes for d in n.data_deps)
    # proto3 does not write id 0: the first node record has no field 1 on the wire
    assert 1 not in [f.number for f, _ in t.nodes[0].ListFields()]


def test_compute_round_trip_keeps_exact_durations(tmp_path):
    from netcore.schedule import ScheduleBuilder

    b = ScheduleBuilder()
    c = b.add_compute([0, 1], [1.25e-7, 3e-3])
    b.add_transfers([0], [1], [1000], parents=(np.array([0, 2]), c))
    b.add_delay([1], [5e-7], parents=np.array([[2]]))
    orig = b.build()
    write_schedule(orig, tmp_path / "c")
    back = load_schedule(tmp_path / "c", p2p="rendezvous")
    assert back.n == 4
    comp = back.kind == COMPUTE
    assert sorted(back.duration[comp].tolist()) == [1.25e-7, 5e-7, 3e-3]
    # the transfer waits for both computes, the delay for the transfer
    t = int(np.flatnonzero(back.kind == TRANSFER)[0])
    assert sorted(back.duration[back.deps_of(t)].tolist()) == [1.25e-7, 3e-3]


def test_writer_warns_about_cross_rank_dependencies(tmp_path):
    from netcore.schedule import Schedule

    s = Schedule.from_transfers([0, 2], [1, 3], [10, 10], deps=[[], [0]])
    with pytest.warns(UserWarning, match="no rank in common"):
        write_schedule(s, tmp_path / "x")


# =========================================================================== mapping
def _coll_trace(n_ranks, nbytes, comp_us=0, pg="0", comm_type=pb.ALL_REDUCE):
    per = {}
    for r in range(n_ranks):
        nodes = [GM]
        nodes.append(pb.Node(id=1, name="fwd", type=pb.COMP_NODE, duration_micros=comp_us))
        nodes.append(pb.Node(id=2, name="ar", type=pb.COMM_COLL_NODE, data_deps=[1],
                             attr=[_attr("comm_type", comm_type), _attr("comm_size", nbytes),
                                   _attr("pg_name", pg)]))
        nodes.append(pb.Node(id=3, name="bwd", type=pb.COMP_NODE, duration_micros=comp_us,
                             data_deps=[2]))
        per[r] = nodes
    return per


def test_collective_node_becomes_the_library_collective(tmp_path):
    d = _write(tmp_path, _coll_trace(4, 1 << 20, comp_us=7))
    s = load_schedule(d)
    ref = collectives.ring_all_reduce([0, 1, 2, 3], 1 << 20)
    assert s.n_transfers == ref.n_transfers
    assert s.total_bytes == ref.total_bytes
    comp = np.flatnonzero(s.kind == COMPUTE)
    assert len(comp) == 8 and np.allclose(s.duration[comp], 7e-6)
    order = s.topological_order()
    pos = np.empty(s.n, int)
    pos[order] = np.arange(s.n)
    t = np.flatnonzero(s.kind == TRANSFER)
    fwd = comp[s.extra["chakra_id"][comp] == 1]
    bwd = comp[s.extra["chakra_id"][comp] == 3]
    assert pos[fwd].max() < pos[t].min() and pos[t].max() < pos[bwd].min()


def test_comm_groups_pick_members_and_refuse_ranks_outside_the_fabric(tmp_path):
    per = _coll_trace(4, 4096, pg="tp")
    d = _write(tmp_path, {0: per[0], 1: per[1]})
    s = to_schedule(read_trace(d), 8, comm_groups={"tp": [0, 1]})
    assert set(s.src[s.kind == TRANSFER].tolist()) == {0, 1}
    with pytest.raises(InputError, match=r"comm_groups\['tp'\]: rank 9 is outside the fabric"):
        to_schedule(read_trace(d), 8, comm_groups={"tp": [0, 9]})
    with pytest.raises(InputError, match="rank 1 is not a member"):
        to_schedule(read_trace(d), 8, comm_groups={"tp": [0, 2]})


def test_trace_ranks_outside_the_fabric_are_refused(tmp_path):
    d = _write(tmp_path, _coll_trace(4, 4096))
    with pytest.raises(InputError, match=r"x\.3\.et: rank 3 runs on host 3, which is outside"):
        to_schedule(read_trace(d), 3)


def test_collectives_that_do_not_line_up_are_refused(tmp_path):
    per = _coll_trace(3, 4096)
    for r in (0, 1):  # a second all-reduce that rank 2 never issues
        per[r].append(pb.Node(id=4, type=pb.COMM_COLL_NODE, data_deps=[3],
                              attr=[_attr("comm_type", pb.ALL_REDUCE), _attr("comm_size", 64),
                                    _attr("pg_name", "0")]))
    d = _write(tmp_path, per)
    with pytest.raises(InputError, match=r"x\.0\.et: node id 4 .*collective #2 on pg_name '0' "
                                         r"has no counterpart on rank 2"):
        load_schedule(d)


def test_unsupported_comm_type_names_the_node(tmp_path):
    d = _write(tmp_path, _coll_trace(2, 4096, comm_type=pb.GATHER))
    with pytest.raises(InputError, match=r"x\.0\.et: node id 2 .*comm_type GATHER"):
        load_schedule(d)


def _p2p(src_attrs, dst_attrs, size=1000):
    return {0: [GM, pb.Node(id=5, type=pb.COMM_SEND_NODE, attr=src_attrs + [_attr("comm_size", size)])],
            1: [GM, pb.Node(id=5, type=pb.COMM_RECV_NODE, attr=dst_attrs + [_attr("comm_size", size)])]}


def test_send_recv_without_peers_are_paired_with_a_warning(tmp_path):
    d = _write(tmp_path, _p2p([], [_attr("comm_src", 0)]))
    with pytest.warns(UserWarning, match="COMM_SEND without comm_dst"):
        s = load_schedule(d)
    t = np.flatnonzero(s.kind == TRANSFER)
    assert len(t) == 1 and (s.src[t[0]], s.dst[t[0]], s.size[t[0]]) == (0, 1, 1000)
    d2 = _write(tmp_path, _p2p([], []), name="t2")
    with pytest.warns(UserWarning, match="without a peer"):
        s = load_schedule(d2)
    assert s.n_transfers == 0


def test_dependency_on_missing_parent_is_an_error_naming_file_and_node(tmp_path):
    per = {0: [GM, pb.Node(id=1, type=pb.COMP_NODE, duration_micros=1, data_deps=[99])]}
    d = _write(tmp_path, per)
    with pytest.raises(InputError, match=r"x\.0\.et: node id 1 \(record 1 at byte \d+\): "
                                         r"depends on node id 99"):
        load_schedule(d)


def test_dependency_on_absent_node_zero_is_a_warning(tmp_path):
    per = {0: [GM, pb.Node(id=1, type=pb.COMP_NODE, duration_micros=1, ctrl_deps=[0])]}
    with pytest.warns(UserWarning, match="node id 0, which is not in the file"):
        s = load_schedule(_write(tmp_path, per))
    assert s.n == 1 and s.dep_idx.size == 0


def test_missing_version_and_missing_metadata_warn(tmp_path):
    node = pb.Node(id=3, type=pb.COMP_NODE, duration_micros=2)
    with pytest.warns(UserWarning, match="no version"):
        t = parse(frame([pb.GlobalMetadata(), node]), "a.0.et")
    assert len(t.nodes) == 1
    with pytest.warns(UserWarning, match="first record is a Node"):
        t = parse(frame([node, node]), "b.0.et")
    assert len(t.nodes) == 2


def test_duplicate_ids_and_cycles_are_errors(tmp_path):
    per = {0: [GM, pb.Node(type=pb.COMP_NODE), pb.Node(type=pb.COMP_NODE)]}
    with pytest.raises(InputError, match="duplicate node id"):
        load_schedule(_write(tmp_path, per))
    per = {0: [GM, pb.Node(id=1, type=pb.COMP_NODE, data_deps=[2]),
               pb.Node(id=2, type=pb.COMP_NODE, data_deps=[1])]}
    with pytest.raises(InputError, match=r"x\.0\.et: node id \d: dependency cycle"):
        load_schedule(_write(tmp_path, per, name="cyc"))


# =========================================================================== corrupt files
def test_truncated_file_names_file_and_record(tmp_path):
    orig = collectives.ring_all_reduce(list(range(4)), 4096)
    write_schedule(orig, tmp_path / "r")
    f = tmp_path / "r" / "netcosim.1.et"
    data = f.read_bytes()
    f.write_bytes(data[:-3])
    with pytest.raises(InputError, match=r"netcosim\.1\.et: record \d+ at byte \d+: length "
                                         r"prefix claims \d+ bytes but only \d+ remain"):
        read_trace(tmp_path / "r")


def test_huge_length_prefix_neither_allocates_nor_hangs():
    huge = 10 ** 12
    prefix = bytearray()
    n = huge
    while n > 127:
        prefix.append((n & 0x7F) | 0x80)
        n >>= 7
    prefix.append(n)
    t0 = time.perf_counter()
    with pytest.raises(InputError, match=f"claims {huge} bytes"):
        parse(frame([GM]) + bytes(prefix) + b"\x08\x01", "big.0.et")
    with pytest.raises(InputError, match="not a valid varint"):
        parse(b"\xff" * 64, "v.0.et")
    assert time.perf_counter() - t0 < 60  # a hang guard: nothing is read or allocated for the claimed size


def test_corrupt_gzip_and_bad_protobuf(tmp_path):
    good = gzip.compress(frame([GM, pb.Node(id=1, type=pb.COMP_NODE)]))
    f = tmp_path / "g.0.et.gz"
    f.write_bytes(good[: len(good) // 2])
    with pytest.raises(InputError, match=r"g\.0\.et\.gz: .*(truncated|corrupt)"):
        read_file(f)
    f.write_bytes(good[:10] + b"\x00" * 20 + good[30:])
    with pytest.raises(InputError, match=r"g\.0\.et\.gz"):
        read_file(f)
    # a record whose bytes are not a Node (a length-delimited field running past its end)
    with pytest.raises(InputError, match=r"record 1 at byte \d+ \(Node\): not a valid"):
        parse(frame([GM, b"\x12\x05ab"]), "p.0.et")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_fuzz_random_bytes_only_raise_input_error(data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            t = parse(data, "fuzz.0.et")
        except InputError:
            return
        try:
            to_schedule([t])
        except InputError:
            pass


_VALID = None


def _valid_bytes():
    global _VALID
    if _VALID is None:
        import tempfile
        from pathlib import Path

        d = Path(tempfile.mkdtemp())
        write_schedule(collectives.ring_all_reduce(list(range(3)), 999), d)
        _VALID = (d / "netcosim.1.et").read_bytes()
    return _VALID


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_fuzz_truncation_and_bit_flips_only_raise_input_error(data):
    raw = _valid_bytes()
    cut = data.draw(st.integers(0, len(raw)))
    buf = bytearray(raw[:cut])
    if buf and data.draw(st.booleans()):
        pos = data.draw(st.integers(0, len(buf) - 1))
        buf[pos] ^= 1 << data.draw(st.integers(0, 7))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            t = parse(bytes(buf), "cut.1.et")
        except InputError:
            return
        try:
            to_schedule([t])
        except InputError:
            pass


# =========================================================================== end to end
def _fabric():
    from topo.builders import leaf_spine

    return leaf_spine(2, 4, 2, link_gbps=100, latency_us=1.0)


def test_chakra_ring_and_library_ring_give_the_same_makespan(tmp_path):
    from netcore.api import simulate

    topo = _fabric()
    ref = collectives.ring_all_reduce(list(range(8)), 8 << 20)
    write_schedule(ref, tmp_path / "ring")
    p2p = load_schedule(tmp_path / "ring", topo)
    coll = load_schedule(_write(tmp_path, _coll_trace(8, 8 << 20)), topo)
    t_ref = simulate(topo, ref, "ecmp").makespan
    assert t_ref >= 2 * 7 / 8 * (8 << 20) / 12.5e9  # ring bound 2(n-1)/n S/B on 100 Gbps
    assert simulate(topo, p2p, "ecmp").makespan == pytest.approx(t_ref, rel=1e-12)
    assert simulate(topo, coll, "ecmp").makespan == pytest.approx(t_ref, rel=1e-12)


def test_compute_around_a_collective_adds_up(tmp_path):
    from netcore.api import simulate

    topo = _fabric()
    base = simulate(topo, load_schedule(_write(tmp_path, _coll_trace(8, 1 << 20)), topo),
                    "ecmp").makespan
    s = load_schedule(_write(tmp_path, _coll_trace(8, 1 << 20, comp_us=30), name="c"), topo)
    assert simulate(topo, s, "ecmp").makespan == pytest.approx(base + 60e-6, rel=1e-12)


def test_example_scenario_matches_the_collective_scenario():
    from pathlib import Path

    from netcore.api import simulate
    from netcosim.scenario import load_scenario, read_file, Scenario

    path = Path(__file__).resolve().parents[1] / "examples" / "chakra_ring.toml"
    sc = load_scenario(path)
    p = sc.prepare()
    t_chakra = simulate(p.topology, p.schedule, p.routing, p.faults, engine="flow").makespan
    data = read_file(path)
    # a trace's collectives carry no NCCL protocol costs: the bare collective scenario
    data["workload"] = {"kind": "collective", "op": "all_reduce", "algorithm": "ring",
                        "bytes": "64MiB", "protocol": "simple", "step_latency_us": 0}
    q = Scenario.from_dict(data, str(path)).prepare()
    t_coll = simulate(q.topology, q.schedule, q.routing, q.faults, engine="flow").makespan
    assert t_chakra == pytest.approx(t_coll, rel=1e-12)
    assert p.schedule.n_transfers == 8 * 2 * 7


def test_scenario_paths_are_relative_to_the_scenario_file(tmp_path, monkeypatch):
    from netcosim.scenario import load_scenario

    d = _write(tmp_path, _coll_trace(4, 4096, pg="dp"), name="trace")
    scen = tmp_path / "s.toml"
    scen.write_text('[topology]\nkind = "leaf_spine"\nleaves = 2\nhosts_per_leaf = 4\n'
                    'spines = 2\n[workload]\nkind = "chakra"\npath = "trace"\n')
    monkeypatch.chdir("/")
    # comm_groups.json next to the trace files is read (ASTRA-sim's communicator-group file)
    (d / "comm_groups.json").write_text('{"dp": [0, 1, 2]}')
    with pytest.raises(InputError, match=r"x\.3\.et: node id 2 .*rank 3 is not a member"):
        load_scenario(scen).prepare(check_engine=False)
    (d / "comm_groups.json").write_text('{"dp": [0, 1, 2, 3, 5]}')  # rank 5 has no trace
    with pytest.raises(InputError, match=r"comm_groups\['dp'\]: rank 5 has no trace file"):
        load_scenario(scen).prepare(check_engine=False)
    (d / "comm_groups.json").write_text('{"dp": [0, 1, 2, 3]}')
    p = load_scenario(scen).prepare(check_engine=False)
    assert p.schedule.n_transfers == collectives.ring_all_reduce([0, 1, 2, 3], 4096).n_transfers
    scen.write_text(scen.read_text().replace('"trace"', '"nowhere"'))
    with pytest.raises(InputError, match=r"workload\.path = 'nowhere'"):
        load_scenario(scen).prepare(check_engine=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.one_of(st.none(), st.integers(0, 2)),
                          st.one_of(st.none(), st.integers(0, 1))), max_size=12),
       st.lists(st.tuples(st.integers(0, 2), st.one_of(st.none(), st.integers(0, 2)),
                          st.one_of(st.none(), st.integers(0, 1))), max_size=12))
def test_peerless_fallback_queues_pair_like_the_first_match_scan(sends, recvs):
    """The per-rank queues pick, for every record without a peer, the first open partner that
    names its rank with a compatible tag: the same pairs as the quadratic scan they replace."""
    from netcosim.interop.chakra_to_schedule import _first_open

    S = [(r, 0, 0, peer, tag, 1) for r, peer, tag in sends]
    R = [(r, 0, 0, peer, tag, 1) for r, peer, tag in recvs]

    def scan(lost, lu, other, ou):
        out = []
        for j, rec in enumerate(lost):
            if lu[j] or rec[3] is not None:
                continue
            c = [i for i, o in enumerate(other) if not ou[i] and o[3] == rec[0]
                 and (rec[4] is None or o[4] is None or o[4] == rec[4])]
            if c:
                ou[c[0]] = lu[j] = True
                out.append((j, c[0]))
        return out

    su, ru = [False] * len(S), [False] * len(R)
    want = scan(R, ru, S, su) + scan(S, su, R, ru)
    su, ru = [False] * len(S), [False] * len(R)
    got = list(_first_open(R, ru, S, su)) + list(_first_open(S, su, R, ru))
    assert got == want
