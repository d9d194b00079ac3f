"""Messages, round 2: a refusal names what the user gave (or that a default was taken) and
offers only what works. Each test failed before its fix."""
from __future__ import annotations

import os

import numpy as np
import pytest

from cli_helpers import FLOWS_BASE, cli, refused, write
from netcosim import memory_guard
from topo.errors import InputError

# 16,384 GPUs on 2,048 two_tier nodes, an all-to-all with no algorithm given: the automatic
# choice is the rail-aligned hierarchical all-to-all, priced rank pair by rank pair
A2A_16K = """
[topology]
kind = "two_tier"
nodes = 2048
gpus_per_node = 8
[workload]
kind = "collective"
op = "all_to_all"
bytes = "1MiB"
"""
# a 1 GiB ring all-reduce over 512 GPUs: 4,186,112 transfers in full (one ring per rail)
RING_512 = """
[topology]
kind = "two_tier"
nodes = 64
gpus_per_node = 8
[workload]
kind = "collective"
op = "all_reduce"
algorithm = "ring"
bytes = "1GiB"
"""


def _pairs_limit(monkeypatch, pairs=1000):
    import collectives.analytical as an

    monkeypatch.setattr(an, "MAX_PAIRS", pairs)


# --------------------------------------------------------- 1. the all-to-all nobody named
def test_all_to_all_over_16k_ranks_names_the_automatic_choice(tmp_path, capsys, monkeypatch):
    """It said "workload.algorithm = 'hierarchical': ...; use fewer ranks or a ring/tree
    algorithm": an algorithm the user never wrote, and remedies an all-to-all has not."""
    monkeypatch.setenv(memory_guard.BUDGET_ENV, "64GiB")
    line = refused(capsys, "validate", write(tmp_path, A2A_16K),
                   has=("workload.algorithm: not given, so it is chosen by the analytical "
                        "estimate", "16,384 ranks has 268,419,072 rank pairs",
                        "give workload.algorithm = 'hierarchical' and workload.protocol "
                        "(ll, ll128 or simple)"))
    assert "algorithm = 'hierarchical':" not in line
    assert "ring" not in line and "tree" not in line and "network_detail" not in line


def test_all_to_all_that_fits_in_no_form_names_the_op(tmp_path, capsys, monkeypatch):
    """Where not even the smallest all-to-all fits, that is the refusal (on the op)."""
    monkeypatch.setenv(memory_guard.BUDGET_ENV, "4GiB")
    line = refused(capsys, "validate", write(tmp_path, A2A_16K),
                   has=("workload.op = 'all_to_all': over 16,384 ranks its smallest full "
                        "schedule (hierarchical) is 4,364,260 transfers", "use fewer ranks"))
    assert "'hierarchical':" not in line and "ring" not in line


def test_the_offered_algorithm_and_protocol_run(tmp_path, capsys, monkeypatch):
    """What the refusal offers validates; before, it offered a ring/tree algorithm."""
    _pairs_limit(monkeypatch)
    base = FLOWS_BASE.replace("k = 4", "k = 8").replace(
        'kind = "flows"\nflows = [{src = 0, dst = 5, bytes = 100000}]',
        'kind = "collective"\nop = "all_to_all"\nbytes = "64KiB"')
    refused(capsys, "validate", write(tmp_path, base),
            has=("workload.algorithm: not given", "give workload.algorithm = 'direct', "
                 "'pairwise' or 'hierarchical' and workload.protocol (ll, ll128 or simple)"))
    refused(capsys, "validate", write(tmp_path, base + 'algorithm = "direct"\n', "d.toml"),
            has=("workload.protocol: not given, so it is chosen by the analytical estimate",
                 "give workload.protocol (ll, ll128 or simple)"))
    for extra in ('algorithm = "direct"\nprotocol = "simple"\n',
                  'algorithm = "pairwise"\nprotocol = "ll128"\n',
                  'algorithm = "hierarchical"\nprotocol = "ll"\n'):
        rc, out, err = cli(capsys, "validate", write(tmp_path, base + extra, "ok.toml"))
        assert rc == 0, err


