"""Every algorithm passes the symbolic checker for many rank counts; corrupted schedules fail."""
import numpy as np
import pytest

import collectives as co
from collectives import CheckFailed, check
from netcore.schedule import DELAY, TRANSFER, Schedule

from collective_helpers import options_for


def _nbytes(op, n, seed=0):
    if op == "all_to_all_v":
        return np.random.default_rng(seed + n).integers(0, 40, (n, n))
    return 997  # prime: uneven blocks everywhere


CASES = [(op, algo) for op, algos in co.ALGORITHMS.items() for algo in algos]


@pytest.mark.parametrize("op,algo", CASES)
def test_every_algorithm_every_rank_count(op, algo):
    checked = 0
    for n in range(2, 18):
        opts = options_for(op, algo, n)
        if opts is None:
            continue
        for chunks in (1, 2):
            s = co.build(op, algo, list(range(n)), _nbytes(op, n), chunks=chunks, **opts)
            summary = check(s)
            assert summary["transfers"] == s.n_transfers > 0
            # parents always precede children (engines may rely on it)
            child = np.repeat(np.arange(s.n), np.diff(s.dep_ptr))
            assert (s.dep_idx < child).all()
            assert s.meta["op"] == op and s.meta["n_ranks"] == n
            checked += 1
    assert checked >= 8


@pytest.mark.parametrize("op,algo", CASES)
def test_step_latency_is_a_delay_before_every_transfer(op, algo):
    n = 6
    s = co.build(op, algo, [10 + i for i in range(n)], _nbytes(op, n), chunks=2,
                 step_latency_s=2e-6, **options_for(op, algo, n))
    check(s)
    t = np.flatnonzero(s.kind == TRANSFER)
    owner = np.repeat(np.arange(s.n), np.diff(s.dep_ptr))
    par_t = s.dep_idx[np.isin(owner, t)]
    own = owner[np.isin(owner, t)]
    # each transfer has exactly one DELAY parent, 2 us on its sender, that only it follows
    delay = s.kind[par_t] == DELAY
    assert np.array_equal(np.bincount(own[delay], minlength=s.n)[t], np.ones(len(t)))
    d = par_t[delay]
    assert np.allclose(s.duration[d], 2e-6) and (s.src[d] == s.src[own[delay]]).all()
    # its other parents are the sender's earlier sends (the order the connection keeps),
    # which the step latency does not follow: data dependencies go through the delay
    other = ~delay
    assert (s.kind[par_t[other]] == TRANSFER).all()
    assert (s.src[par_t[other]] == s.src[own[other]]).all()
    switches = set(np.asarray(s.meta.get("switches", ()), dtype=np.int64).tolist())
    assert set(np.unique(s.src[t])) <= set(range(10, 16)) | switches


def _drop_edge(s: Schedule, child: int, parent: int) -> Schedule:
    keep = np.ones(len(s.dep_idx), dtype=bool)
    lo, hi = s.dep_ptr[child], s.dep_ptr[child + 1]
    hit = np.flatnonzero(s.dep_idx[lo:hi] == parent)
    assert hit.size, "edge not present"
    keep[lo + hit] = False
    owner = np.repeat(np.arange(s.n), np.diff(s.dep_ptr))
    ptr = np.concatenate([[0], np.cumsum(np.bincount(owner[keep], minlength=s.n))])
    return Schedule(s.kind, s.src, s.dst, s.size, s.duration, s.start, ptr, s.dep_idx[keep],
                    s.tag, s.label, s.labels, dict(s.extra), dict(s.meta))


def _copy(s: Schedule) -> Schedule:
    return Schedule(s.kind, s.src.copy(), s.dst.copy(), s.size.copy(), s.duration, s.start,
                    s.dep_ptr, s.dep_idx, s.tag, s.label, s.labels,
                    {k: v.copy() for k, v in s.extra.items()}, dict(s.meta))


