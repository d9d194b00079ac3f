"""The `netcosim` command: bad input through the CLI (exit 2, one line naming field and value,
no traceback, no output directory), run/validate/topo, and the output files.

Tests of `run` use a tiny stand-in engine (below) so that they check the CLI and the files,
not an engine; the end-to-end tests at the bottom use the real flow engine.
"""
import csv
import json
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import netcore.api
import netcosim.scenario
from netcore.result import Result
from cli_helpers import cli, write
from netcore.schedule import TRANSFER
from netcosim.cli import main
from topo.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

STAR = """
name = "star"
seed = 5
[topology]
kind = "custom"
hosts = 4
switches = 2
links = [[0, 4, 100, 1.0], [1, 4, 100, 1.0], [2, 5, 100, 1.0], [3, 5, 100, 1.0], [4, 5, 200, 0.5]]
[routing]
policy = "shortest"
[workload]
kind = "flows"
flows = [{src = 0, dst = 2, bytes = "1MiB"}, {src = 1, dst = 3, bytes = "2MiB", deps = [0]},
         {src = 3, dst = 0, bytes = 1000, start_us = 3}]
"""


def scenario(tmp_path, text=STAR, name="s.toml") -> Path:
    return write(tmp_path, text, name)


# --------------------------------------------------------------------------- stand-in engine
def _fake_run(topology, schedule, routing, faults, seed=0, **options):
    """Each transfer runs alone at its path's bottleneck rate (no sharing), after its parents
    and its start time. Enough to exercise the CLI and the output files."""
    n = schedule.n
    start, end = np.full(n, np.nan), np.full(n, np.nan)
    t = np.flatnonzero(schedule.kind == TRANSFER)
    paths = routing.paths(schedule.src[t], schedule.dst[t])
    lb, busy = np.zeros(topology.n_dlinks), np.zeros(topology.n_dlinks)
    ptr = np.zeros(n + 1, np.int64)
    for i in schedule.topological_order():
        parents = schedule.deps_of(i)
        s0 = max([schedule.start[i]] + [end[p] for p in parents])
        j = int(np.searchsorted(t, i))
        links = paths.links_of(j)
        dur = schedule.size[i] / topology.dlink_bw[links].min() + paths.latency[j]
        start[i], end[i] = s0, s0 + dur
        lb[links] += schedule.size[i]
        busy[links] += dur
    for j, i in enumerate(t):
        ptr[i + 1] = len(paths.links_of(j))
    ptr = np.cumsum(ptr)
    res = Result("flow", start, end, np.zeros(n, bool), lb, busy, events=2 * n, wall_s=0.001)
    res.node_extra["retransmissions"] = np.arange(n, dtype=np.int64)
    res.node_extra["path_ptr"] = ptr
    res.node_extra["path_link"] = paths.link
    res.link_extra["drops"] = np.zeros(topology.n_dlinks, np.int64)
    if options.get("link_series"):
        res.link_extra["series_ptr"] = np.arange(topology.n_dlinks + 1)
        res.link_extra["series_t"] = np.zeros(topology.n_dlinks)
        res.link_extra["series_rate"] = topology.dlink_bw / 2
    res.info["compile_s"] = 0.5
    _fake_run.calls.append(options)
    return res


@pytest.fixture
def fake_engine(monkeypatch):
    mod = types.ModuleType("_netcosim_test_engine")
    mod.run = _fake_run
    _fake_run.calls = []
    monkeypatch.setitem(sys.modules, "_netcosim_test_engine", mod)
    monkeypatch.setitem(netcore.api.ENGINES, "flow", "_netcosim_test_engine")

    def check_options(opts):
        for k in opts:
            if k != "link_series":
                raise InputError(f"engine.{k}: unknown option of the test engine")
        return {"link_series": False, **opts}

    monkeypatch.setattr(netcosim.scenario, "engine_options_module",
                        lambda kind: types.SimpleNamespace(check_options=check_options))
    return _fake_run


