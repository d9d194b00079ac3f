"""A fault event that leaves its link's capacity unchanged (degrade by 1.0, ``up`` of a link
at nominal bandwidth, a repeated ``down``) changes nothing. It used to mark the link as
faulted, which split the scalable form's member sets and gave replicas their own compute
chains: the baseline point of a sweep over ``factor = [1.0, ...]`` differed from the
fault-free run (Llama 3 405B on 2,048 GPUs: 7.1557 s -> 7.1478 s; on 16,384 GPUs the exposed
pipeline time went from 0.42 s to 0.26 s)."""
import json

import numpy as np

from topo.faults import DEGRADE, DOWN, UP, LinkFaults


def test_no_op_events_are_dropped():
    t = np.array([0.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    d = np.array([0, 1, 0, 0, 0, 0, 1, 1])
    k = np.array([DEGRADE, UP, DEGRADE, DEGRADE, DOWN, DOWN, DEGRADE, UP])
    f = np.array([1.0, 1.0, 0.5, 0.5, 0.0, 0.0, 0.25, 1.0])
    lf = LinkFaults(t, d, k, f)
    # kept: link 0 degrade 0.5 at 1, down at 3; link 1 degrade 0.25 at 5, up at 6
    assert lf.time.tolist() == [1.0, 3.0, 5.0, 6.0]
    assert lf.dlink.tolist() == [0, 0, 1, 1]
    assert lf.factor.tolist() == [0.5, 0.0, 0.25, 1.0]
    for when in (0.0, 1.5, 3.5, 5.5, 7.0):
        full = np.ones(2)
        for ti, di, fi in zip(t, d, f):
            if ti <= when:
                full[di] = fi
        assert lf.capacity_factor_at(2, when).tolist() == full.tolist()


def test_training_step_with_a_no_op_fault_equals_the_fault_free_step(tmp_path):
    from netcosim.cli import main

    base = ["examples/llama3_405b_16k.toml", "--set", "topology.nodes=256", "--set",
            "workload.parallel.dp=16", "--set", "workload.parallel.global_batch=256"]
    assert main(["run", *base, "--out", str(tmp_path / "a")]) == 0
    assert main(["run", *base, "--set",
                 'faults=[{link=[0,2304],kind="degrade",factor=1.0}]',
                 "--out", str(tmp_path / "b")]) == 0
    a, b = (json.loads((tmp_path / x / "summary.json").read_text()) for x in "ab")
    assert b["step_time_s"] == a["step_time_s"]
    assert b["exposed_comm_s"] == a["exposed_comm_s"]
    assert b["engine_flows"] == a["engine_flows"]
