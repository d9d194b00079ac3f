"""Wall time of whole `netcosim plan` commands: GPT-3 175B (h100_sxm, global batch 1,536,
sequence 2,048) on two_tier fabrics (8 GPUs per node, 400 Gb/s NICs).

Each point is a fresh process (start-up, worker processes and Numba cache loading included),
timed from outside; its output (the ranked table, the NeMo reference's rank, the phase times)
is printed below the figure.

    python benchmarks/bench_plan.py                      # 1,024 and 16,384 GPUs
    python benchmarks/bench_plan.py --gpus 1024 --top 8 --jobs 2

Targets: 1,024 GPUs in under 2 minutes, 16,384 in under 10 minutes.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = {1024: 120, 16384: 600}


def scenario(gpus: int, batch: int) -> str:
    return (f'name = "gpt3-plan-{gpus}"\nseed = 1\n[topology]\nkind = "two_tier"\n'
            f'nodes = {gpus // 8}\ngpus_per_node = 8\nnic_gbps = 400\n[routing]\n'
            f'policy = "ecmp"\n[workload]\nkind = "training"\nmodel = "gpt3-175b"\n'
            f'gpu = "h100_sxm"\ngranularity = "coarse"\n[workload.parallel]\n'
            f'global_batch = {batch}\n')


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, nargs="+", default=[1024, 16384])
    ap.add_argument("--batch", type=int, default=1536)
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=None)
    args = ap.parse_args()
    rows = []
    for g in args.gpus:
        with tempfile.TemporaryDirectory() as d:
            sc = Path(d) / "s.toml"
            sc.write_text(scenario(g, args.batch))
            cmd = [sys.executable, "-m", "netcosim", "plan", str(sc), "--top", str(args.top),
                   "--out", str(Path(d) / "out"), "--no-progress"]
            if args.jobs:
                cmd += ["--jobs", str(args.jobs)]
            t0 = time.perf_counter()
            p = subprocess.run(cmd, capture_output=True, text=True)
            wall = time.perf_counter() - t0
        target = TARGET_S.get(g)
        verdict = "" if target is None else (" (target < %d s: %s)" % (
            target, "met" if wall < target and p.returncode == 0 else "MISSED"))
        rows.append((g, wall, p.returncode, verdict))
        print(f"== {g:,} GPUs: wall {wall:.1f} s, exit {p.returncode}{verdict}")
        print(p.stdout.rstrip())
        if p.returncode:
            print(p.stderr.rstrip())
        sys.stdout.flush()
    print()
    print("| GPUs | wall | exit |")
    print("|---:|---:|---|")
    for g, wall, rc, verdict in rows:
        print(f"| {g:,} | {wall:.1f} s{verdict} | {rc} |")
    return 0 if all(rc == 0 for _, _, rc, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
