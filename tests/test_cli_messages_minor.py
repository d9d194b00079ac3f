"""Bad input whose refusal named the wrong field, listed internal names, printed more than one
line, or was not refused at all: each is refused with exit 2 and one line naming the field as
the user wrote it (an audit's list of small message problems)."""
from __future__ import annotations

from cli_helpers import FLOWS_BASE, cli, refused, write

FULLFLAT = """
[topology]
kind = "fullflat"
n_gpus = {n_gpus}
planes = {planes}
switch_radix = {radix}
[workload]
kind = "flows"
flows = [{{src = 0, dst = 1, bytes = 1000}}]
"""

RING = """
[topology]
kind = "fat_tree"
k = 4
[workload]
kind = "collective"
op = "all_reduce"
algorithm = "{algorithm}"
bytes = "1MiB"
"""

A2AV = """
[topology]
kind = "fat_tree"
k = {k}
[workload]
kind = "collective"
op = "all_to_all_v"
{ranks}
bytes_matrix = {matrix}
"""

COLLECTIVE = ("collective", "--topo", "fat_tree:k=4", "--op", "all_reduce", "--algo", "ring")


def test_fullflat_too_many_planes_names_planes(tmp_path, capsys):
    for planes in ("100000000", "1e8"):  # the float: not an integer, also naming planes
        p = write(tmp_path, FULLFLAT.format(n_gpus=16, planes=planes, radix=16))
        line = refused(capsys, "run", p, "--out", tmp_path / "o", has=("topology.planes = ",))
        assert "n_gpus" not in line
    # one plane alone too big: still n_gpus
    p = write(tmp_path, FULLFLAT.format(n_gpus=30_000_000, planes=1, radix=8192))
    refused(capsys, "run", p, "--out", tmp_path / "o",
            has=("topology.n_gpus = 30000000", "beyond the limit"))
    assert not (tmp_path / "o").exists()


def test_packet_engine_size_limit_names_sizes(capsys):
    line = refused(capsys, *COLLECTIVE, "--engine", "packet", "--sizes", "1MiB,1e18",
                   has=("--sizes = '1MiB,1e18'", "size 1000000000000000000 bytes",
                        "segments", "per transfer"))
    assert "node " not in line
    # the run's event count, from the size too
    refused(capsys, "collective", "--topo", "fat_tree:k=6", "--op", "all_to_all", "--algo",
            "direct", "--engine", "packet", "--sizes", "1e15",
            has=("--sizes = '1e15'", "events per run"))


def test_unknown_collective_option_lists_user_options_only(tmp_path, capsys):
    p = write(tmp_path, RING.format(algorithm="ring") + "options = {foo = 1}\n")
    line = refused(capsys, "run", p, "--out", tmp_path / "o",
                   has=("workload.options.foo = 1", "not an option of ring all_reduce",
                        "step_latency_us"))
    for internal in ("fabric", "per_node", "step_latency_s"):
        assert internal not in line
    p = write(tmp_path, RING.format(algorithm="hierarchical") + "options = {foo = 1}\n")
    refused(capsys, "run", p, "--out", tmp_path / "o",
            has=("workload.options.foo", "options: group_size;"))
    # internal parameters given as options: an internal error (options.fabric, .ranks) or
    # silently taken (per_node) before
    for key in ("fabric", "ranks", "per_node"):
        p = write(tmp_path, RING.format(algorithm="ring") + f"options = {{{key} = 2}}\n")
        refused(capsys, "run", p, "--out", tmp_path / "o",
                has=(f"workload.options.{key} = 2", "not an option"))
    # options with a [workload] key of their own are still taken under options
    p = write(tmp_path, RING.format(algorithm="ring") + "options = {chunks = 2}\n")
    rc, out, err = cli(capsys, "run", p, "--out", tmp_path / "ok")
    assert rc == 0, err


