"""How much does choosing the parallel layout matter on each fabric? (docs/codesign_study.md)

For GPT-3 175B, the 1T dense GPT and the 1.8T MoE on 4,096 B200s, on the three fabrics of
examples/studies/fullflat_codesign_at_scale.toml, every layout that fits in memory is priced
with the layout search's estimate (compute/layouts.py, no simulation) and the table counts
how many come close to the best one, and where the median layout lands.

    python examples/studies/fullflat_layout_spread.py    # about 30 s
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

from netcosim import plan
from netcosim.scenario import load_scenario

BASE = """
name = "layout-spread"
seed = 1
[topology]
kind = "two_tier"
nodes = 512
gpus_per_node = 8
nic_gbps = 400
spines = 1
[routing]
policy = "ecmp"
[engine]
kind = "flow"
[workload]
kind = "training"
model = "gpt3-175b"
parallel = "best"
[workload.gpu]
base = "b200"
name = "B200"
scaleup_domain = 8
efficiency = { scaleup = 1.0, scaleup_latency_us = 0.5 }
[workload.plan]
global_batch = 4096
objective = "mfu"
"""
# The same fabrics and batches as sections 1-3 of the study at 4,096 GPUs.
FABRICS = {
    "two-tier NVL8": [],
    "two-tier NVL64": ["topology.nodes=64", "topology.gpus_per_node=64",
                       "workload.gpu.scaleup_domain=64"],
    "FullFlat": ['topology={kind="fullflat",n_gpus=4096,planes=1,switch_radix=32768,'
                 'gpu_gbps=7200,latency_us=2.0}'],
}
MODELS = {
    "GPT-3 175B": ["workload.model=gpt3-175b"],
    "1T dense": ["workload.model=1t"],
    "1.8T MoE": ["workload.model=gpt4-1.8t-moe", "workload.plan.cp=1",
                 "workload.plan.global_batch=1024"],
}


def spread(path: Path, overrides: list[str]) -> dict:
    sc = load_scenario(path, overrides=overrides)
    topology = sc.build_topology()
    enum, _ = plan.candidates(plan.plan_spec(sc), topology, sc.build_routing(topology))
    mfu = np.array([c.estimate.mfu for c in enum.candidates])
    best = mfu.max()
    return {"layouts": mfu.size, "best": best, "within5": int((mfu >= 0.95 * best).sum()),
            "within10": int((mfu >= 0.90 * best).sum()),
            "half": float((mfu >= 0.5 * best).mean()), "median": float(np.median(mfu) / best)}


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "base.toml"
        path.write_text(BASE)
        print("| model | fabric | feasible layouts | best MFU (estimate) | within 5 % | "
              "within 10 % | at least half the best | median / best |")
        print("|---|---|---:|---:|---:|---:|---:|---:|")
        for m, mo in MODELS.items():
            for f, fo in FABRICS.items():
                s = spread(path, fo + mo)
                print(f"| {m} | {f} | {s['layouts']:,} | {s['best']:.3f} | {s['within5']} | "
                      f"{s['within10']} | {s['half']:.0%} | {s['median']:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