def read_csv(path):
    with open(path, newline="") as fh:
        return list(csv.reader(fh))


# --------------------------------------------------------------------------- run
def test_run_writes_the_contract_files(tmp_path, capsys, fake_engine):
    out = tmp_path / "o"
    rc, stdout, err = cli(capsys, "run", scenario(tmp_path), "--out", out)
    assert rc == 0, err
    assert "makespan" in stdout and str(out) in stdout
    summary = json.loads((out / "summary.json").read_text())
    flows = read_csv(out / "flows.csv")
    links = read_csv(out / "links.csv")
    assert flows[0][:7] == ["id", "src", "dst", "bytes", "start_us", "end_us", "stranded"]
    assert "retransmissions" in flows[0] and "path" in flows[0]
    assert [r[:4] for r in flows[1:]] == [["0", "0", "2", "1048576"], ["1", "1", "3", "2097152"],
                                         ["2", "3", "0", "1000"]]
    path = flows[1][flows[0].index("path")]
    assert path == "0>4 4>5 5>2"
    assert links[0] == ["u", "v", "bytes", "busy_us", "utilization", "drops"]
    assert len(links) - 1 == 10  # one row per directed link
    # flow 1 waits for flow 0: starts where flow 0 ended
    assert float(flows[2][4]) == float(flows[1][5])
    ends = [float(r[5]) for r in flows[1:]]
    assert summary["makespan_us"] == pytest.approx(max(ends))
    assert summary["engine"] == "flow" and summary["transfers"] == 3
    assert summary["stranded"] == 0 and summary["wall_s"] == 0.001 and summary["events"] == 6
    assert summary["bytes"] == 2**20 + 2**21 + 1000
    # flows 0->2 and 1->3 cross switch 4 -> 5; flow 3->0 crosses 5 -> 4
    by_link = {(r[0], r[1]): int(r[2]) for r in links[1:]}
    assert by_link[("4", "5")] == 2**20 + 2**21 and by_link[("5", "4")] == 1000


def test_run_is_deterministic_bit_for_bit(tmp_path, capsys, fake_engine):
    p = scenario(tmp_path)
    for d in ("a", "b"):
        assert cli(capsys, "run", p, "--out", tmp_path / d)[0] == 0
    for name in ("flows.csv", "links.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_default_out_dir_and_overwrite(tmp_path, capsys, fake_engine, monkeypatch):
    monkeypatch.chdir(tmp_path)
    p = scenario(tmp_path)
    assert cli(capsys, "run", p, "--link-series")[0] == 0
    out = tmp_path / "out" / "star"
    assert (out / "link_series.csv").exists()
    assert fake_engine.calls[-1]["link_series"] is True
    rows = read_csv(out / "link_series.csv")
    assert rows[0] == ["u", "v", "time_us", "rate_Gbps", "utilization"]
    assert rows[1][4] == "0.5"
    (out / "mine.txt").write_text("keep")
    assert cli(capsys, "run", p, "--set", "workload.flows.0.bytes=4MiB")[0] == 0
    assert not (out / "link_series.csv").exists()  # stale output of the earlier run removed
    assert (out / "mine.txt").read_text() == "keep"
    assert read_csv(out / "flows.csv")[1][3] == str(4 * 2**20)
    assert not [x for x in (tmp_path / "out").iterdir() if x.name.startswith(".")]


def test_engine_crash_is_one_line_and_writes_nothing(tmp_path, capsys, fake_engine,
                                                     monkeypatch):
    """A bug is one line naming the command and the exception, exit 1; --debug (before or
    after the command) or NETCOSIM_DEBUG=1 gives the traceback."""
    def boom(*a, **k):
        raise RuntimeError("engine bug")

    monkeypatch.setattr(sys.modules["_netcosim_test_engine"], "run", boom)
    rc, _, err = cli(capsys, "run", scenario(tmp_path), "--out", tmp_path / "o")
    assert rc == 1 and "Traceback" not in err
    assert err.strip() == ("netcosim run: internal error: RuntimeError: engine bug (run again "
                           "with --debug for the traceback)")
    for argv in (["--debug", "run", str(scenario(tmp_path))],
                 ["run", str(scenario(tmp_path)), "--debug"]):
        with pytest.raises(RuntimeError, match="engine bug"):
            main(argv + ["--out", str(tmp_path / "o")])
    monkeypatch.setenv("NETCOSIM_DEBUG", "1")
    with pytest.raises(RuntimeError, match="engine bug"):
        main(["run", str(scenario(tmp_path)), "--out", str(tmp_path / "o")])
    assert not (tmp_path / "o").exists()


def test_missing_engine_is_a_clear_input_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "netcore.packet.options", None)  # as if not built
    out = tmp_path / "o"
    rc, _, err = cli(capsys, "run", scenario(tmp_path), "--engine", "packet", "--out", out)
    assert rc == 2 and "engine 'packet' is not available in this build" in err
    assert "Traceback" not in err and not out.exists()
    # validate still checks the file, and says the options went unchecked
    rc, out_text, err = cli(capsys, "validate", scenario(tmp_path), "--engine", "packet")
    assert rc == 0 and out_text.startswith("OK star") and "not checked" in err


