"""Regenerate examples/chakra/custom_ring_allreduce_8: an 8-rank ring all-reduce of 64 MiB in
the shape of the MLCommons custom-collective traces (ASTRA-sim's
examples/system/custom_collectives): per rank one program-order chain of send-before-receive
steps, 4 chunks per step, program order as ctrl_deps, data flow as data_deps, reductions as
COMP nodes (0 us here, so the makespan is the network's). It needs eager send/recv semantics
(workload.p2p = "eager", the default); see netcosim/interop/chakra_custom_ring.py. Run from
the repository root:

    python examples/chakra/make_custom_ring_trace.py
"""
from pathlib import Path

from netcosim.interop.chakra_custom_ring import write_ring_all_reduce

HERE = Path(__file__).resolve().parent
RANKS = 8
NBYTES = 64 << 20
CHUNKS = 4

if __name__ == "__main__":
    out = HERE / "custom_ring_allreduce_8"
    paths = write_ring_all_reduce(out, RANKS, NBYTES, chunks=CHUNKS, order="ctrl")
    print(f"wrote {len(paths)} files -> {out}")
