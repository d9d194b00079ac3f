"""Regenerate examples/chakra/ring_allreduce_8: an 8-rank ring all-reduce of 64 MiB written by
netcosim's own Chakra writer, decomposed into COMM_SEND/COMM_RECV nodes (one pair per transfer
of ``collectives.ring_all_reduce``). Run from the repository root:

    python examples/chakra/make_ring_trace.py
"""
from pathlib import Path

import collectives
from netcosim.interop.chakra_writer import write_schedule

HERE = Path(__file__).resolve().parent
RANKS = 8
NBYTES = 64 << 20

if __name__ == "__main__":
    # one connection per rank pair (as the collective runs), so no per-node route key is written
    sched = collectives.ring_all_reduce(list(range(RANKS)), NBYTES).with_connections()
    paths = write_schedule(sched, HERE / "ring_allreduce_8", prefix="ring_allreduce")
    print(f"wrote {len(paths)} files, {sched.n} transfers -> {HERE / 'ring_allreduce_8'}")