# --------------------------------------------------------------------------- bad input
BAD = [
    ("unknown top-level key", {"append": "colour = 'red'\n", "prepend": True}, "colour"),
    ("unknown nested key", {"replace": ('policy = "shortest"', 'polcy = "shortest"')},
     "routing.polcy"),
    ("unknown flow key", {"replace": ("src = 0, dst = 2", "src = 0, dest = 2, dst = 2")},
     "workload.flows[0].dest"),
    ("negative bandwidth", {"replace": ("[4, 5, 200, 0.5]", "[4, 5, -200, 0.5]")},
     "topology.links[4][2] (gbps) = -200"),
    ("link to a missing node", {"replace": ("[4, 5, 200, 0.5]", "[4, 7, 200, 0.5]")},
     "node 7 does not exist"),
    ("disconnected fabric", {"replace": (", [4, 5, 200, 0.5]", "")}, "disconnected"),
    ("flow between unreachable hosts",
     {"append": "[[faults]]\nlink = [4, 5]\nkind = 'down'\n"},
     "workload.flows[0]: host 0 cannot reach host 2"),
    ("fault on a missing link", {"append": "[[faults]]\nlink = [0, 1]\n"},
     "faults[0].link = [0, 1]"),
    ("odd k", {"topology": "[topology]\nkind = 'fat_tree'\nk = 5\n"}, "topology.k = 5"),
    ("malformed TOML", {"append": "[workload\n"}, "malformed TOML"),
    ("wrong type", {"replace": ("seed = 5", "seed = 'five'")}, "seed = 'five'"),
    ("wrong type nested", {"replace": ('bytes = "1MiB"', "bytes = true")},
     "workload.flows[0].bytes = True"),
    ("unknown engine", {"append": "[engine]\nkind = 'quantum'\n"}, "engine.kind = 'quantum'"),
    ("bad routing policy", {"replace": ('policy = "shortest"', 'policy = "dor"')},
     "routing.policy = 'dor'"),
]


def _edit(spec):
    text = STAR
    if "replace" in spec:
        a, b = spec["replace"]
        assert a in text
        text = text.replace(a, b, 1)
    if "append" in spec:
        text = spec["append"] + text if spec.get("prepend") else text + spec["append"]
    if "topology" in spec:
        start = text.index("[topology]")
        end = text.index("[routing]")
        text = text[:start] + spec["topology"] + text[end:]
    return text


