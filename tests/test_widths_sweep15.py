"""Integer widths, unit overflows and float precision at scale (audit sweep 15): a number
that does not fit is computed exactly or refused with an InputError, never wrapped."""
import numpy as np
import pytest

from topo.errors import InputError


# ---------------------------------------------------------------- protocol wire bytes
@pytest.mark.parametrize("name", ["ll", "ll128"])
def test_wire_bytes_exact_near_int64(name):
    from collectives.protocols import PROTOCOLS

    p = PROTOCOLS[name]
    limit = ((2**63 - 1) * p.num) // p.den  # the largest payload whose wire bytes fit
    for x in (0, 1, 14, 15, 2**31 + 1, 2**53 + 1, 2**59, 2**60, limit - 1, limit):
        if x > limit:
            continue
        assert p.wire_bytes(x) == -(-x * p.den // p.num), x
    arr = p.wire_bytes(np.array([1, 2**40 + 3, limit]))
    assert arr.dtype == np.int64 and arr.tolist() == [-(-x * p.den // p.num)
                                                      for x in (1, 2**40 + 3, limit)]
    with pytest.raises(InputError, match="bytes.*int64"):
        p.wire_bytes(limit + 1)


def test_ll128_send_of_2_61_bytes_is_not_zero_on_the_wire():
    """``payload * 16`` wrapped: a 2**61-byte LL128 send became a transfer of 0 bytes."""
    import collectives

    s = collectives.build("send_recv", "direct", [0, 1], 2**61, protocol="ll128")
    t = s.kind == 0
    assert s.size[t].tolist() == [-(-(2**61) * 16 // 15)]
    with pytest.raises(InputError, match="bytes"):
        collectives.build("send_recv", "direct", [0, 1], 2**62 + 2**61, protocol="ll")


@pytest.mark.parametrize("algo,kw", [("hierarchical", {"group_size": 4}),
                                     ("torus", {"dims": (4, 4)})])
def test_composed_phases_exact_past_int64_sums(algo, kw):
    """A 2**62-byte LL128 hierarchical / torus all-reduce in stream form: the intra phases
    carried 0 bytes (block wire bytes and ring sums wrapped)."""
    from collectives.protocols import costs
    from collectives.streams import composed_phases

    B = 2**62
    w = lambda x: -(-x * 16 // 15)  # noqa: E731
    ph = composed_phases(algo, list(range(16)), B, costs("ll128"), **kw)
    got = [(p.label, sorted(set(p.nbytes.tolist()))) for p in ph]
    if algo == "hierarchical":
        want = [("intra_reduce_scatter", [3 * w(B // 4)]),
                ("inter_all_reduce", [6 * w(B // 16)]),
                ("intra_all_gather", [3 * w(B // 4)])]
    else:
        want = [("dim0_reduce_scatter", [3 * w(B // 4)]), ("dim1_reduce_scatter", [3 * w(B // 16)]),
                ("dim1_all_gather", [3 * w(B // 16)]), ("dim0_all_gather", [3 * w(B // 4)])]
    assert got == want
    assert all(int(p.short.max()) == 0 for p in ph)
    # and where int64 suffices, the same numbers as before (2**40 bytes)
    ph = composed_phases(algo, list(range(16)), 2**40, costs("ll128"), **kw)
    assert int(ph[0].nbytes.max()) == 3 * w(2**40 // 4) and ph[0].nbytes.dtype == np.int64


# ---------------------------------------------------------------- inference request lengths
def test_request_lengths_that_would_wrap_are_refused(tmp_path):
    """input + output of 2**62 tokens each wrapped to a negative length, which passed the
    context check (then a 28 GiB allocation); a sampled 1e30 became -2**63 tokens; a trace's
    token counts went through float64 (2**63 - 1 became -2**63)."""
    from netcosim.inference import requests

    base = {"arrival": "poisson", "rate": 10, "count": 4}
    with pytest.raises(InputError, match="input_tokens = 4611686018427387904"):
        requests.sample(dict(base, input_tokens=2**62, output_tokens=2**62), 0, "r")
    with pytest.raises(InputError, match="r.input_tokens: a sampled length of 1e\\+30"):
        requests.sample(dict(base, input_tokens={"dist": "normal", "mean": 1e30, "std": 1},
                             output_tokens=4), 0, "r")
    with pytest.raises(InputError, match="max = 4611686018427387904"):
        requests.sample(dict(base, input_tokens={"dist": "uniform", "min": 1, "max": 2**62},
                             output_tokens=4), 0, "r")
    tr = tmp_path / "t.csv"
    tr.write_text("arrival_s,input_tokens,output_tokens\n0.5,9223372036854775807,4\n")
    with pytest.raises(InputError, match="line 2: input_tokens = 9223372036854775807"):
        requests.sample({"arrival": "trace", "trace": str(tr)}, 0, "r")
    # lengths that fit stay exact integers, in arrival order
    tr.write_text("arrival_s,input_tokens,output_tokens\n0.5,1099511627775,4\n0.25,7,3\n")
    a, i, o, c = requests.sample({"arrival": "trace", "trace": str(tr)}, 0, "r")
    assert a.tolist() == [0.25, 0.5] and i.tolist() == [7, 2**40 - 1] and o.tolist() == [3, 4]
    assert i.dtype == np.int64 and c == 0


# ---------------------------------------------------------------- node ids of fabrics and member sets
def _fabric_dict():
    from topo.builders.custom import custom
    from topo.io import to_dict

    return to_dict(custom(2, 1, [[0, 2, 100.0, 1.0], [1, 2, 100.0, 1.0]]))


@pytest.mark.parametrize("value,msg", [(2**32 + 1, "node 4294967297 does not exist"),
                                       (-(2**32) + 1, "node -4294967295 does not exist"),
                                       (1.5, "node 1.5: expected a whole number"),
                                       (1e30, "node 1e\\+30 does not exist")])
def test_topology_json_node_ids_are_not_wrapped(value, msg):
    """A topology JSON's link to node 2**32 + 1 of a 3-node fabric became a link to node 1
    (int32 cast), node 1.5 became node 1."""
    from topo.io import from_dict
    from topo.topology import TopologyError

    d = _fabric_dict()
    d["links"][1][0] = value
    with pytest.raises(TopologyError, match="links\\[1\\]: " + msg):
        from_dict(d)


def test_topology_narrow_columns_refuse_what_does_not_fit():
    from topo.io import from_dict
    from topo.topology import TopologyError

    d = _fabric_dict()
    t = from_dict(d)
    assert t.link_u.tolist() == [0, 1] and t.link_v.tolist() == [2, 2]
    assert t.link_u.dtype == np.int32 and t.link_layer.dtype == np.int8
    with pytest.raises(TopologyError, match="layer 300"):
        from_dict(dict(d, link_layer=[0, 300]))  # was an OverflowError (internal error)
    with pytest.raises(TopologyError, match="host_group\\[1\\] = 8589934593"):
        from_dict(dict(d, host_group=[0, 2**33 + 1]))


def test_member_set_hosts_beyond_int32_are_refused():
    """A member set's host 2**32 + 1 became host 1 (which exists, so validate passed)."""
    from netcore.members import MemberSets, SetBuilder

    with pytest.raises(InputError, match="dst host 4294967297"):
        MemberSets(np.array([0, 1]), np.array([0]), np.array([2**32 + 1]))
    with pytest.raises(InputError, match="src host -2147483649"):
        SetBuilder().add(np.array([-(2**31) - 1]), np.array([1]))
    ms = MemberSets(np.array([0, 2]), np.array([0, 2**31 - 1]), np.array([1, 0]))
    assert ms.src.dtype == np.int32 and ms.src.tolist() == [0, 2**31 - 1]


# ---------------------------------------------------------------- schedule columns
def test_schedule_kind_and_size_are_not_wrapped():
    """kind 256 became 0 (a transfer) in the int8 cast; a float size of 1e19 became
    -9223372036854775808 and a uint64 2**64 - 1 became -1, refused later as a negative size."""
    from netcore.schedule import Schedule, ScheduleError

    with pytest.raises(ScheduleError, match="kind = 256"):
        Schedule(kind=np.array([256]), src=[0], dst=[1], size=[10], duration=[0.0],
                 start=[0.0], dep_ptr=[0, 0], dep_idx=np.zeros(0, np.int64))
    for bad, text in ((np.array([1e19]), "1e\\+19"), (np.array([np.nan]), "nan"),
                      (np.array([2**64 - 1], dtype=np.uint64), "18446744073709551615")):
        with pytest.raises(ScheduleError, match=f"size = {text}"):
            Schedule.from_transfers([0], [1], bad)
    s = Schedule.from_transfers([0, 0], [1, 1], np.array([2.0**62, 10.0]))
    assert s.size.tolist() == [2**62, 10] and s.size.dtype == np.int64


# ---------------------------------------------------------------- sums of blocks in a transfer
def _sizes_by_label(s):
    out = {}
    for lab, size in zip(s.label[s.kind == 0].tolist(), s.size[s.kind == 0].tolist()):
        out.setdefault(s.labels[lab], set()).add(size)
    return out


def test_hierarchical_all_to_all_leader_bytes_exact_or_refused():
    """16 ranks in groups of 8, 2**62 bytes per rank: the leaders' exchange sums 64 blocks of
    2**58 bytes = 2**64, which wrapped to a transfer of 0 bytes."""
    import collectives

    with pytest.raises(InputError, match="bytes: one transfer .* 18,446,744,073,709,551,616"):
        collectives.build("all_to_all", "hierarchical", list(range(16)), 2**62, group_size=8)
    # 2**60 per rank: 2**62 between leaders, past the check's threshold but exact
    s = collectives.build("all_to_all", "hierarchical", list(range(16)), 2**60, group_size=8)
    got = _sizes_by_label(s)
    assert got["inter_exchange"] == {2**62} and got["intra_direct"] == {2**56}
    assert s.total_bytes == 16 * 7 * 2**56 + 2 * 7 * 2**59 + 2 * 2**62 + 2 * 7 * 2**59


def test_all_to_all_v_matrix_sums_not_wrapped():
    """A 4x4 matrix of 2**62 bytes was refused as 'moves no bytes' (the off-diagonal sum wrapped
    to 0); 1e19 and uint64 2**64 - 1 entries wrapped to negative bytes."""
    import collectives

    with pytest.raises(InputError, match="nbytes\\[0\\]: rank 0 sends 18,446,744"):
        collectives.build("all_to_all_v", "direct", list(range(4)),
                          np.full((4, 4), 2**62, dtype=np.int64))
    M = np.zeros((2, 2))
    M[0, 1] = 1e19
    with pytest.raises(InputError, match="nbytes\\[0\\]\\[1\\] = 1e\\+19: larger than"):
        collectives.build("all_to_all_v", "direct", [0, 1], M)
    M = np.zeros((2, 2), dtype=np.uint64)
    M[1, 0] = 2**64 - 1
    with pytest.raises(InputError, match="nbytes\\[1\\]\\[0\\] = 18446744073709551615"):
        collectives.build("all_to_all_v", "direct", [0, 1], M)
    M = np.array([[0, 2**62], [2**62 + 2**61, 0]], dtype=np.int64)
    s = collectives.build("all_to_all_v", "direct", [0, 1], M)
    assert sorted(s.size[s.kind == 0].tolist()) == [2**62, 2**62 + 2**61]


# ---------------------------------------------------------------- chakra traces
def _chakra(tmp_path, per_rank):
    from netcosim.interop.chakra_reader import frame

    d = tmp_path / "trace"
    d.mkdir()
    for r, msgs in per_rank.items():
        (d / f"x.{r}.et").write_bytes(frame(msgs))
    return d


@pytest.mark.parametrize("attr,value,msg", [
    ("comm_size", {"uint64_val": 2**64 - 1}, "comm_size 18446744073709551615 is beyond"),
    ("comm_size", {"double_val": 1e19}, "comm_size 10000000000000000000 is beyond"),
    ("comm_dst", {"int64_val": 2**32 + 1}, "peer rank 4294967297 is beyond")])
def test_chakra_values_beyond_the_columns_name_the_node(tmp_path, attr, value, msg):
    """comm_size 2**64 - 1 or a peer 2**32 + 1 raised a bare OverflowError from the column
    casts (an internal error, exit 1) instead of the trace's node."""
    import warnings

    from netcosim.interop import chakra_pb2 as pb
    from netcosim.interop.chakra_to_schedule import ChakraMappingError, load_schedule

    gm = pb.GlobalMetadata(version="0.0.4")
    A = lambda name, kw: pb.AttributeProto(name=name, **kw)  # noqa: E731
    attrs = {"comm_size": {"int64_val": 100}, "comm_dst": {"int64_val": 1}, attr: value}
    d = _chakra(tmp_path, {
        0: [gm, pb.Node(id=5, type=pb.COMM_SEND_NODE,
                        attr=[A("comm_dst", attrs["comm_dst"]), A("comm_size", attrs["comm_size"])])],
        1: [gm, pb.Node(id=5, type=pb.COMM_RECV_NODE,
                        attr=[A("comm_src", {"int64_val": 0}), A("comm_size", attrs["comm_size"])])]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ChakraMappingError, match="x.0.et: node id 5: " + msg):
            load_schedule(d)


def test_ll_ring_stream_guard_counts_wire_bytes_not_payload():
    """The stream's int64 guard took num / den for den / num: an LL ring all-reduce of 3 x 2**61
    bytes over 4 ranks passed it and reported 2**61 bytes per connection for 9 x 2**61; 2**62
    reported -2**62."""
    from collectives.streams import ring_stream

    for B in (2**62, 3 * 2**61):
        with pytest.raises(InputError, match=f"bytes = {B}: a ring all_reduce over 4 ranks"):
            ring_stream("all_reduce", "ring", 4, B, 1, 0.0, (1, 2))
    st = ring_stream("all_reduce", "ring", 4, 2**61, 1, 0.0, (1, 2))
    assert st.nbytes == 2 * 3 * 2 * 2**61 // 4  # 2 phases x 3 blocks of 2**59 x 2 wire bytes
    st = ring_stream("all_reduce", "ring", 4, 2**62, 1, 0.0, (15, 16))
    assert st.nbytes == 6 * -(-(2**60) * 16 // 15)


# ---------------------------------------------------------------- incremental engines, sessions
def test_incremental_sizes_beyond_int64_are_refused():
    """A uint64 size of 2**64 - 1 handed to the packet engine's add_transfers wrapped to -1
    bytes and 'finished' in 3 us; Session.send(2**64 - 1) failed later, in run(), with a bare
    OverflowError."""
    from netcore.incremental_input import check_new_transfers
    from netcore.session import Session
    from topo.builders.custom import custom

    with pytest.raises(InputError, match="size = 18446744073709551615: larger than"):
        check_new_transfers(2, 0.0, np.array([0]), np.array([1]),
                            np.array([2**64 - 1], dtype=np.uint64), None)
    src, dst, size, start = check_new_transfers(2, 0.0, np.array([0]), np.array([1]),
                                                np.array([2**63 - 1], dtype=np.uint64), None)
    assert int(size[0]) == 2**63 - 1
    s = Session(custom(2, 0, [[0, 1, 100.0, 1.0]]), engine="flow")
    with pytest.raises(InputError, match="send nbytes = 18446744073709551615"):
        s.send(0, 1, 2**64 - 1)