def test_bytes_matrix_row_named_by_its_scenario_key(tmp_path, capsys):
    big = 2**63 - 1
    p = write(tmp_path, A2AV.format(k=2, ranks="", matrix=f"[[{big}, {big}], [1, 0]]"))
    line = refused(capsys, "run", p, "--out", tmp_path / "o",
                   has=("workload.bytes_matrix[0] = ", "rank 0 sends", "int64"))
    assert "nbytes" not in line
    # a row summing to exactly 2^63-1 is fine
    p = write(tmp_path, A2AV.format(k=2, ranks="", matrix=f"[[0, {2**62}], [{2**62}, "
                                                          f"{2**62 - 1}]]"))
    rc, out, err = cli(capsys, "run", p, "--out", tmp_path / "ok")
    assert rc == 0, err


def test_bytes_matrix_over_some_ranks_with_automatic_algorithm(tmp_path, capsys):
    # the choice was made over every host: "nbytes: ... needs a 16x16 byte matrix"
    p = write(tmp_path, A2AV.format(k=4, ranks="ranks = [0, 5, 9]",
                                    matrix="[[0, 100, 200], [1, 0, 3000], [5000, 0, 0]]"))
    rc, out, err = cli(capsys, "run", p, "--out", tmp_path / "ok")
    assert rc == 0, err


def test_in_network_algorithm_on_a_cli_fabric_names_topo(capsys):
    for engine in ("analytical", "flow"):
        line = refused(capsys, "collective", "--topo", "two_tier:nodes=2", "--op",
                       "all_reduce", "--algo", "nvls", "--sizes", "1MiB", "--engine", engine,
                       has=("--topo = 'two_tier:nodes=2'", "reduce_gbps=scaleup:line",
                            "to --topo"))
        assert "topology.reduce_gbps" not in line
    refused(capsys, "collective", "--topo", "two_tier:nodes=2,reduce_gbps=scaleup:2400",
            "--op", "all_reduce", "--algo", "sharp", "--sizes", "1MiB",
            has=("--topo = 'two_tier:nodes=2,reduce_gbps=scaleup:2400'", "scale-out",
                 "reduce_gbps=edge:line"))
    # the fabric's other reduce_gbps refusals
    line = refused(capsys, "collective", "--topo", "fat_tree:k=4,reduce_gbps=core:line", "--op",
                   "all_reduce", "--algo", "sharp", "--sizes", "1MiB",
                   has=("--topo = 'fat_tree:k=4,reduce_gbps=core:line': reduce_gbps:",
                        "does not reduce"))
    assert "topology." not in line


def test_in_network_algorithm_in_a_scenario_still_names_topology(tmp_path, capsys):
    p = write(tmp_path, RING.format(algorithm="sharp"))
    refused(capsys, "run", p, "--out", tmp_path / "o",
            has=("topology.reduce_gbps", "set topology.reduce_gbps = \"line\""))


def test_seed_range_stated(tmp_path, capsys):
    for seed in (2**63, -1):
        p = write(tmp_path, f"seed = {seed}\n" + FLOWS_BASE)
        refused(capsys, "run", p, "--out", tmp_path / "o",
                has=(f"seed = {seed}", "from 0 to 9223372036854775807"))
    p = write(tmp_path, f"seed = {2**63 - 1}\n" + FLOWS_BASE)
    rc, out, err = cli(capsys, "run", p, "--out", tmp_path / "ok")
    assert rc == 0, err


def test_plot_without_columns(tmp_path, capsys):
    base = FLOWS_BASE + '[sweep]\n"topology.link_gbps" = [100, 200]\n[[plot]]\n' \
                        'x = "topology.link_gbps"\n'
    for y in ("[]", "[1]", "3"):
        p = write(tmp_path, base + f"y = {y}\n")
        refused(capsys, "sweep", p, "--dry-run", has=(f"plot[0].y = {y}", "column name"))
    p = write(tmp_path, base + 'y = ["makespan_us"]\n')
    rc, out, err = cli(capsys, "sweep", p, "--dry-run")
    assert rc == 0, err


