"""Packet engine against ns-3 on the cases a random differential search found (sessions 40, 41).

Each scenario in tests/ns3_cases/ once ended differently in the two simulators (its header
says how, and which side changed: the engine, the ns-3 driver or the runner's routing); both
must now end every transfer at the same picosecond. tcp and dctcp.
The search itself (random small fabrics, routings, buffers, TCP options, flows and link faults;
docs/ns3.md, "A random differential search") is not a test: these are its reductions.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

CASES = Path(__file__).resolve().parent / "ns3_cases"
HAVE_NS3 = importlib.util.find_spec("ns") is not None
SKIP_NO_NS3 = pytest.mark.skipif(not HAVE_NS3, reason="ns-3 not installed (pip install -e '.[ns3]')")


@pytest.mark.parametrize("case", sorted(p.name for p in CASES.glob("*.toml")))
@pytest.mark.ns3
@SKIP_NO_NS3
def test_packet_engine_ends_every_transfer_with_ns3(case):
    from validation.ns3.compare import run_both

    _, prep, ns3, packet = run_both(CASES / case)
    assert prep.schedule.n > 0
    assert np.array_equal(np.isnan(ns3.end), np.isnan(packet.end))
    done = ~np.isnan(ns3.end)
    assert done.any()
    # to the picosecond (times are float seconds: a relative 1e-12 of a 13 s run is 13 ps)
    np.testing.assert_allclose(packet.end[done], ns3.end[done], rtol=1e-12, atol=1e-12)


@pytest.mark.ns3
@SKIP_NO_NS3
def test_a_path_through_a_node_twice_is_refused(tmp_path):
    """Valiant on a small dragonfly sends host 0 to host 1 (one router) through another
    group's router and back: ns-3's per-destination static routes cannot hold two next hops
    for one address at router 12, and the run used to leave the transfer unfinished."""
    from validation.ns3.compare import run_both
    from validation.ns3.support import NS3Unsupported

    sc = tmp_path / "valiant.toml"
    sc.write_text('name = "v"\nseed = 1\n[topology]\nkind = "dragonfly"\ngroups = 3\n'
                  'routers_per_group = 2\nhosts_per_router = 2\nglobal_links = 1\n'
                  '[routing]\npolicy = "valiant"\n[engine]\nkind = "packet"\n[workload]\n'
                  'kind = "flows"\nflows = [{ src = 0, dst = 1, bytes = 1000 }]\n')
    with pytest.raises(NS3Unsupported, match="transfer 0 passes node 12 twice"):
        run_both(sc)
