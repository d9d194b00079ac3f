"""The hierarchical and torus all-reduce with one chunk as phases of ring streams
(collectives/streams.py, network_detail = "auto"): the same makespan as the full schedule on
the flow engine, the same transfers and bytes, and a 16,384-GPU two_tier collective that the
memory guard refused (67 M transfers) now runs."""
import json

import numpy as np
import pytest

import collectives
from collectives import protocols
from collectives.streams import composed_phases, phased_schedule
from netcore.api import simulate
from netcore.schedule import BYTES_SHORT
from topo.builders import build, two_tier


def _both(fab, algo, nbytes, proto, lat=None, **kw):
    """(full, stream form) schedules and their flow-engine makespans."""
    n = fab.n_hosts
    full = collectives.build("all_reduce", algo, list(range(n)), nbytes, protocol=proto,
                             fabric=fab, step_latency_s=lat, **kw).with_connections()
    c = protocols.costs(proto, lat, fab, algo)
    ph = composed_phases(algo, range(n), nbytes, c, kw.get("group_size"), kw.get("dims"))
    st = phased_schedule(range(n), ph, "all_reduce")
    a = simulate(fab, full, "ecmp", engine="flow").makespan
    b = simulate(fab, st, "ecmp", engine="flow").makespan
    return full, st, a, b


# the ring stream form is held to rel=1e-9 against the full ring (tests/test_scale.py,
# tests/test_protocols.py) with sizes that split evenly; so is this one
@pytest.mark.parametrize("nodes,gpn", [(2, 4), (4, 8), (8, 4), (3, 8)])
@pytest.mark.parametrize("proto,lat", [(None, None), ("ll", None), ("ll128", None),
                                       ("simple", None), (None, 2e-6), ("ll128", 3e-6)])
def test_hierarchical_stream_equals_the_full_schedule(nodes, gpn, proto, lat):
    fab = two_tier(nodes=nodes, gpus_per_node=gpn, nic_gbps=400)
    n = fab.n_hosts
    full, st, a, b = _both(fab, "hierarchical", n << 19, proto, lat, group_size=gpn)
    assert b == pytest.approx(a, rel=1e-9)
    assert st.n_member_transfers == full.n_transfers
    assert st.total_bytes == full.total_bytes
    # one flow per group in each intra phase, one per rail across nodes
    assert st.n_transfers == 2 * nodes + gpn


def test_hierarchical_stream_with_uneven_shards():
    """Sizes that do not split evenly: every connection of a ring moves its own bytes in the
    full form, a stream moves its busiest one's in lock step. Bytes stay exact; the time is the
    busiest connection's total over the steps (never more than the full form's sum of each
    step's largest shard, a byte apart): equal within a byte per step of the busiest."""
    for nodes, gpn, S in ((8, 4, 1_000_003), (3, 8, 12_345_679), (2, 4, 999_983)):
        fab = two_tier(nodes=nodes, gpus_per_node=gpn, nic_gbps=400)
        full, st, a, b = _both(fab, "hierarchical", S, "ll128", None, group_size=gpn)
        assert st.total_bytes == full.total_bytes
        assert (st.extra[BYTES_SHORT] > 0).any()  # some connections do carry less
        steps = 2 * (gpn - 1) + 2 * (nodes - 1)
        assert b <= a * (1 + 1e-12)
        # a payload byte is at most 2 wire bytes (LL128 rounds up per transfer)
        assert a - b <= steps * 2 / fab.dlink_bw.min()