@pytest.mark.parametrize("what,spec,needle", BAD, ids=[b[0] for b in BAD])
@pytest.mark.parametrize("command", ["run", "validate"])
def test_bad_input_exits_2_with_one_clear_line(tmp_path, capsys, fake_engine, what, spec,
                                               needle, command):
    p = scenario(tmp_path, _edit(spec))
    out = tmp_path / "o"
    args = [command, p] + (["--out", out] if command == "run" else [])
    rc, stdout, err = cli(capsys, *args)
    assert rc == 2, (stdout, err)
    assert err.startswith("netcosim: error: ") and err.count("\n") == 1, err
    assert needle in err, err
    assert "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("args,needle", [
    (["--set", "topology"], "expected key=value"),
    (["--set", "topology.hosts="], "no value"),
    (["--set", "name.x=1"], "is a string, not a table"),
    (["--set", "workload.flows.9.bytes=1"], "has 3 entries"),
    (["--set", "topology.hosts=[1,"], "not a TOML value"),
    (["--set", "topology.hostz=4"], "topology.hostz"),
    (["--set", "topology.hosts=-4"], "topology.hosts = -4"),
])
def test_bad_set(tmp_path, capsys, fake_engine, args, needle):
    out = tmp_path / "o"
    rc, _, err = cli(capsys, "run", scenario(tmp_path), "--out", out, *args)
    assert rc == 2 and needle in err and "Traceback" not in err, err
    assert not out.exists()


def test_missing_and_malformed_files(tmp_path, capsys):
    for cmd in ("run", "validate", "topo"):
        rc, _, err = cli(capsys, cmd, tmp_path / "nope.toml")
        assert rc == 2 and "does not exist" in err and "nope.toml" in err
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x",, }')
    rc, _, err = cli(capsys, "validate", bad)
    assert rc == 2 and "malformed JSON" in err and "line 1" in err


def test_usage_errors_exit_2(capsys):
    assert main([]) == 2
    assert main(["run"]) == 2
    assert main(["run", "x.toml", "--engine", "warp"]) == 2
    assert main(["frobnicate"]) == 2
    capsys.readouterr()


