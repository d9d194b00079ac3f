"""The memory guard's budget respects the process's own limits, not only the machine's.

A run under ``ulimit -v`` or in a container with a memory limit used to be measured against
the whole machine's MemAvailable: the guard let through a schedule that could not fit and the
run died of MemoryError (exit 1) or was killed by the kernel, instead of the one-line
refusal with exit 2."""
import os
import subprocess
import sys

import numpy as np
import pytest

from netcosim import memory_guard

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _child(code: str, limit_bytes: int | None) -> subprocess.CompletedProcess:
    pre = None
    if limit_bytes is not None:
        def pre():
            import resource
            resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop(memory_guard.BUDGET_ENV, None)
    return subprocess.run([sys.executable, "-c", code], preexec_fn=pre, env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_available_bytes_within_address_space_limit():
    limit = 3 << 30
    r = _child("from netcosim import memory_guard as m; print(m.available_bytes())", limit)
    assert r.returncode == 0, r.stderr
    assert 0 < int(r.stdout.split()[-1]) <= limit


def test_cli_refuses_what_the_address_space_limit_cannot_hold(tmp_path):
    # 2,000 ranks, full form: ~16 M nodes, about 15 GiB by the guard's estimate; under a
    # 3 GiB address-space limit this must be the guard's exit 2, not a MemoryError (exit 1)
    out = tmp_path / "out"
    code = ("import sys; from netcosim.cli import main; sys.exit(main(['run', "
            "'examples/ring_allreduce_fat_tree.toml', '--set', 'topology.k=20', '--set', "
            "'workload.network_detail=full', '--set', 'workload.bytes=1GiB', '--out', "
            f"{str(out)!r}]))")
    r = _child(code, 3 << 30)
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert "of memory" in r.stderr and "Traceback" not in r.stderr
    assert not out.exists()


def test_cgroup_limit_counts(tmp_path, monkeypatch):
    (tmp_path / "proc").write_text("0::/job\n")
    d = tmp_path / "cg" / "job"
    d.mkdir(parents=True)
    (d / "memory.max").write_text(str(6 << 30) + "\n")
    (d / "memory.current").write_text(str(1 << 30) + "\n")
    monkeypatch.setattr(memory_guard, "CGROUP_ROOT", str(tmp_path / "cg"))
    monkeypatch.setattr(memory_guard, "PROC_CGROUP", str(tmp_path / "proc"))
    assert memory_guard._cgroup_room() == 5 << 30
    assert memory_guard.available_bytes() <= 5 << 30
    (d / "memory.max").write_text("max\n")
    assert memory_guard._cgroup_room() is None


def test_full_collective_refused_before_the_protocol_estimate(tmp_path, monkeypatch, capsys):
    """protocol = "auto" prices an all-to-all pair by pair (a minute and 5 GB at 4,096 ranks);
    a schedule that cannot fit in any form is refused before that estimate runs."""
    from collectives import protocols
    from netcosim.cli import main

    def no_estimate(*a, **k):
        raise AssertionError("the protocol estimate ran before the memory guard")

    monkeypatch.setattr(protocols, "best", no_estimate)
    monkeypatch.setenv(memory_guard.BUDGET_ENV, "1GiB")
    p = tmp_path / "a2a.toml"
    p.write_text('[topology]\nkind = "fullflat"\nn_gpus = 1024\nswitch_radix = 512\n'
                 '[workload]\nkind = "collective"\nop = "all_to_all"\nalgorithm = "direct"\n'
                 'bytes = "1GiB"\n')
    assert main(["validate", str(p)]) == 2
    # the fullflat routing warning is printed once per process: whether it shows here
    # depends on which tests ran before, so only the refusal is counted
    err = [line for line in capsys.readouterr().err.strip().splitlines()
           if not line.startswith("warning:")]
    # one transfer per ordered pair: 1024 x 1023
    assert len(err) == 1 and "1,047,552 transfers" in err[0], err


def test_all_to_all_transfer_count_is_exact():
    import collectives

    for algo in ("direct", "pairwise"):
        s = collectives.build("all_to_all", algo, list(range(24)), 1 << 20, protocol="simple")
        assert memory_guard.collective_transfers("all_to_all", algo, 24) == s.n_transfers


@pytest.mark.parametrize("dims,chunks", [((4, 4, 4), 1), ((8, 4), 3), ((3, 5), 2), ((16,), 1)])
def test_torus_all_reduce_count_is_exact(dims, chunks):
    import collectives

    n = int(np.prod(dims))
    s = collectives.build("all_reduce", "torus", list(range(n)), 1 << 20, dims=dims,
                          protocol="simple", chunks=chunks)
    assert memory_guard.collective_transfers("all_reduce", "torus", n, chunks, dims) == \
        s.n_transfers


@pytest.mark.parametrize("g,n,chunks", [(8, 64, 1), (4, 32, 2), (2, 6, 1)])
def test_hierarchical_all_reduce_count_is_exact(g, n, chunks):
    import collectives

    s = collectives.build("all_reduce", "hierarchical", list(range(n)), 1 << 20, group_size=g,
                          protocol="simple", chunks=chunks)
    assert memory_guard.collective_transfers("all_reduce", "hierarchical", n, chunks,
                                             group_size=g) == s.n_transfers


def test_torus_all_reduce_that_fits_is_not_refused(tmp_path, monkeypatch, capsys):
    """A 16 x 16 x 8 torus all-reduce is 151,552 transfers; the 2 n (n - 1) bound (8.4 M,
    about 8 GiB) refused it under a 2 GiB budget (and a 32 x 32 x 16 one, 2.5 M transfers,
    8.7 s and 1.75 GB, on any machine)."""
    from netcosim.cli import main

    monkeypatch.setenv(memory_guard.BUDGET_ENV, "2GiB")
    # the full form: with one chunk "auto" runs phases of streams (no guard on the count)
    assert main(["validate", "examples/torus_allreduce.toml", "--set",
                 "topology.dims=[16, 16, 8]", "--set", "workload.protocol=simple", "--set",
                 "workload.network_detail=full"]) == 0
    assert "151552 transfers" in capsys.readouterr().out


def test_local_sweep_workers_share_the_room(monkeypatch):
    """Each of `netcosim sweep`'s local workers plans on its share of the room left: the room
    one worker measures does not hold back what the others will still take (two workers of the
    co-design study outgrew the 24 GB machine together)."""
    import os

    from netcosim.sweep.execute import Backend, open_pool

    monkeypatch.delenv(memory_guard.BUDGET_ENV, raising=False)
    monkeypatch.delenv(memory_guard.WORKERS_ENV, raising=False)
    monkeypatch.setattr(memory_guard, "available_bytes", lambda: 10 << 30)
    alone, _ = memory_guard.budget()
    with open_pool(Backend(jobs=2)):
        assert os.environ[memory_guard.WORKERS_ENV] == "2"  # what the workers inherit
        shared, words = memory_guard.budget()
    assert memory_guard.WORKERS_ENV not in os.environ
    assert shared == alone // 2 and "2 sweep workers" in words
    with open_pool(Backend(jobs=1)):  # one point at a time: all of it
        assert memory_guard.WORKERS_ENV not in os.environ
