"""Flows naming the same member set share one copy of its path (docs/flow_engine.md, "Shared
paths"): the same bits as when every flow holds a private copy, with faults re-routing them,
under tcp, and with a fraction of the path entries."""
import numpy as np
import pytest

from member_fixtures import member_step
from netcore.api import simulate
from netcore.flow import engine as E
from topo.faults import DOWN, UP, LinkFaults


def _private_assign(routing, st, flows, alive):
    """The engine's assignment before paths were shared: a copy of the set's row per flow."""
    if not hasattr(routing, "node_paths"):
        return REAL_ASSIGN(routing, st, flows, alive)
    single, single_paths, grouped, rows, table, _ = routing.node_paths(flows, alive)
    lost = [st.assign(flows[single], single_paths)] if single.size else []
    if grouped.size:
        lost.append(st.assign(flows[grouped], table.take(rows)))
    return np.concatenate(lost) if lost else np.zeros(0, dtype=np.int64)


REAL_ASSIGN = E._assign


def _entries(monkeypatch, held):
    real = E.FlowState.fit_slots

    def grab(self):
        held.append(self.n_ent)
        return real(self)

    monkeypatch.setattr(E.FlowState, "fit_slots", grab)


def _faults(fab, seed):
    rng = np.random.default_rng(seed)
    sw = np.flatnonzero((fab.dlink_src >= fab.n_hosts) | (fab.dlink_dst >= fab.n_hosts))
    rows = []
    for d in rng.choice(sw, 3, replace=False):
        t0 = float(rng.random() * 2e-3)
        rows += [(t0, int(d), DOWN, 0.0), (t0 + float(rng.random() * 3e-3), int(d), UP, 1.0)]
    rows.sort()
    return LinkFaults(*(np.array(c) for c in zip(*rows)))


# seeds: faults that move waiting flows to other set tables (1, 4), and one that also stops a
# sending flow and re-routes it (7)
@pytest.mark.parametrize("transport, seed", [("fluid", None), ("fluid", 1), ("fluid", 7),
                                             ("tcp", 4)])
def test_shared_paths_give_the_bits_of_private_copies(monkeypatch, transport, seed):
    fab, s = member_step()
    faults = None if seed is None else _faults(fab, seed)
    held_shared, held_private = [], []
    _entries(monkeypatch, held_shared)
    shared = simulate(fab, s, "ecmp", faults, engine="flow", transport=transport,
                      reroute_delay_us=1.0)
    monkeypatch.setattr(E, "_assign", _private_assign)
    _entries(monkeypatch, held_private)
    private = simulate(fab, s, "ecmp", faults, engine="flow", transport=transport,
                       reroute_delay_us=1.0)
    for k in ("start", "end", "link_bytes", "link_busy"):
        assert np.array_equal(getattr(shared, k), getattr(private, k), equal_nan=True), k
    assert shared.events == private.events
    if seed == 7:
        assert shared.node_extra["reroutes"].sum() > 0
    # the step names each set many times: one copy of its path instead of one per flow
    assert held_shared[0] * 2 < held_private[0]
