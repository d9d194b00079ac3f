"""The memory guard of a training step's scalable form: after its schedule is built and before
the flow engine routes every member of its member sets, a step whose routes cannot fit is
refused (exit 2, the estimate in the message) instead of dying of MemoryError or an OOM kill."""
import numpy as np
import pytest

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


def _spy(monkeypatch, name: str) -> dict:
    """Record the (nodes, members, distinct members) a memory_guard check is called with; it
    still checks."""
    seen = {}
    real = getattr(memory_guard, name)

    def spy(n_nodes, n_members, *a, **k):
        seen["nodes"], seen["members"], seen["paths"] = n_nodes, n_members, a[0]
        return real(n_nodes, n_members, *a, **k)

    monkeypatch.setattr(memory_guard, name, spy)
    return seen


def test_step_is_refused_when_its_member_routes_do_not_fit(tmp_path, capsys, monkeypatch):
    """What routing adds is held to the room left beside the built schedule: a budget the
    scenario and the schedule fit in, but not the routes, refuses at this guard."""
    path = write(tmp_path, STEP)
    seen = _spy(monkeypatch, "check_member_routes")
    monkeypatch.setenv(memory_guard.BUDGET_ENV, "1GiB")
    few = ("--set", "workload.parallel.global_batch=4")  # 2 micro-batches: no pre-build probe
    rc, _, err = cli(capsys, "run", path, "--out", tmp_path / "a", *few)
    assert rc == 0, err
    assert seen["members"] > 0
    # routes of 2 GiB: over the 1 GiB budget the rest of the run fits in
    monkeypatch.setattr(memory_guard, "MEMBER_BYTES", (2 << 30) // seen["paths"][0] + 1)
    rc, _, err = cli(capsys, "run", path, "--out", tmp_path / "b", *few)
    assert rc == 2, err
    assert "member sets to route" in err and "Traceback" not in err
    assert not (tmp_path / "b").exists()


def test_members_are_counted_once_per_distinct_set(tmp_path):
    """The flow engine routes a member set once, whatever the nodes naming it (every micro-batch
    and replica of a collective): the guard counts each distinct set's members once, so a step
    of many micro-batches is not charged for them again and again. Before, the 1.8T MoE step on
    32,768 FullFlat GPUs (4.28 M nodes naming 4,160 sets of 622,592 members) was charged for
    275.8 M member connections (56.7 GiB) and refused; its run adds 1.9 GB."""
    from netcore.flow.member_routing import MemberPathMemo
    from netcore.schedule import TRANSFER
    from netcosim.scenario import load_scenario

    def counts(batch):
        p = load_scenario(write(tmp_path, STEP),
                          [f"workload.parallel.global_batch={batch}"]).prepare()
        s = p.schedule
        t = s.kind == TRANSFER
        used = np.unique(s.mset[t & (s.mset >= 0)])
        routed, singles = memory_guard.routed_members(s)
        assert singles == int((t & (s.mset < 0)).sum())
        return p, routed, int(s.sets.sizes[used].sum()), \
            int(s.members_per_node()[t & (s.mset >= 0)].sum())

    p, routed, distinct, named = counts(4)
    assert routed == distinct and 0 < distinct < named
    # the connections the engine's memo routes are at most the distinct members counted
    memo = MemberPathMemo(p.routing)
    s = p.schedule
    used = np.unique(s.mset[(s.kind == TRANSFER) & (s.mset >= 0)])
    pos = s.sets.positions(used)
    memo.paths(s.sets.src[pos], s.sets.dst[pos])
    assert len(memo._keys) <= routed
    # eight times the micro-batches: more members named (each micro-batch's pipeline sends),
    # the same distinct ones
    _, routed8, _, named8 = counts(32)
    assert named8 > named and routed8 == routed


def test_routing_rows_follow_the_switches_hosts_hang_on():
    """Anchored walks keep a distance row per switch a host hangs on (hosts on one FullFlat
    switch: one row); where hosts forward (a torus) a row per host; past the row cache, two
    chunks of it at most."""
    from topo.builders import build
    from topo.routing import DEFAULT_CACHE_BYTES

    ff = build("fullflat", {"n_gpus": 64, "planes": 1, "switch_radix": 64})
    assert memory_guard.routing_rows_bytes(ff) == 2 * 1 * ff.n_nodes * 4
    tt = build("two_tier", {"nodes": 4, "gpus_per_node": 8})
    leaves = np.unique(tt.dlink_dst[(tt.dlink_src < tt.n_hosts) & (tt.dlink_dst >= tt.n_hosts)])
    assert memory_guard.routing_rows_bytes(tt) == 2 * len(leaves) * tt.n_nodes * 4
    torus = build("torus", {"dims": [4, 4]})
    assert memory_guard.routing_rows_bytes(torus) == 2 * 16 * torus.n_nodes * 4
    big = build("fullflat", {"n_gpus": 16384, "planes": 8, "switch_radix": 2048})
    assert memory_guard.routing_rows_bytes(big) <= 2 * DEFAULT_CACHE_BYTES


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


def _probe_estimate(monkeypatch, tmp_path, text, *sets):
    """The (nodes, members) the pre-build guard was called with, call by call, with its first
    call (the one-unit bound) made to fail as on a machine too small for it; and the step as
    built."""
    from netcore.schedule import TRANSFER
    from netcosim.scenario import load_scenario
    from topo.errors import InputError

    calls = []
    real = memory_guard.check_schedule

    def spy(n_nodes, n_members, *a, **k):
        calls.append((n_nodes, n_members))
        if len(calls) == 1:
            raise InputError("the bound does not fit")
        return real(n_nodes, n_members, *a, **k)

    monkeypatch.setattr(memory_guard, "check_schedule", spy)
    s = load_scenario(write(tmp_path, text), sets).prepare().schedule
    tr = s.kind == TRANSFER
    return calls, (s.n, int(s.members_per_node()[tr].sum()))


def test_step_size_is_estimated_before_it_is_built(tmp_path, monkeypatch):
    """A step of one unit (a micro-batch, or pp when interleaved) times the units bounds the
    step; where the bound does not fit, a second step of two units gives the size exactly:
    every micro-batch adds the same nodes."""
    for sets in (["workload.parallel.global_batch=160"],  # 80 micro-batches
                 ["workload.parallel.vp=2", "workload.parallel.global_batch=256"]):
        calls, built = _probe_estimate(monkeypatch, tmp_path, STEP, *sets)
        assert len(calls) == 2
        bound, exact = calls
        assert exact == built
        assert bound[0] >= built[0] and bound[1] >= built[1]
    # a step of few micro-batches is not probed (the guard after the build covers it)
    calls, _ = _probe_estimate(monkeypatch, tmp_path, STEP, "workload.parallel.global_batch=6")
    assert not calls


def test_step_too_large_for_memory_is_refused_before_it_is_built(tmp_path, capsys, monkeypatch):
    """10,000 micro-batches of Mixtral 8x7B on 64 GPUs (about 90 GB of schedule) were killed
    for memory mid-build; refused at once now, naming global_batch, nothing written."""
    import time

    from pathlib import Path

    example = Path(__file__).resolve().parents[1] / "examples" / "mixtral_8x7b.toml"
    out = tmp_path / "o"
    monkeypatch.setenv(memory_guard.BUDGET_ENV, "20GiB")  # this machine size, on any machine
    t = time.perf_counter()
    rc, _, err = cli(capsys, "run", example, "--out", out,
                     "--set", "workload.parallel.global_batch=320000")
    assert rc == 2, err
    assert time.perf_counter() - t < 60  # a hang guard, not a speed target
    assert "10,000 micro-batches" in err and "parallel.global_batch" in err
    assert "Traceback" not in err and not out.exists()


def test_a_sweeps_check_of_a_layout_search_does_not_refuse_its_stand_in(monkeypatch):
    """A sweep checks a ``parallel = "best"`` point with a stand-in layout (netcosim.plan.
    checkable) that the search may never run: the memory guard refusing the stand-in does not
    refuse the sweep (each layout the search simulates is guarded then). A fixed layout the
    guard refuses still refuses the sweep. Found re-running the co-design study: the stand-in
    of the 1.8T MoE with SHARP on 1,024 GPUs is 16 M nodes, over a second worker's share."""
    import tomllib

    from netcosim.sweep.points import Checker

    data = tomllib.loads(STEP)
    data["name"] = "stand-in"
    monkeypatch.setenv(memory_guard.BUDGET_ENV, "1MB")  # no training step fits
    with pytest.raises(memory_guard.OverBudget, match="of memory, but"):
        Checker().check(data)
    data["workload"]["parallel"] = "best"
    data["workload"]["plan"] = {"global_batch": 8}
    Checker().check(data)  # passes: the stand-in was refused, not the search
    monkeypatch.setenv(memory_guard.BUDGET_ENV, "100GB")
    Checker().check(data)