def test_collective_command_names_the_flag_that_asked_for_the_estimate(capsys, monkeypatch):
    """`netcosim collective --op all_to_all` (no --algo) said "--algo = 'hierarchical'"."""
    monkeypatch.setenv(memory_guard.BUDGET_ENV, "64GiB")
    topo = ("--topo", "two_tier:nodes=2048,gpus_per_node=8", "--sizes", "1MiB")
    line = refused(capsys, "collective", *topo, "--op", "all_to_all",
                   has=("--engine analytical (the default): the all_to_all estimate over "
                        "16,384 ranks", "use fewer --ranks, or --engine flow with --algo "
                        "hierarchical and --protocol (ll, ll128 or simple)"))
    assert "--algo = " not in line and "ring" not in line
    refused(capsys, "collective", *topo, "--op", "all_to_all", "--engine", "flow",
            has=("--algo auto: the algorithm is chosen by the analytical estimate",
                 "give --algo hierarchical and --protocol"))
    refused(capsys, "collective", *topo, "--op", "all_to_all", "--engine", "flow", "--algo",
            "direct", has=("--protocol auto: the protocol is chosen by the analytical "
                           "estimate", "give --algo hierarchical and --protocol"))
    # an all-reduce's all-pairs algorithm: the op's own priced algorithms, no tree for an
    # all-gather
    refused(capsys, "collective", *topo, "--op", "all_reduce", "--algo", "direct",
            has=("use fewer --ranks, or --algo ring or double_binary_tree",))
    line = refused(capsys, "collective", *topo, "--op", "all_gather", "--algo", "direct",
                   has=("use fewer --ranks, or --algo ring",))
    assert "tree" not in line


def test_library_refusal_offers_only_the_ops_algorithms(monkeypatch):
    from collectives.analytical import TooManyPairs, estimate
    from topo.builders import fat_tree

    _pairs_limit(monkeypatch)
    ft = fat_tree(8)
    with pytest.raises(TooManyPairs, match=r"; use fewer ranks, or algorithm = 'ring'$"):
        estimate(ft, "all_gather", "direct", np.arange(128), 1 << 20)
    with pytest.raises(InputError, match=r"; use fewer ranks, or algorithm = 'ring' or "
                                         r"'double_binary_tree'$"):
        estimate(ft, "all_reduce", "direct", np.arange(128), 1 << 20)
    with pytest.raises(InputError, match=r"\(1,000\); use fewer ranks$"):
        estimate(ft, "all_to_all", "pairwise", np.arange(128), 1 << 20)


# ------------------------------------------- 2. the memory refusal of a direct all-to-all
def test_all_to_all_memory_refusal_offers_what_fits(tmp_path, capsys, monkeypatch):
    """It said "use fewer ranks or chunks (the packet engine runs every transfer)": one
    chunk already, and the packet engine holds at least as much. The node-leader
    all-to-all is 4.4 M transfers where direct is 268 M."""
    monkeypatch.setenv(memory_guard.BUDGET_ENV, "64GiB")
    for algo in ("direct", "pairwise"):
        line = refused(capsys, "validate", write(tmp_path, A2A_16K + f'algorithm = "{algo}"\n'
                                                 'protocol = "simple"\n'),
                       has=(f"all_to_all {algo} over 16,384 ranks is 268,419,072 transfers",
                            "; use fewer ranks, or algorithm = 'hierarchical' (4,364,260 "
                            "transfers)"))
        assert "packet" not in line and "chunks" not in line
    monkeypatch.setenv(memory_guard.BUDGET_ENV, "8GiB")  # nothing fits: fewer ranks only
    line = refused(capsys, "validate", write(tmp_path, A2A_16K + 'algorithm = "direct"\n'),
                   has=("268,419,072 transfers",))
    assert line.endswith("; use fewer ranks"), line


@pytest.mark.parametrize("n,g", [(64, 8), (96, 4), (8, 8), (12, 3), (6, 1)])
@pytest.mark.parametrize("leader", [None, "node", "rail"])
@pytest.mark.parametrize("chunks", [1, 3])
def test_hierarchical_all_to_all_count_is_exact(n, g, leader, chunks):
    """The guard counted 2 n (n - 1) (33.5 M at 4,096 ranks where the rail-aligned schedule
    the automatic choice takes on two_tier has 2.1 M) and refused it on a 22 GiB machine."""
    import collectives

    kw = {} if leader is None else {"leader": leader}
    for op, size in (("all_to_all", 1 << 20), ("all_to_all_v", np.full((n, n), 4096))):
        s = collectives.build(op, "hierarchical", list(range(n)), size, group_size=g,
                              chunks=chunks, protocol="simple", **kw)
        assert memory_guard.collective_transfers(op, "hierarchical", n, chunks, group_size=g,
                                                 leader=leader) == s.n_transfers


