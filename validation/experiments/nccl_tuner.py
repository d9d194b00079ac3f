"""What NCCL's own tuner predicts for the multi-node nccl-tests tables below 64 MiB.

NCCL picks an all-reduce's algorithm and protocol by its tuner's time = latency + size /
bandwidth (src/graph/tuning.cc, NCCL 2.2x: ncclTunerConstantsDefaults, the "model
refinements" of busBw, treeCorrectionFactor in ncclTopoGetAlgoTime). This script evaluates
that model for ring and tree with each protocol on the H100 systems of
validation/nccl_tests_data/ (8 GPUs a node, Intel hosts, 8 x 47 GB/s of NICs as the raw bus
bandwidth, 16 channels) and prints its best prediction beside the measured time, to show how
far the measurements at 2-8 MiB on 4 and 8 nodes sit from anything NCCL expects
(docs/collectives.md, "Validation against nccl-tests"). Not part of the product: the model
runs schedules, not this formula.

    python -m validation.experiments.nccl_tuner
"""
from __future__ import annotations

import math

from validation.nccl_tests import datasets

PROTOS = ("ll", "ll128", "simple")
BASE = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4)}  # us
NVLINK = {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4)}
NET = {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0)}
LL_MAX = (141.0, 39.0, 20.4)  # Hopper in one node; Intel hosts on 2 and more nodes
PER_CH_TREE = (38.7, 41.4, 36.0)  # Hopper
PER_CH_TREE_LL128 = (36.7, 36.7, 29.0)
PER_CH_RING_LL128 = 36.7
# treeCorrectionFactor, indexed by log2(bytes / 64), 64 B .. 256 MiB
TREE_CORRECTION = {
    "ll": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0,
           1.0, 1.0, 1.0, 1.0),
    "ll128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9,
              .9, .9, 1.0, 1.0, 1.0),
    "simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7,
               .8, .9, .9, .9)}


def predictions(nodes: int, nbytes: int, ppn: int = 8, raw_busbw: float = 376.0,
                channels: int = 16) -> dict:
    """{(algorithm, protocol): microseconds} by NCCL's tuner for an all-reduce."""
    n = nodes * ppn
    i2 = 0 if nodes == 1 else (1 if nodes == 2 else 2)
    nsteps = 2 * (n - 1)
    out = {}
    for a in ("ring", "tree"):
        for k, p in enumerate(PROTOS):
            bus = raw_busbw
            if a == "ring" and p == "ll":
                bus = min(LL_MAX[i2], bus * .5)
            if a == "ring" and p == "ll128":
                bus = min(bus * .92, channels * PER_CH_RING_LL128)
            if a == "tree":
                bus = min(bus * .92, channels * PER_CH_TREE[i2])
                if p == "ll":
                    bus = min(bus / 3.8, LL_MAX[i2])
                if p == "ll128":
                    bus = min(bus * (7 / 9 if nodes == 1 else 120 / 128),
                              channels * PER_CH_TREE_LL128[i2])
            alg = bus * n / nsteps if a == "ring" else bus * .5
            lat = BASE[a][k]
            intra, inter = NVLINK[a][k], NET[a][k]
            if a == "ring":
                overhead = (3.0 if p == "simple" else 1.0) if nodes > 1 else 0.0
                inter_steps = 2 * (nodes - 1)
                lat += (nsteps - inter_steps) * max(intra, overhead) + inter_steps * inter
            else:
                lat += 2 * ((ppn - 1) * intra + int(math.log2(nodes)) * inter)
                log = int(math.log2(nbytes >> 6))
                if 0 <= log < 23:
                    alg *= TREE_CORRECTION[p][log]
            out[(a, p)] = lat + nbytes / (alg * 1e3)
    return out


def main() -> int:
    print(f"{'table':>14} {'size':>6} {'measured us':>12} {'NCCL best':>16} {'us':>6}")
    for d in datasets():
        nodes = d["nodes"]
        if nodes == 1:
            continue
        n = 8 * nodes
        for k in range(20, 26):
            s = 1 << k
            busbw = max(d["rows"][s])
            measured = s / (busbw / (2 * (n - 1) / n)) / 1e3
            pred = predictions(nodes, s)
            best = min(pred, key=pred.get)
            print(f"{d['name']:>14} {s >> 20:>4}Mi {measured:12.0f} {'/'.join(best):>16} "
                  f"{pred[best]:6.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