@pytest.mark.parametrize("op,algo", [("all_reduce", "ring"), ("all_reduce", "double_binary_tree"),
                                     ("all_reduce", "recursive_halving_doubling"),
                                     ("all_gather", "ring"), ("all_to_all", "hierarchical"),
                                     ("broadcast", "tree"), ("reduce_scatter", "direct")])
def test_dropping_any_transfer_is_caught(op, algo):
    n = 6
    s = co.build(op, algo, n, 600, **options_for(op, algo, n))
    check(s)
    t = np.flatnonzero(s.kind == TRANSFER)
    for victim in t[:: max(1, len(t) // 7)]:
        keep = np.ones(s.n, dtype=bool)
        keep[victim] = False
        with pytest.raises(CheckFailed):
            check(s.subset(keep))


def test_swapped_destination_is_caught():
    # (a redirected *early* reduce-scatter step can still sum correctly: its data may reach
    # a rank further down the same chain. Redirect the last step into the shard's owner.)
    s = co.ring_all_reduce(5, 500)
    bad = _copy(s)
    i = int(np.flatnonzero((bad.kind == TRANSFER) & (bad.tag == 3) & (bad.src == 0))[0])
    bad.dst[i] = (bad.dst[i] + 2) % 5  # a different, real rank
    assert bad.dst[i] != bad.src[i]
    with pytest.raises(CheckFailed):
        check(bad)


def test_broken_data_dependency_is_caught_as_a_race():
    # ring step 1 of rank 1 forwards what rank 0 sent at step 0: remove that edge
    s = co.ring_all_reduce(4, 400)
    t = np.flatnonzero(s.kind == TRANSFER)
    step0_r0 = next(i for i in t if s.tag[i] == 0 and s.src[i] == 0)
    step1_r1 = next(i for i in t if s.tag[i] == 1 and s.src[i] == 1)
    assert step0_r0 in s.deps_of(step1_r1)
    with pytest.raises(CheckFailed, match="may still be writing"):
        check(_drop_edge(s, step1_r1, step0_r0))


def test_broken_dependency_in_a_move_op_sends_unheld_data():
    s = co.ring_broadcast(4, 400, chunks=2)
    t = np.flatnonzero(s.kind == TRANSFER)
    hop1 = next(i for i in t if s.tag[i] == 1)
    parent = next(p for p in s.deps_of(hop1) if s.tag[p] == 0)
    with pytest.raises(CheckFailed):
        check(_drop_edge(s, hop1, parent))
    with pytest.raises(CheckFailed, match="before it holds it"):
        check(_drop_edge(s, hop1, parent), races=False)


def test_wrong_reduce_flag_and_wrong_size_are_caught():
    s = co.ring_all_reduce(4, 400)
    bad = _copy(s)
    bad.extra["reduce"][0] = 0  # the first reduce-scatter step overwrites instead of adding
    with pytest.raises(CheckFailed, match="missing the contribution"):
        check(bad)
    bad = _copy(s)
    bad.size[2] += 1
    with pytest.raises(CheckFailed, match="bytes"):
        check(bad)


def test_double_counting_is_caught():
    # a reduce tree where one child's sum is added twice
    s = co.tree_reduce(4, 100)
    t = np.flatnonzero(s.kind == TRANSFER)
    dup = Schedule.concat([s, s.subset(np.isin(np.arange(s.n), t[:1]))])
    dup.meta = dict(s.meta)
    with pytest.raises(CheckFailed):
        check(dup)


def test_checker_refuses_non_collective_schedules():
    s = Schedule.from_transfers([0], [1], [10])
    with pytest.raises(CheckFailed, match="meta"):
        check(s)


def test_counts_past_any_integer_width_are_still_more_than_once():
    """33 all-reduces in a row count each contribution 2^32 times: a 32-bit count wrapped to 0
    and the checker reported the contributions missing; counts saturate now."""
    one = co.ring_all_reduce(2, 200)
    s = Schedule.concat([one] * 33, after_all=True)
    s.meta.update(one.meta)
    with pytest.raises(CheckFailed, match="more than once") as e:
        check(s)
    assert "missing" not in str(e.value)
