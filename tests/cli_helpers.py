"""Helpers the CLI tests share: write a scenario, run the CLI in-process, expect a refusal."""
from pathlib import Path

from netcosim.cli import main


# one flow on a k=4 fat-tree: the base the sweep and fault-study reproducers add their tables to
FLOWS_BASE = """
[topology]
kind = "fat_tree"
k = 4
[workload]
kind = "flows"
flows = [{src = 0, dst = 5, bytes = 100000}]
"""
STUDY = FLOWS_BASE + """[faults_study]
trials = 1
fraction = 0.1
"""

# a small training step (two two_tier nodes of 2 GPUs, TP 2): the base of the training CLI
# and sweep tests
TRAIN_BASE = """
name = "train"
[topology]
kind = "two_tier"
nodes = 2
gpus_per_node = 2
[workload]
kind = "training"
gpu = "H100-SXM"
model = { layers = 2, hidden = 256, heads = 4, seq = 128, vocab = 1000 }
[workload.parallel]
tp = 2
pp = 1
micro_batch = 1
global_batch = 4
"""
# a small serving run without its request stream (Llama 3 8B, TP 4 x DP 2 on one two_tier
# node): the serving tests add their own [workload.requests]
SERVE_HEAD = """
name = "inf"
seed = 3
[topology]
kind = "two_tier"
nodes = 1
gpus_per_node = 8
scaleup_gbps = 3600
[workload]
kind = "inference"
model = "llama3-8b"
gpu = "h100_sxm"
parallel = { tp = 4, dp = 2 }
"""


def write(tmp_path, text, name="s.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def cli(capsys, *argv):
    """(exit status, stdout, stderr) of ``netcosim argv...`` run in this process."""
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def refused(capsys, *argv, has=()):
    """Runs the CLI and asserts exit 2 with one line on stderr containing every `has`."""
    rc, out, err = cli(capsys, *argv)
    assert rc == 2, (rc, out, err)
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("netcosim: error: "), err
    for h in has:
        assert h in lines[0], (h, lines[0])
    return lines[0]


# a ring all-reduce on a 16-GPU fullflat of 4 planes: the plane-striping tests'
# (tests/test_fullflat_planes.py, tests/test_routing_notice.py) scenario, to .format with
# policy, engine, warm (an extra [engine] line or "") and size
FULLFLAT_RING = """
[topology]
kind = "fullflat"
n_gpus = 16
planes = 4
switch_radix = 16
gpu_gbps = 1600
[routing]
policy = "{policy}"
[engine]
kind = "{engine}"{warm}
[workload]
kind = "collective"
op = "all_reduce"
algorithm = "ring"
bytes = "{size}"
"""