def test_subprocess_entry_point(tmp_path):
    """The real entry (`python -m netcosim`): exit 2 and one line, no traceback."""
    p = scenario(tmp_path, _edit(BAD[0][1]))
    r = subprocess.run([sys.executable, "-m", "netcosim", "validate", str(p)],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip().startswith("netcosim: error: colour: unknown key")
    assert "Traceback" not in r.stderr and r.stdout == ""


# --------------------------------------------------------------------------- validate, topo
def test_validate_prints_ok_and_counts(tmp_path, capsys, fake_engine):
    rc, out, _ = cli(capsys, "validate", scenario(tmp_path))
    assert rc == 0
    assert out.startswith("OK star:") and "4 hosts" in out and "3 transfers" in out


def test_topo_prints_counts(tmp_path, capsys):
    p = scenario(tmp_path, _edit(BAD[8][1]).replace("k = 5", "k = 4"))
    rc, out, _ = cli(capsys, "topo", p)
    assert rc == 0
    fields = dict(line.split(None, 1) for line in out.strip().splitlines()
                  if not line.startswith(("host links", "bisection", "diameter")))
    assert fields["hosts"] == "16" and fields["switches"] == "20" and fields["links"] == "48"
    rc, out, _ = cli(capsys, "topo", p, "--json", "--set", "topology.k=6")
    assert rc == 0 and json.loads(out)["hosts"] == 54


def test_command_discovery_survives_a_broken_command_module(tmp_path, monkeypatch, capsys):
    pkg = tmp_path / "netcosim" / "commands"
    import netcosim.commands as commands

    monkeypatch.setattr(commands, "__path__", list(commands.__path__) + [str(pkg)])
    pkg.mkdir(parents=True)
    (pkg / "zz_broken.py").write_text("import no_such_module_xyz\n")
    rc, _, err = cli(capsys, "validate", tmp_path / "nope.toml")
    assert rc == 2 and "does not exist" in err  # other commands still work
    rc, _, err = cli(capsys, "zz_broken")
    assert rc == 1 and "no_such_module_xyz" in err
    sys.modules.pop("netcosim.commands.zz_broken", None)


# --------------------------------------------------------------------------- real flow engine
def _run_real(tmp_path, capsys, scenario_path, *extra):
    out = tmp_path / "o"
    rc, stdout, err = cli(capsys, "run", scenario_path, "--out", out, *extra)
    assert rc == 0, err
    return out, json.loads((out / "summary.json").read_text())


def test_incast_example_end_to_end(tmp_path, capsys):
    out, summary = _run_real(tmp_path, capsys, EXAMPLES / "incast_flows.toml")
    # 15 flows of 64 MiB share host 0's 100 Gbps edge link: 15 * 64 MiB / 12.5 GB/s + latency
    ideal_us = 15 * 64 * 2**20 / 12.5e9 * 1e6
    assert ideal_us < summary["makespan_us"] < ideal_us + 10
    assert summary["transfers_finished"] == 15 and summary["stranded"] == 0
    assert len(read_csv(out / "flows.csv")) == 16


def test_real_engine_runs_are_bit_for_bit(tmp_path, capsys):
    p = EXAMPLES / "custom_pipeline.toml"
    a, _ = _run_real(tmp_path / "a", capsys, p, "--link-series")
    b, _ = _run_real(tmp_path / "b", capsys, p, "--link-series")
    for name in ("flows.csv", "links.csv", "link_series.csv"):
        assert (a / name).read_bytes() == (b / name).read_bytes()


def test_ring_allreduce_example_end_to_end(tmp_path, capsys):
    # k=4 keeps the test small; the example itself (k=8) is the README's job
    out, summary = _run_real(tmp_path, capsys, EXAMPLES / "ring_allreduce_fat_tree.toml",
                             "--set", "topology.k=4", "--set", "workload.bytes=16MiB")
    # NCCL-tests figures: algbw = S / t, busbw = algbw * 2(n-1)/n over the 16 hosts of k=4;
    # a ring cannot beat one 400 Gbps (50 GB/s) NIC per rank
    n, S = 16, 16 * 2**20
    assert summary["algbw_GBps"] == pytest.approx(S / (summary["makespan_us"] * 1e-6) / 1e9,
                                                  rel=1e-9)
    assert summary["busbw_GBps"] == pytest.approx(summary["algbw_GBps"] * 2 * (n - 1) / n,
                                                  rel=1e-12)
    assert 0 < summary["busbw_GBps"] <= 50
    assert summary["stranded"] == 0


# examples too large to simulate in a test run with the scaled-down overrides their comments give
# the 16,384-GPU example runs at full size (about 2 s with network_detail = "auto"); the
# long-context one takes ~10 s and runs at a reduced size here
SCALED_DOWN = {
    "llama3_405b_cp16_128k.toml": ("--set", "topology.nodes=32", "--set", "workload.parallel.pp=2",
                                   "--set", "workload.parallel.vp=1", "--set",
                                   "workload.parallel.dp=1", "--set",
                                   "workload.parallel.global_batch=2", "--set",
                                   "workload.model.layers=4"),
}


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.toml")), ids=lambda p: p.name)
def test_every_example_runs(tmp_path, capsys, path):
    import tomllib

    kind = tomllib.loads(path.read_text())["workload"]["kind"]
    out, summary = _run_real(tmp_path, capsys, path, *SCALED_DOWN.get(path.name, ()))
    assert summary["makespan_us"] > 0
    if kind == "inference":  # priced by its own loop: no schedule of transfers (docs/inference.md)
        assert summary["output_tokens_per_s"] > 0 and summary["iterations"] > 0
        assert summary["transfers"] is None and summary["bytes"] is None
    else:
        assert summary["stranded"] == 0
        assert summary["transfers_finished"] == summary["transfers"] > 0
    if kind == "collective":
        assert summary["busbw_GBps"] > 0


def test_fault_example_is_slower_than_without_faults(tmp_path, capsys):
    p = EXAMPLES / "fault_core_link.toml"
    _, with_faults = _run_real(tmp_path / "f", capsys, p)
    _, clean = _run_real(tmp_path / "c", capsys, p, "--set", "faults=[]")
    assert with_faults["fault_events"] == 6 and clean["fault_events"] == 0
    assert with_faults["makespan_us"] > clean["makespan_us"]


# ------------------------------------------------------------------ flows.csv text (outputs.py)
def _csv_reference(header, columns) -> bytes:
    """flows.csv as the per-row Python writer made it: repr() per float, str() per int."""
    from netcosim import outputs

    texts = [outputs._text_py(c) for c in columns]
    return (",".join(header) + "\n" + "".join(",".join(r) + "\n" for r in zip(*texts))).encode()


SPECIAL = [0.0, -0.0, 1e16, 1e15, 9999999999999998.0, 1e-4, 1e-5, 5e-324, 1.7976931348623157e308,
           float("inf"), -float("inf"), 0.1, 1 / 3, 2.0**53, 2.0**53 + 2, 123456.789e-300]


def test_csv_text_is_compiled_and_repr_identical(tmp_path):
    import numpy as np

    from netcosim import outputs

    assert outputs._csvtext is not None  # the vectorised writer is built and used
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 2**63, 200_000, dtype=np.int64).view(np.float64)
    vals = np.concatenate([SPECIAL, bits[np.isfinite(bits)], -bits[:1000],
                           rng.random(20_000) * 10.0 ** rng.integers(-20, 20, 20_000)])
    buf, off = outputs._text(vals)
    text = buf.tobytes().decode()
    got = [text[a:b] for a, b in zip(off[:-1].tolist(), off[1:].tolist())]
    assert got == [repr(x) for x in vals.tolist()]
    assert all(float(t) == v for t, v in zip(got, vals.tolist()))  # every value round-trips
    assert outputs._text(np.array([np.nan]))[0].size == 0  # NaN -> empty field, as before


