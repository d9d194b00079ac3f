"""`netcosim collective --engine flow|packet` at scale: the ring's stream form on the flow
engine, and the memory guard before any full schedule is built.

Before, every point was built transfer by transfer with no guard: a 1 GiB ring all-reduce
over fat_tree k=40 (16,000 ranks, 512 M transfers) died of MemoryError after 28 s and 11.5 GB
(or was killed), where `netcosim run` of the same collective takes 1.5 s."""
import pytest

from netcosim import memory_guard
from netcosim.cli import main


def _rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line and not line.startswith("#")]


def test_full_schedule_is_guarded(monkeypatch, capsys):
    monkeypatch.setenv(memory_guard.BUDGET_ENV, "1MiB")
    rc = main(["collective", "--topo", "fat_tree:k=8", "--op", "all_reduce", "--algo",
               "double_binary_tree", "--sizes", "1MiB", "--engine", "flow"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "transfers" in err[0] and "of memory" in err[0], err


def test_ring_on_flow_engine_is_one_stream_and_equals_the_full_form(monkeypatch, capsys):
    import collectives as co
    from collectives.choose import ordered_ranks
    from collectives.report import run as run_full
    from topo.builders import build

    # a budget no full schedule fits, and no full build at all: the stream needs neither
    monkeypatch.setenv(memory_guard.BUDGET_ENV, "1MiB")

    def no_build(*a, **k):
        raise AssertionError("the full ring schedule was built")

    monkeypatch.setattr(co, "build", no_build)
    rc = main(["collective", "--topo", "fat_tree:k=8,link_gbps=400", "--op", "all_reduce",
               "--algo", "ring", "--sizes", "1KiB,1GiB", "--protocol", "simple",
               "--engine", "flow"])
    assert rc == 0
    got = [float(r[1]) for r in _rows(capsys.readouterr().out)]
    monkeypatch.undo()
    topo = build("fat_tree", {"k": 8, "link_gbps": 400})
    r = ordered_ranks(topo)
    _, algo = co.resolve("all_reduce", "ring")
    want = [run_full(topo, "all_reduce", algo, r, s, engine="flow", protocol="simple")["time_us"]
            for s in (1024, 1 << 30)]
    assert got == pytest.approx(want, rel=1e-6)


def test_transfers_tcp_gave_up_on_are_not_blamed_on_faults(capsys):
    # 1 bit/s links: every connection runs out of SYN retries. `collective` has no faults, and
    # the message said "faults cut them off"
    rc = main(["collective", "--topo", "fat_tree:k=4,link_gbps=1e-9", "--op", "all_reduce",
               "--algo", "ring", "--sizes", "1MiB", "--engine", "packet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert "TCP gave up on 16 connections" in err[0] and "fault" not in err[0], err
