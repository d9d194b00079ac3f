"""The plane warning: a single-path policy on fullflat puts each connection on one plane (a ring
all-reduce then gets 1/planes of each GPU's bandwidth); the CLI says so on stderr and runs."""
import json

import pytest

from netcosim import routing_notice
from cli_helpers import cli, write
from topo.builders import fullflat, two_tier

RING = """
[topology]
kind = "fullflat"
n_gpus = 16
planes = 4
switch_radix = 16
gpu_gbps = 1600
[routing]
policy = "{policy}"
[workload]
kind = "collective"
op = "all_reduce"
algorithm = "ring"
bytes = "256MiB"
"""


@pytest.mark.parametrize("policy", routing_notice.SINGLE_PATH)
def test_single_path_policies_on_planes_are_named(policy):
    text = routing_notice.plane_notice(fullflat(16, planes=4, switch_radix=16), policy)
    assert text is not None and repr(policy) in text and "1/4" in text


def test_no_notice_where_it_does_not_apply():
    assert routing_notice.plane_notice(fullflat(16, planes=4, switch_radix=16), "spray") is None
    assert routing_notice.plane_notice(fullflat(16, planes=1, switch_radix=16), "ecmp") is None
    assert routing_notice.plane_notice(two_tier(2), "ecmp") is None


def test_run_warns_and_the_warning_is_what_it_says(tmp_path, capsys):
    """ecmp runs (exit 0) with the warning; spray, without it, is several times faster: the
    ring's connections use every plane instead of one."""
    routing_notice._shown.clear()
    busbw = {}
    for policy in ("ecmp", "spray"):
        out = tmp_path / policy
        rc, _, err = cli(capsys, "run", write(tmp_path, RING.format(policy=policy), f"{policy}.toml"),
                         "--out", out)
        assert rc == 0, err
        assert ("warning: routing.policy = 'ecmp' on fullflat" in err) == (policy == "ecmp")
        busbw[policy] = json.loads((out / "summary.json").read_text())["busbw_GBps"]
    assert busbw["spray"] > 2.5 * busbw["ecmp"]
