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


def test_a_budget_below_the_entries_is_refused_and_none_is_unchecked(monkeypatch):
    from netcore.flow import engine as E

    # the step splits uneven sets, checked first (test_the_split_is_checked_before_it_is_made)
    monkeypatch.setattr(E, "_check_split", lambda *a: None)
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
    # the split's check or the entries' (whichever comes first) refuses
    refused(capsys, "run", sc, "--out", out, has=("engine.memory_budget", "flow engine"))
    assert not out.exists()


def test_the_split_is_checked_before_it_is_made(monkeypatch):
    """Splitting members off uneven sets copies the schedule and adds pieces and joins; the
    engine counts them before the copy (the training guard leaves them out: only routing tells
    which sets are uneven). The count bounds the nodes the split adds, and a budget below it
    refuses with the split named."""
    from netcore.flow import engine as E
    from netcore.members import MemberSets
    from netcore.schedule import Schedule
    from topo.builders.custom import custom

    # hosts 0-2 on switch 5, hosts 3-4 on switch 6: set 0's 1->3 shares the 5-6 link with
    # set 1's 2->4 while its 0->1 does not, so it is split off (tests/test_uneven_split.py)
    fab = custom(5, 2, [[0, 5, 100, 1], [1, 5, 100, 1], [2, 5, 100, 1], [3, 6, 100, 1],
                        [4, 6, 100, 1], [5, 6, 100, 1]])
    ptr, src, dst = np.array([0, 2, 3]), np.array([0, 1, 2]), np.array([1, 3, 4])
    # each set is named by two nodes, the second waiting for the first
    s = Schedule(kind=[TRANSFER] * 4, src=[0, 2, 0, 2], dst=[1, 4, 1, 4], size=[1 << 20] * 4,
                 duration=[0.0] * 4, start=[0.0] * 4, dep_ptr=np.array([0, 0, 0, 1, 2]),
                 dep_idx=np.array([0, 1]), mset=np.array([0, 1, 0, 1]),
                 sets=MemberSets(ptr, src, dst))
    counted, made = [], []
    from netcore.flow import fault_split
    real_check, real_split = E._check_split, fault_split.split

    def spy(schedule, affected, budget, rss0):
        counted.append((schedule.n, affected.copy()))
        return real_check(schedule, affected, budget, rss0)

    def grab(schedule, affected):
        out = real_split(schedule, affected)
        made.append(out[0].n - schedule.n)
        return out

    monkeypatch.setattr(E, "_check_split", spy)
    monkeypatch.setattr(fault_split, "split", grab)
    res = simulate(fab, s, "shortest", engine="flow", memory_budget=1 << 40)
    # two pieces, and a join for the node with a child
    assert res.info["split_pieces"] == 2 and made == [3]
    n, affected = counted[0]
    assert affected.tolist() == [False, True, False]
    # the check's count: a piece per node naming set 0 and its outlier, a join per such node
    owner = np.repeat(np.arange(2), np.diff(ptr))
    per_node = np.bincount(owner[affected], minlength=2)[s.mset]
    assert int(per_node.sum() + np.count_nonzero(per_node)) >= made[0]
    assert fault_split.added_nodes(s, affected) == int(per_node.sum() + np.count_nonzero(per_node))
    with pytest.raises(InputError, match=r"splitting 4 nodes .*engine\.memory_budget"):
        simulate(fab, s, "shortest", engine="flow", memory_budget=1000)