def test_rail_aligned_all_to_all_that_fits_is_not_refused(tmp_path, capsys, monkeypatch):
    """512 GPUs of two_tier: 35,840 transfers, counted as 523,264 (about 900 MiB)."""
    monkeypatch.setenv(memory_guard.BUDGET_ENV, "700MiB")
    s = write(tmp_path, A2A_16K.replace("nodes = 2048", "nodes = 64"))
    rc, out, err = cli(capsys, "validate", s)
    assert rc == 0 and "35840 transfers" in out, err


# ------------------------------------------------- 3. consumers of every transfer
def test_chakra_export_offers_no_scalable_form(tmp_path, capsys, monkeypatch):
    """`export --chakra` said "or algorithm = "ring" with network_detail = "auto" (one
    stream)", which a Chakra trace cannot hold (it writes every transfer)."""
    monkeypatch.setenv(memory_guard.BUDGET_ENV, "1GiB")
    s = write(tmp_path, RING_512)
    line = refused(capsys, "export", s, "--chakra", tmp_path / "ch",
                   has=("all_reduce ring over 512 ranks is 4,186,112 transfers",
                        "; use fewer ranks (Chakra export needs every transfer)"))
    assert "network_detail" not in line and "chunks" not in line
    assert not (tmp_path / "ch").exists()
    refused(capsys, "ns3", s, "--out", tmp_path / "o",
            has=("; use fewer ranks (ns-3 needs every transfer)",))


