"""The flow engine refuses a scalable-form schedule whose path entries cannot fit in the memory
a run may still use (``engine.memory_budget``), before building them. DeepSeek-V3 with EP 64 on
65,536 GPUs needed 508 M entries (about 39 GiB) while every flow of a member set held its own
copy of the set's path, and grew past 21 GB before being killed, where the guards before the
engine, which estimate from member counts, let it through."""
import numpy as np
import pytest

from cli_helpers import refused, write
from member_fixtures import member_step
from netcore.api import simulate
from netcore.flow import state as flow_state
from netcore.flow.memory import ENTRY_BYTES
from netcore.schedule import TRANSFER
from topo.errors import InputError

def test_entry_count_is_what_the_engine_holds(monkeypatch):
    """The count the check is made from equals the entries the engine then assigns."""
    from netcore.flow import engine as E

    fab, s = member_step()
    counted, held = [], []
    real_check = E._check_entries

    def spy(mr, schedule, budget, rss0):
        counted.append(mr.entry_count(np.flatnonzero(schedule.kind == TRANSFER)))
        return real_check(mr, schedule, budget, rss0)

    real_fit = flow_state.FlowState.fit_slots

    def grab(self):
        held.append(self.n_ent)
        return real_fit(self)

    monkeypatch.setattr(E, "_check_entries", spy)
    monkeypatch.setattr(flow_state.FlowState, "fit_slots", grab)
    simulate(fab, s, "ecmp", engine="flow", memory_budget=1 << 40)
    assert counted and counted[0] == held[-1] > 0


def test_a_budget_below_the_entries_is_refused_and_none_is_unchecked():
    fab, s = member_step()
    free = simulate(fab, s, "ecmp", engine="flow")
    with pytest.raises(InputError, match=r"engine\.memory_budget") as e:
        simulate(fab, s, "ecmp", engine="flow", memory_budget=ENTRY_BYTES)
    assert "entries" in str(e.value) and "link classes" in str(e.value)
    ok = simulate(fab, s, "ecmp", engine="flow", memory_budget=1 << 40)
    assert np.array_equal(ok.end, free.end, equal_nan=True)


@pytest.mark.parametrize("bad", [0, -5, float("inf"), "8GiB", True])
def test_memory_budget_option_is_checked(bad):
    fab, s = member_step()
    with pytest.raises(InputError, match=r"engine\.memory_budget"):
        simulate(fab, s, "ecmp", engine="flow", memory_budget=bad)


def test_cli_refuses_with_exit_2_and_writes_nothing(tmp_path, capsys):
    sc = write(tmp_path, """
name = "budget"
[topology]
kind = "fullflat"
n_gpus = 32
planes = 2
switch_radix = 16
gpu_gbps = 800
[engine]
kind = "flow"
memory_budget = 100
[workload]
kind = "training"
model = { layers = 4, hidden = 512, heads = 8, seq = 512, vocab = 1024 }
gpu = "h100_sxm"
granularity = "coarse"
network_detail = "auto"
parallel = { tp = 4, pp = 2, sp = true, recompute = "selective", dist_opt = true, global_batch = 8 }
""")
    out = tmp_path / "out"
    refused(capsys, "run", sc, "--out", out, has=("engine.memory_budget", "entries"))
    assert not out.exists()