@pytest.mark.parametrize("dims", [(4, 4), (2, 3, 4), (4, 4, 4)])
@pytest.mark.parametrize("proto", [None, "ll", "simple"])
def test_torus_stream_equals_the_full_schedule(dims, proto):
    fab = build("torus", {"dims": list(dims), "link_gbps": 400, "latency_us": 0.5})
    n = fab.n_hosts
    full, st, a, b = _both(fab, "torus", n << 18, proto, dims=dims)
    assert b == pytest.approx(a, rel=1e-9)
    assert st.n_member_transfers == full.n_transfers
    assert st.total_bytes == full.total_bytes
    # a flow per line of every dimension, once to reduce-scatter and once to all-gather
    assert st.n_transfers == 2 * sum(n // d for d in dims if d > 1)


def test_phases_wait_for_the_rings_that_share_their_ranks():
    fab = two_tier(nodes=4, gpus_per_node=4)
    c = protocols.costs("simple", None, fab, "hierarchical")
    s = phased_schedule(range(16), composed_phases("hierarchical", range(16), 1 << 20, c, 4),
                        "all_reduce")
    r = simulate(fab, s, "ecmp", engine="flow")
    lab = np.array(s.labels)[s.label]
    ends = {k: r.end[lab == k] for k in ("intra_reduce_scatter", "inter_all_reduce",
                                         "intra_all_gather")}
    starts = {k: r.start[lab == k] for k in ends}
    assert starts["inter_all_reduce"].min() >= ends["intra_reduce_scatter"].max()
    assert starts["intra_all_gather"].min() >= ends["inter_all_reduce"].max()
    # per ring its steps' latencies (NVLink inside a node, network across), and the launch
    # once, before the first phase only
    d = np.flatnonzero(s.label == s.labels.index("step_latency"))
    of = lab[d + 4]  # 4 rings a phase: a ring's delay, then its transfer, 4 nodes on
    nv, net, launch = protocols.FAMILY_LATENCY["ring"]["simple"]
    want = {"intra_reduce_scatter": 3 * nv + launch, "inter_all_reduce": 6 * net,
            "intra_all_gather": 3 * nv}
    for k, v in want.items():
        assert (of == k).sum() == 4
        assert np.allclose(s.duration[d[of == k]], v)


def _scenario(tmp_path, nodes, extra=""):
    p = tmp_path / "h.toml"
    p.write_text(f'[topology]\nkind = "two_tier"\nnodes = {nodes}\ngpus_per_node = 8\n'
                 f'nic_gbps = 400\n[workload]\nkind = "collective"\nop = "all_reduce"\n'
                 f'algorithm = "hierarchical"\nbytes = "1GiB"\n{extra}')
    return p


def test_16k_gpu_hierarchical_collective_runs_where_it_was_refused(tmp_path, monkeypatch,
                                                                    capsys):
    """16,384 GPUs of two_tier: 67,305,472 transfers in full, refused by the memory guard on
    any machine with less than 63 GiB to spare (the budget below makes that deterministic).
    As phases of streams: 4,104 flows (2,048 groups twice, 8 rails), about 2 s."""
    from netcosim import memory_guard
    from netcosim.cli import main

    monkeypatch.setenv(memory_guard.BUDGET_ENV, "8GiB")
    p = _scenario(tmp_path, 2048)
    assert main(["run", str(p), "--out", str(tmp_path / "o")]) == 0
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["network_detail_used"] == "auto" and s["algorithm"] == "hierarchical"
    assert s["engine_flows"] == 2 * 2048 + 8
    assert s["transfers_represented"] == 16384 * (2 * 7 + 2 * 2047)
    assert s["unfinished"] == 0 and s["makespan_us"] > 0
    capsys.readouterr()
    # with chunks the phases pipeline: no stream form, and the full form does not fit
    assert main(["run", str(p), "--set", "workload.chunks=2", "--out",
                 str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "134,610,944 transfers" in err and "chunks = 1" in err


def test_chunks_keep_the_full_form(tmp_path):
    from netcosim.cli import main

    p = _scenario(tmp_path, 2)
    got = {}
    for name, args in (("one", []), ("two", ["--set", "workload.chunks=2"]),
                       ("full", ["--set", "workload.network_detail=full"])):
        assert main(["run", str(p), "--out", str(tmp_path / name), *args]) == 0
        got[name] = json.loads((tmp_path / name / "summary.json").read_text())
    assert got["one"]["network_detail_used"] == "auto"
    assert got["two"]["network_detail_used"] == "full"
    assert got["one"]["bytes"] == got["full"]["bytes"]
    assert got["one"]["makespan_us"] == pytest.approx(got["full"]["makespan_us"], rel=1e-9)
