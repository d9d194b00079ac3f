"""Time a GPT-3 175B training step on 1,024 GPUs with the flow engine.

Fabric: 128 DGX-style nodes (8 GPUs on NVSwitch, one 400 Gb/s NIC per GPU), rail-optimised
two-tier fabric. Parallelism: TP 8 (inside a node), PP 8, DP 16, sequence parallelism,
selective recompute, distributed optimizer, global batch 1,536 sequences of 2,048 tokens.
Prints the phase times (schedule build, validation + engine) and the step figures.

    python benchmarks/bench_training.py [--gpus 1024] [--batch 1536] [--symmetry auto|none]
"""
from __future__ import annotations

import argparse
import time


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=1536)
    ap.add_argument("--pp", type=int, default=8)
    ap.add_argument("--vp", type=int, default=1)
    ap.add_argument("--gpu", default="A100-80GB")
    ap.add_argument("--nic-gbps", type=float, default=400.0)
    ap.add_argument("--symmetry", default="auto")
    ap.add_argument("--granularity", default="coarse")
    ap.add_argument("--engine", default="flow")
    a = ap.parse_args(argv)

    import topo.builders as tb
    from compute.report import format_summary, summarize
    from compute.training import build_step
    from netcore.api import simulate

    t0 = time.perf_counter()
    topo = tb.two_tier(nodes=a.gpus // 8, gpus_per_node=8, nic_gbps=a.nic_gbps, scaleup_gbps=2400)
    t1 = time.perf_counter()
    sched = build_step("gpt3-175b", dict(tp=8, pp=a.pp, vp=a.vp, sp=True, micro_batch=1,
                                         global_batch=a.batch, recompute="selective",
                                         dist_opt=True),
                       a.gpu, topo, symmetry=a.symmetry, granularity=a.granularity)
    t2 = time.perf_counter()
    res = simulate(topo, sched, "ecmp", engine=a.engine)
    t3 = time.perf_counter()
    s = summarize(sched, res.start, res.end)
    t4 = time.perf_counter()
    print(f"{sched.describe()}")
    print(format_summary(s))
    print(f"timing: topology {t1 - t0:.2f} s, build {t2 - t1:.2f} s, simulate (validate + "
          f"{a.engine} engine) {t3 - t2:.2f} s [engine wall {res.wall_s:.2f} s], report "
          f"{t4 - t3:.2f} s; total {t4 - t0:.2f} s")


if __name__ == "__main__":
    main()