def test_flows_csv_byte_identical_and_round_trips(tmp_path, monkeypatch):
    import types

    import numpy as np

    import collectives as co
    from netcosim import outputs

    s = co.ring_all_reduce(8, 1 << 20, chunks=2)
    s.labels = ["transfer", "rs", "ag"]
    s.label = (np.arange(s.n) % 3).astype(np.int16)
    rng = np.random.default_rng(0)
    st = rng.random(s.n) * 1e-3
    res = types.SimpleNamespace(start=st, end=st + rng.random(s.n), node_extra={
        "reroutes": rng.integers(0, 3, s.n), "frac": rng.random(s.n), "whole": np.ones(s.n)},
        stranded=rng.random(s.n) < 0.2)
    header, cols = outputs.flows_table(s, res)
    monkeypatch.setattr(outputs, "BLOCK_ROWS", 7)  # several blocks, one partial
    outputs._write_csv(tmp_path / "f.csv", header, cols)
    data = (tmp_path / "f.csv").read_bytes()
    assert data == _csv_reference(header, cols)
    rows = [line.split(",") for line in data.decode().splitlines()[1:]]
    t = np.flatnonzero(s.kind == 0)
    assert len(rows) == len(t)
    i_start, i_frac = header.index("start_us"), header.index("frac")
    assert [float(r[i_start]) for r in rows] == (st[t] * 1e6).tolist()
    assert [float(r[i_frac]) for r in rows] == res.node_extra["frac"][t].tolist()
    assert {r[header.index("label")] for r in rows} == {"transfer", "rs", "ag"}
    assert {r[header.index("whole")] for r in rows} == {"1"}  # whole floats stay integers
    # the fallback (extension not built) writes the same bytes
    monkeypatch.setattr(outputs, "_csvtext", None)
    outputs._write_csv(tmp_path / "g.csv", header, cols)
    assert (tmp_path / "g.csv").read_bytes() == data
