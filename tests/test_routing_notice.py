"""The plane warning: single-path policies on fullflat stripe over the planes on every engine
(tests/test_fullflat_planes.py) except the packet engine with warm connections (one connection
per host pair, one plane: a ring all-reduce gets 1/planes of each GPU's bandwidth). The CLI
says so on stderr in that case only, and runs."""

import pytest

from netcosim import routing_notice
from cli_helpers import FULLFLAT_RING, cli, write
from topo.builders import fullflat, two_tier

RING = FULLFLAT_RING


@pytest.mark.parametrize("policy", routing_notice.SINGLE_PATH)
def test_single_path_policies_on_planes_are_named_for_warm_packet_connections(policy):
    t = fullflat(16, planes=4, switch_radix=16)
    text = routing_notice.plane_notice(t, policy, "packet", warm_connections=True)
    assert text is not None and repr(policy) in text and "1/4" in text and "warm" in text
    assert routing_notice.plane_notice(t, policy, "packet") is None
    for engine in ("flow", "analytical"):
        assert routing_notice.plane_notice(t, policy, engine, warm_connections=True) is None


def test_no_notice_where_it_does_not_apply():
    ff = fullflat(16, planes=4, switch_radix=16)
    assert routing_notice.plane_notice(ff, "spray", "packet", True) is None
    assert routing_notice.plane_notice(fullflat(16, planes=1, switch_radix=16), "ecmp",
                                       "packet", True) is None
    assert routing_notice.plane_notice(two_tier(2), "ecmp", "packet", True) is None


def test_packet_run_warns_and_the_warning_is_what_it_says(tmp_path, capsys):
    """ecmp on the packet engine with warm connections runs (exit 0) with the warning, and the
    ring's data then leaves each GPU over one of its 4 uplinks (its one peer, one plane; the
    others carry ACKs only); without warm connections, no warning and all 4 carry data."""
    routing_notice._shown.clear()
    for warm, uplinks in ((True, 1), (False, 4)):
        out = tmp_path / str(warm)
        text = RING.format(policy="ecmp", engine="packet", size="1MiB",
                           warm=f"\nwarm_connections = {str(warm).lower()}")
        rc, _, err = cli(capsys, "run", write(tmp_path, text, f"{warm}.toml"), "--out", out)
        assert rc == 0, err
        assert ("warning: routing.policy = 'ecmp' on fullflat with engine.warm_connections"
                in err) == warm
        sent = {g: [] for g in range(16)}
        for row in (out / "links.csv").read_text().splitlines()[1:]:
            u, _, nbytes = row.split(",")[:3]
            if int(u) < 16:
                sent[int(u)].append(float(nbytes))
        # uplinks carrying a tenth of the GPU's bytes or more (ACK-only links carry ~2%)
        used = {g: sum(b >= 0.1 * sum(x) for b in x) for g, x in sent.items()}
        assert used == {g: uplinks for g in range(16)}, warm


def test_flow_run_does_not_warn(tmp_path, capsys):
    routing_notice._shown.clear()
    text = RING.format(policy="ecmp", engine="flow", size="8MiB", warm="")
    rc, _, err = cli(capsys, "run", write(tmp_path, text, "ecmp.toml"), "--out", tmp_path / "o")
    assert rc == 0, err
    assert "warning" not in err
