"""Benchmark: measuring the KV-transfer cost curves of disaggregated serving
(netcosim/inference/kv_transfer.py) on a two-tier fabric of N GPUs (nodes of 8, 400 Gb/s NICs),
half of it prefill replicas of TP 8 and half decode replicas of TP 8, Llama 3 70B prompts of
64-7,000 tokens (the sizes of examples/studies/inference_disagg.toml), every round asked for
(a long run of requests uses them all when the pools' replica counts are coprime).

    PYTHONPATH=. python benchmarks/bench_kv_transfer.py [--gpus 1024,4096,16384]
        [--fewer-prefill 1] [--nodes-per-leaf N] [--routing ecmp] [--every-round]

Prints, per fabric size, the wall time of ``measure`` and how many rounds it simulated (one
where kv_rounds proves the rounds alike: one leaf per rail, the default; every round with
``--nodes-per-leaf``, whose spines make rounds contend differently). ``--every-round`` also
times the original measurement (``measure_every_round``, dp_decode rounds) and checks that
both give the same times, bit for bit. ``--fewer-prefill k``: k prefill replicas fewer than
decode replicas (default 1: coprime counts, every round in use).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from netcosim.inference import kv_transfer
from topo.builders import build
from topo.faults import LinkFaults
from topo.routing import Routing

KV_BYTES_PER_TOKEN = 327_680  # Llama 3 70B, bf16
TOKENS = (64, 7000)
TP = 8


def pools(gpus: int, fewer: int):
    dp_d = gpus // (2 * TP)
    dp_p = dp_d - fewer
    n_p = dp_p * TP
    return (np.arange(n_p).reshape(dp_p, 1, TP),
            n_p + np.arange(dp_d * TP).reshape(dp_d, 1, TP))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", default="1024,4096,16384")
    ap.add_argument("--fewer-prefill", type=int, default=1)
    ap.add_argument("--nodes-per-leaf", type=int, default=None)
    ap.add_argument("--routing", default="ecmp")
    ap.add_argument("--every-round", action="store_true")
    a = ap.parse_args()
    lo, hi = (t * KV_BYTES_PER_TOKEN / TP for t in TOKENS)
    small = build("two_tier", {"nodes": 2})  # compiles (or loads) the engine's kernels
    kv_transfer.measure(small, "ecmp", None, "flow", 1, *pools(16, 0), lo, hi)
    for gpus in (int(x) for x in a.gpus.split(",")):
        params = {"nodes": gpus // 8, "scaleup_gbps": 3600, "nic_gbps": 400}
        if a.nodes_per_leaf:
            params["nodes_per_leaf"] = a.nodes_per_leaf
        topo = build("two_tier", params)
        routing = Routing(topo, a.routing, seed=1)
        p_hosts, d_hosts = pools(gpus, a.fewer_prefill)
        t0 = time.perf_counter()
        kv = kv_transfer.measure(topo, routing, LinkFaults.none(), "flow", 1, p_hosts, d_hosts,
                                 lo, hi)
        wall = time.perf_counter() - t0
        r = kv.report
        line = (f"{gpus:,} GPUs ({p_hosts.shape[0]} prefill + {d_hosts.shape[0]} decode "
                f"replicas): measure {wall:.2f} s, {r['rounds_simulated']} of {r['rounds']} "
                f"rounds simulated" + ("" if r["rounds_alike"] else
                                       f" ({r['rounds_differ']})"))
        if a.every_round:
            t0 = time.perf_counter()
            ls, lt, _ = kv_transfer.measure_every_round(topo, routing, LinkFaults.none(),
                                                        "flow", 1, p_hosts, d_hosts, lo, hi)
            old = time.perf_counter() - t0
            same = np.array_equal(kv.pair_log_t(), lt) and np.array_equal(kv.log_s, ls)
            line += f"; every round {old:.2f} s, {'identical' if same else 'DIFFERENT'} times"
        print(line, flush=True)


if __name__ == "__main__":
    main()
