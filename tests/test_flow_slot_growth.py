"""The flow engine's slot pool grows with the flows active at once (docs/flow_engine.md, "Per-link
slot lists"): runs that start with room for every transfer, with the default 16 per link and
with a single slot per link (a growth at almost every start) give the same bits."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import collectives as co
from netcore import Schedule, simulate
from netcore.flow import state as flow_state
from flow_fuzz import FT4, link_faults, tied_dags

ARRAYS = ("start", "end", "link_bytes", "link_busy")


def _run(start, *args, **opts):
    keep = flow_state.SLOT_START
    flow_state.SLOT_START = start
    try:
        return simulate(*args, **opts)
    finally:
        flow_state.SLOT_START = keep


def _assert_identical(a, b):
    for k in ARRAYS:
        assert np.array_equal(getattr(a, k), getattr(b, k), equal_nan=True), k
    for k in ("path_ptr", "path_link", "path_weight"):
        assert np.array_equal(a.node_extra[k], b.node_extra[k]), k
    for k in ("series_ptr", "series_t", "series_rate"):
        if k in a.link_extra:
            assert np.array_equal(a.link_extra[k], b.link_extra[k]), k
    assert a.events == b.events
    assert a.info["recomputes"] == b.info["recomputes"]


def _three(*args, **opts):
    full = _run(None, *args, **opts)
    default = _run(16, *args, **opts)
    tight = _run(1, *args, **opts)
    _assert_identical(full, default)
    _assert_identical(full, tight)
    return full, default, tight


@settings(max_examples=25, deadline=None)
@given(tied_dags(), st.integers(0, 2**32 - 1))
def test_growing_slots_changes_no_bit(sc, seed):
    sched, policy, transport = sc
    faults = link_faults(seed, 3, [0.5])
    _three(FT4, sched, policy, faults, link_series=True, reroute_delay_us=2.0,
           transport=transport)


def test_all_to_all_starting_at_once():
    """240 transfers start at 0: one growth makes room for all of them."""
    s = co.build("all_to_all", "direct", list(range(16)), 16 << 20)
    full, default, tight = _three(FT4, s, "ecmp")
    assert default.info["slot_layouts"] == 2


def test_pipelined_tree_holds_few_slots():
    """A pipelined tree's chunks start one after another: the pool follows the chunks in
    flight, a fraction of the entries of the whole schedule."""
    s = co.build("all_reduce", "double_binary_tree", list(range(16)), 64 << 20, chunks=64)
    full, default, _ = _three(FT4, s, "ecmp")
    assert default.info["slots"] * 4 < full.info["slots"]


def test_session_grows_its_pool_as_transfers_start():
    """Incremental runs (netcore.session) begin with no slots and grow them through the same
    pending list, including at instants whose completions the loop reports (sends from
    callbacks join that batch): the same bits as the DAG run at once."""
    from netcore.session import Session

    src = np.arange(16)
    dst = (src + 5) % 16
    sess = Session(FT4, engine="flow", routing="ecmp")
    second = np.zeros(16, dtype=np.int64)  # session id of the transfer host i sends second

    def then(i):
        second[i] = sess.send(int(src[i]), int(dst[i] ^ 1), 1 << 19, flow_key=16 + i)

    for i in range(16):  # each first transfer releases a second one from the same host
        sess.send(int(src[i]), int(dst[i]), 1 << 20, on_done=lambda _, i=i: then(i))
    sess.run()
    got = sess.result()
    batch = simulate(FT4, Schedule.from_transfers(
        np.concatenate([src, src]), np.concatenate([dst, dst ^ 1]),
        np.concatenate([np.full(16, 1 << 20), np.full(16, 1 << 19)]),
        deps=[[] for _ in range(16)] + [[i] for i in range(16)]), "ecmp")
    ids = np.concatenate([np.arange(16), second])
    assert got.info["slot_layouts"] >= 2
    assert np.array_equal(got.end[ids], batch.end)
    assert np.array_equal(got.start[ids], batch.start)
    assert np.array_equal(got.link_bytes, batch.link_bytes)