def test_export_to_one_path_twice(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    p = write(tmp_path, FLOWS_BASE)
    refused(capsys, "export", p, "--graphml", "f.out", "--json", "./f.out",
            has=("--json './f.out'", "the same path as --graphml 'f.out'"))
    refused(capsys, "export", p, "--json", "d", "--chakra", "d",
            has=("--chakra 'd'", "the same path as --json 'd'"))
    assert not (tmp_path / "f.out").exists() and not (tmp_path / "d").exists()
    # netcosim collective's two outputs alike
    refused(capsys, *COLLECTIVE, "--sizes", "1MiB", "--csv", "a.png", "--plot", "a.png",
            has=("--plot 'a.png'", "the same path as --csv 'a.png'"))


def test_overflowing_times_refused_in_one_line(tmp_path, capsys):
    # numpy's overflow warnings used to come above the error line
    p = write(tmp_path, FLOWS_BASE)
    for engine in ("flow", "packet"):
        refused(capsys, "run", p, "--engine", engine, "--set",
                "workload.flows.0.start_us=1e308", "--out", tmp_path / "o",
                has=("workload.flows[0].start_us", "a start of 1e+308 us"))
        # link latencies: an internal error on the flow engine, the link named on the packet
        refused(capsys, "run", p, "--engine", engine, "--set", "topology.latency_us=1e308",
                "--out", tmp_path / "o",
                has=("topology.latency_us = 1e+308", "1.153e+12"))
    assert not (tmp_path / "o").exists()
    for topo in ("fat_tree:k=4,latency_us=1e300", "two_tier:nodes=2,scaleup_latency_us=1e308"):
        refused(capsys, "collective", "--topo", topo, "--op", "all_reduce", "--sizes", "1MiB",
                has=("--topo.", "latency_us = 1e+30"))
    p = write(tmp_path, """
[topology]
kind = "custom"
hosts = 2
links = [[0, 1, 100, 1e308]]
[workload]
kind = "flows"
flows = [{src = 0, dst = 1, bytes = 100}]
""")
    refused(capsys, "run", p, "--out", tmp_path / "o", has=("topology.links[0][3]",))


def test_valid_extremes_print_no_warning(tmp_path, capsys):
    # the fastest link rate over a long run: the throughput fraction's bw * span overflowed
    p = write(tmp_path, FLOWS_BASE.replace("k = 4", "k = 4\nlink_gbps = 1e299"))
    rc, out, err = cli(capsys, "run", p, "--set", "workload.flows.0.start_us=1e12", "--out",
                       tmp_path / "ok")
    assert rc == 0 and err == "", err


def test_step_latency_bounded_by_the_clock(tmp_path, capsys):
    for engine in ("analytical", "flow", "packet"):
        for v in ("1e300", "1e308", "5e12", "inf", "nan", "-1"):
            refused(capsys, *COLLECTIVE, "--sizes", "1MiB", "--engine", engine,
                    f"--step-latency-us={v}",
                    has=("--step-latency-us = ", "4.612e+12 us"))
    rc, out, err = cli(capsys, *COLLECTIVE, "--sizes", "1MiB", "--step-latency-us", "1")
    assert rc == 0, err
    # the scenario's step_latency_us alike, instead of "workload: node 0: a duration of inf"
    p = write(tmp_path, RING.format(algorithm="ring") + "step_latency_us = 1e308\n")
    line = refused(capsys, "run", p, "--out", tmp_path / "o",
                   has=("workload.step_latency_us = 1e+308", "4.612e+12 us"))
    assert "node" not in line


def test_collective_chunks_refusal_names_the_flag(capsys):
    """The ring stream's step-count limit named the field "--engine flow.chunks", a
    scenario-style name this command has no such field for; it is the --chunks flag."""
    line = refused(capsys, *COLLECTIVE, "--sizes", "8GiB", "--chunks", "100000000",
                   "--engine", "flow", "--step-latency-us", "0")
    assert line.startswith("netcosim: error: --chunks = 100000000: a ring over 16 ranks"), line
