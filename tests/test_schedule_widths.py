"""Integer widths of a Schedule's narrow columns: a value that does not fit is refused, never
wrapped. ``steps`` is int32; a ring stream of 2**31 + 5 serial steps used to become
-2147483643 steps without a word."""
import os
import subprocess
import sys

import numpy as np
import pytest

from netcore.schedule import TRANSFER, Schedule, ScheduleError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _one(**cols):
    base = dict(kind=np.array([TRANSFER]), src=np.array([0]), dst=np.array([1]),
                size=np.array([10]), duration=np.zeros(1), start=np.zeros(1),
                dep_ptr=np.array([0, 0]), dep_idx=np.zeros(0, np.int64))
    base.update(cols)
    return Schedule(**base)


@pytest.mark.parametrize("name,value", [("steps", 2**31 + 5), ("label", 40_000),
                                        ("src", 2**32 + 1), ("dst", -(2**31) - 1)])
def test_values_beyond_a_column_are_refused(name, value):
    with pytest.raises(ScheduleError, match=name):
        _one(**{name: np.array([value], dtype=np.int64)})


def test_values_that_fit_are_kept():
    s = _one(steps=np.array([2**31 - 1], dtype=np.int64), label=np.array([7], dtype=np.int64))
    assert int(s.steps[0]) == 2**31 - 1 and s.steps.dtype == np.int32 and int(s.label[0]) == 7


def test_stream_with_too_many_steps_is_an_input_error():
    from collectives.streams import Stream, stream_schedule

    st = Stream(np.arange(4), (np.arange(4) + 1) % 4, 10, 2**31 + 5, 0.0)
    with pytest.raises(ScheduleError):
        stream_schedule(list(range(4)), st, "x")


def test_ring_chunks_past_int32_steps_refused_before_allocating():
    # 16 ranks x 71,582,789 chunks: 2,147,483,670 steps; the (chunks, ranks) layout alone
    # would be 9 GB. Under a 2 GiB address-space limit this must be the one-line exit 2.
    def pre():
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    r = subprocess.run([sys.executable, "-m", "netcosim", "validate",
                        "examples/ring_allreduce_fat_tree.toml", "--set", "topology.k=4",
                        "--set", "workload.chunks=71582789", "--set", "workload.protocol=simple",
                        "--set", "workload.step_latency_us=0"],
                       cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), preexec_fn=pre,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stderr[-1500:]
    assert "workload.chunks = 71582789" in r.stderr and "Traceback" not in r.stderr
