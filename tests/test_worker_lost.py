"""A worker killed under a point (as the out-of-memory killer does) is reported as WorkerLost,
which the CLI turns into one line with exit 1, not an internal error."""
import os

import pytest

from netcosim.sweep.execute import Pool, WorkerLost


def _die(batch):
    os._exit(9)  # what SIGKILL from the OOM killer looks like to loky: the process is gone


def test_killed_worker_is_reported_with_what_to_do():
    pool = Pool(2, "loky", 2)
    with pytest.raises(WorkerLost, match=r"--jobs 1.*--resume"):
        list(pool.map(_die, [[1], [2]]))


def test_cli_turns_worker_lost_into_one_line(monkeypatch, capsys):
    from netcosim import cli

    def fail(args):
        raise WorkerLost("a worker process was killed while it ran")

    parser = cli.build_parser()
    args = parser.parse_args(["sweep", "x.toml"])
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    monkeypatch.setattr(args, "func", fail, raising=False)
    monkeypatch.setattr(parser, "parse_args", lambda argv=None: args)
    assert cli.main(["sweep", "x.toml"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "worker process was killed" in err
    assert "internal error" not in err