def test_training_export_offers_no_scalable_form(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(memory_guard.BUDGET_ENV, "450MiB")
    s = write(tmp_path, """
[topology]
kind = "two_tier"
nodes = 32
gpus_per_node = 8
[workload]
kind = "training"
gpu = "H100-SXM"
model = "llama3-8b"
parallel = { tp = 8, pp = 1, micro_batch = 1, global_batch = 64 }
""")
    line = refused(capsys, "export", s, "--chakra", tmp_path / "ch",
                   has=("the full training step on 256 GPUs is",
                        "; use fewer GPUs (Chakra export needs every transfer)"))
    assert "network_detail" not in line


def test_stream_form_is_offered_as_each_place_takes_it(tmp_path, capsys, monkeypatch):
    """The packet engine was told network_detail = "auto" (which it cannot run) and the CLI
    a key it has not; "chunks" was offered to a ring of one chunk."""
    monkeypatch.setenv(memory_guard.BUDGET_ENV, "1GiB")
    s = write(tmp_path, RING_512)
    line = refused(capsys, "validate", s, "--engine", "packet",
                   has=('; use fewer ranks, or [engine] kind = "flow" (one stream)',))
    assert "chunks" not in line
    line = refused(capsys, "collective", "--topo", "two_tier:nodes=64,gpus_per_node=8",
                   "--op", "all_reduce", "--algo", "double_binary_tree", "--engine", "packet",
                   "--sizes", "1GiB", "--protocol", "simple",
                   has=("--engine packet: all_reduce double_binary_tree over 512 ranks",
                        "; use fewer --ranks, or fewer --chunks (128 by default), or --algo "
                        "ring with --engine flow (one stream)"))
    assert "network_detail" not in line


# ----------------------------------------------------- 4. a trace path that is no trace
@pytest.mark.parametrize("make, has", [
    (lambda d: d / "s.toml", "a text file, not a Chakra trace"),
    (lambda d: _bytes(d / "noise.bin", os.urandom(3000)), "length prefix claims"),
    (lambda d: _bytes(d / "empty.et", b""), "empty trace"),
    (lambda d: _bytes(d / "t" / "x.0.et", b'{"nodes": []}\n').parent,
     "a text file, not a Chakra trace"),
])
def test_chakra_path_that_is_not_a_trace_names_the_field(tmp_path, capsys, make, has):
    """The reader's message named the file and record ("/abs/s.toml: record 1 at byte 92:
    length prefix claims ...") but not workload.path."""
    s = write(tmp_path, FLOWS_BASE)
    target = make(tmp_path)
    rel = os.path.relpath(target, tmp_path)
    scen = write(tmp_path, FLOWS_BASE.replace(
        'kind = "flows"\nflows = [{src = 0, dst = 5, bytes = 100000}]',
        f'kind = "chakra"\npath = "{rel}"'), "c.toml")
    assert s.exists()
    line = refused(capsys, "validate", scen, has=(has,))
    assert line.startswith(f"netcosim: error: workload.path = {rel!r}: "), line


def _bytes(p, data):
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    return p


def test_real_trace_is_not_taken_for_text():
    from netcosim.interop import chakra_pb2 as pb
    from netcosim.interop.chakra_reader import frame, parse

    # a GlobalMetadata whose length and version are printable, then a node
    data = frame([pb.GlobalMetadata(version="v" * 40), pb.Node(id=1, name="c")])
    assert len(parse(data).nodes) == 1


# ------------------------------------------------------------ the wider hunt around these
def _coll_trace(d, n):
    from netcosim.interop import chakra_pb2 as pb
    from netcosim.interop.chakra_reader import frame

    d.mkdir()
    for r in range(n):
        nodes = [pb.GlobalMetadata(version="0.0.4"),
                 pb.Node(id=1, name="c", type=pb.COMM_COLL_NODE,
                         attr=[pb.AttributeProto(name="comm_type", int64_val=pb.ALL_TO_ALL),
                               pb.AttributeProto(name="comm_size", int64_val=1 << 20),
                               pb.AttributeProto(name="pg_name", string_val="0")])]
        (d / f"x.{r}.et").write_bytes(frame(nodes))
    return d


def test_chakra_rank_hosts_entry_outside_the_fabric_names_the_entry(tmp_path, capsys):
    """It named the rank's file ("x.3.et: rank 3 runs on host 99"), not workload.rank_hosts."""
    _coll_trace(tmp_path / "t", 4)
    s = write(tmp_path, FLOWS_BASE.replace(
        'kind = "flows"\nflows = [{src = 0, dst = 5, bytes = 100000}]',
        'kind = "chakra"\npath = "t"\nrank_hosts = [0, 1, 2, 99]'))
    refused(capsys, "validate", s, has=("workload.rank_hosts[3] = 99: outside the fabric "
                                        "(hosts 0..15)",))
    # without rank_hosts, a rank beyond the fabric asks for as many hosts (rank_hosts cannot
    # help: it places every rank up to the highest on a host of its own)
    small = ('[topology]\nkind = "leaf_spine"\nleaves = 1\nhosts_per_leaf = 3\nspines = 1\n'
             '[workload]\nkind = "chakra"\npath = "t"\n')
    line = refused(capsys, "validate", write(tmp_path, small, "small.toml"),
                   has=("rank 3 runs on host 3, which is outside the fabric (hosts 0..2); the "
                        "trace's ranks need a fabric of at least 4 hosts",))
    assert "workload.rank_hosts" not in line


@pytest.mark.parametrize("value, has", [
    ('"noise.bin"', "workload.requests.trace = 'noise.bin': not a text (CSV) file"),
    ("3", "workload.requests.trace = 3: expected the name of a CSV file"),
    ('"sub"', "workload.requests.trace = 'sub': a directory, not a CSV file"),
])
def test_request_trace_that_is_no_csv_is_refused(tmp_path, capsys, value, has):
    """A binary file stopped on UnicodeDecodeError and trace = 3 on Path's TypeError (exit 1,
    "internal error"); a directory was "file not found"."""
    from cli_helpers import SERVE_HEAD

    (tmp_path / "noise.bin").write_bytes(b"\x80\x81" + os.urandom(200))
    (tmp_path / "sub").mkdir()
    s = write(tmp_path, SERVE_HEAD + f'[workload.requests]\narrival = "trace"\ntrace = {value}\n')
    refused(capsys, "validate", s, has=(has,))


def test_import_astra_of_a_binary_file_or_a_directory(tmp_path, capsys):
    """It said "cannot be read ('utf-8' codec can't decode byte ...)" and "([Errno 21] Is a
    directory: ...)"."""
    b = tmp_path / "net.yml"
    b.write_bytes(b"\xb9\x01" + os.urandom(100))
    refused(capsys, "import-astra", b, has=(f"ASTRA-sim network file {str(b)!r}: not a text "
                                            f"(YAML) file (byte 0xb9 at offset 0",))
    refused(capsys, "import-astra", tmp_path, has=("is a directory (give its network.yml)",))
