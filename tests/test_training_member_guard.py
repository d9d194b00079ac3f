"""The memory guard of a training step's scalable form: after its schedule is built and before
the flow engine routes every member of its member sets, a step whose routes cannot fit is
refused (exit 2, the estimate in the message) instead of dying of MemoryError or an OOM kill."""
from netcosim import memory_guard
from cli_helpers import cli, write

STEP = """
[topology]
kind = "two_tier"
nodes = 4
gpus_per_node = 8
[workload]
kind = "training"
gpu = "h100_sxm"
model = "llama3-8b"
[workload.parallel]
tp = 8
pp = 2
dp = 2
micro_batch = 1
global_batch = 8
"""


def test_step_is_refused_when_its_member_routes_do_not_fit(tmp_path, capsys, monkeypatch):
    """What routing adds is held to the room left beside the built schedule: a budget the
    scenario and the schedule fit in, but not the routes, refuses at this guard."""
    path = write(tmp_path, STEP)
    seen = {}
    real = memory_guard.check_member_routes

    def spy(n_nodes, n_members, *a, **k):
        seen["nodes"], seen["members"] = n_nodes, n_members
        return real(n_nodes, n_members, *a, **k)

    monkeypatch.setattr(memory_guard, "check_member_routes", spy)
    monkeypatch.setenv(memory_guard.BUDGET_ENV, "1GiB")
    rc, _, err = cli(capsys, "run", path, "--out", tmp_path / "a")
    assert rc == 0, err
    assert seen["members"] > 0
    # routes of 2 GiB: over the 1 GiB budget the rest of the run fits in
    monkeypatch.setattr(memory_guard, "MEMBER_BYTES", (2 << 30) // seen["members"] + 1)
    rc, _, err = cli(capsys, "run", path, "--out", tmp_path / "b")
    assert rc == 2, err
    assert "member connections to route" in err and "Traceback" not in err
    assert not (tmp_path / "b").exists()


def test_plan_takes_the_pipeline_layouts_run_takes():
    """Llama 3 405B (126 layers) on 16 stages x 8 virtual stages: run splits it 0, 1 x 126, 0
    (compute/parallel.py); plan refused it as more positions than layers."""
    import pytest

    from compute import layouts
    from compute.model import get_model
    from compute.parallel import ParallelConfig, layer_split
    from topo.errors import InputError

    m = get_model("llama3-405b")
    split = layer_split(m, ParallelConfig(tp=8, pp=16, vp=8, dp=128))
    assert split[0] == split[-1] == 0 and sum(split) == 126
    layouts.check_fixed(m, 16384, 2048, {"tp": 8, "pp": 16, "vp": 8})
    with pytest.raises(InputError, match="parallel.vp = 9"):
        layouts.check_fixed(m, 16384, 2048, {"tp": 8, "pp": 16, "vp": 9})
