"""Integer widths of a Schedule's narrow columns: a value that does not fit is refused, never
wrapped. ``steps`` is int32; a ring stream of 2**31 + 5 serial steps used to become
-2147483643 steps without a word."""
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


def test_total_bytes_is_exact_beyond_int64():
    s = _one(kind=np.array([TRANSFER, TRANSFER]), src=np.array([0, 1]), dst=np.array([1, 0]),
             size=np.array([2**62, 2**62 + 1]), duration=np.zeros(2), start=np.zeros(2),
             dep_ptr=np.array([0, 0, 0]))
    assert s.total_bytes == 2**63 + 1


def test_huge_ring_all_reduce_bytes_exact_or_refused(tmp_path, capsys):
    """4 EiB over 16 ranks: the summary's bytes summed to -9223372036854775808; 6e18 bytes
    wrapped inside the stream's block sums and was refused as 'bytes -7196744073709551616
    must be >= 0'."""
    import json

    from netcosim.cli import main

    args = ["run", "examples/ring_allreduce_fat_tree.toml", "--set", "topology.k=4", "--set",
            "workload.protocol=simple"]
    assert main([*args, "--set", f"workload.bytes={2**62}", "--out", str(tmp_path / "a")]) == 0
    s = json.loads((tmp_path / "a" / "summary.json").read_text())
    row = (tmp_path / "a" / "flows.csv").read_text().splitlines()
    cols = row[0].split(",")
    tr = [r.split(",") for r in row[1:] if r.split(",")[cols.index("members")] != "0"]
    per = int(tr[0][cols.index("bytes")])
    assert per == 2 * 15 * 2**62 // 16  # 2 (n-1)/n S, S divisible by n
    assert s["bytes"] == 16 * per > 2**63
    capsys.readouterr()
    assert main([*args, "--set", "workload.bytes=6000000000000000000", "--out",
                 str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert "workload" in err and "int64" in err and "-" not in err.split("bytes =")[1][:3]


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 10**12), st.integers(1, 300), st.integers(2, 70),
       st.sampled_from([(1, 1), (15, 16), (1, 2), (7, 8)]),
       st.sampled_from(["all_reduce", "reduce_scatter", "all_gather"]))
def test_ring_sent_closed_form_equals_the_block_layout(nbytes, chunks, g, wire, op):
    """The O(g) sums of ring_stream equal the sums over the (chunks, g) block layout they
    replace, wire rounding per block included."""
    from collectives._plan import chunked_layout
    from collectives.streams import ring_sent

    num, den = wire
    blocks = chunked_layout(nbytes, chunks, g).reshape(chunks, g)
    if num != den:
        blocks = (blocks * den + num - 1) // num
    # member p sends every shard but its own (reduce-scatter), every shard but p+1's
    # (all-gather), chunk by chunk: the sums ring_stream made over the whole layout before
    chunk_total = blocks.sum(axis=1, keepdims=True)
    rs = (chunk_total - blocks).sum(axis=0)
    ag = (chunk_total - np.roll(blocks, -1, axis=1)).sum(axis=0)
    want = {"reduce_scatter": rs, "all_gather": ag, "all_reduce": rs + ag}[op]
    assert np.array_equal(ring_sent(op, nbytes, chunks, g, num, den), want)


def test_ring_stream_with_many_chunks_needs_no_chunk_by_rank_arrays():
    """10,000 chunks over 65,536 ranks: 655 M blocks (5 GB per copy), which the closed form
    never builds; the busiest connection sends 2(g-1)/g of the bytes, rounded up per block."""
    from collectives.streams import ring_stream

    g, S, C = 65536, 1 << 40, 10_000
    st_ = ring_stream("all_reduce", "ring", g, S, C)
    assert st_.steps == C * (g - 1) * 2
    exact = 2 * (g - 1) * S / g
    assert exact <= st_.nbytes <= exact + 2 * C
