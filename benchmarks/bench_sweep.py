"""Sweep throughput: a flow-engine sweep of 1 MiB..1 GiB ring all-reduces over 128-host
fabrics (fat-tree k=8, two-tier 16x8 GPUs, FullFlat 128 GPUs), on local processes (joblib) and
on a local Dask cluster, through the same code path.

    python benchmarks/bench_sweep.py                      # 1000 points, joblib, all cores
    python benchmarks/bench_sweep.py --points 200 --dask-local 2
    python benchmarks/bench_sweep.py --points 1000 --compare   # joblib then Dask, same points

Prints wall time (expansion + check + run), points/s and the per-point engine and run times,
and the CPU time of the thread that ran each point (the same points cost the same CPU on either
backend unless the backend's set-up slows them: see netcosim/sweep/execute.py).
The target (issue 8): 1000 points in under 2 minutes on a 2-core machine; Dask with 2 local
workers no slower than joblib. Results go in docs/sweeps.md, not in asserts.
"""
from __future__ import annotations

import argparse
import math
import shutil
import statistics
import tempfile
import time

FABRICS = [
    ("fat_tree", {"kind": "fat_tree", "k": 8, "latency_us": 0.5}, "topology.link_gbps"),
    ("two_tier", {"kind": "two_tier", "nodes": 16, "gpus_per_node": 8}, "topology.nic_gbps"),
    ("fullflat", {"kind": "fullflat", "n_gpus": 128, "planes": 8, "switch_radix": 64},
     "topology.gpu_gbps"),
]


def sweep_table(points: int) -> dict:
    per = math.ceil(points / len(FABRICS))
    blocks = []
    for label, topo, bw in FABRICS:
        scale = 8 if label == "fullflat" else 1  # FullFlat's figure is per GPU over 8 planes
        blocks.append({"mode": "sample", "n": per, "sample_seed": 1, "set": {"topology": topo},
                       "workload.bytes": "1MiB..1GiB x2",
                       f"{bw} as bandwidth_gbps": [g * scale for g in
                                                   (100, 200, 400, 800, 1600, 3200, 6400)],
                       "seed": [1, 2, 3, 4, 5, 6]})
    return {"name": "bench-sweep", "seed": 1, "topology": FABRICS[0][1],
            "routing": {"policy": "ecmp"}, "engine": {"kind": "flow"},
            "workload": {"kind": "collective", "op": "all_reduce", "algorithm": "ring",
                         "bytes": "1MiB"},
            "sweep": blocks}


def run_once(points, backend, label):
    from netcosim.sweep import expand, parse_sweep, run_points

    out = tempfile.mkdtemp(prefix="bench-sweep-")
    try:
        t0 = time.perf_counter()
        pts = expand(parse_sweep(sweep_table(points)))[:points]
        t_exp = time.perf_counter() - t0
        o = run_points(pts, out, backend)
        wall = time.perf_counter() - t0
    finally:
        shutil.rmtree(out, ignore_errors=True)
    ok = [r for r in o.rows if r.get("status") == "ok"]
    eng = [r["wall_s"] for r in ok]
    run = [r["run_s"] for r in ok]
    # Share of the workers' time (after the check) spent inside points: what the backend's
    # own overhead (dispatch, pickling, result collection) leaves; insensitive to machine load
    # as long as the load is the same for the points and for the overhead.
    busy = sum(run) / (o.info["workers"] * max(1e-9, wall - t_exp - o.info["check_s"]))
    print(f"{label:>18}: {len(o.rows)} points ({len(ok)} ok) in {wall:6.1f} s = "
          f"{len(o.rows) / wall:5.2f} points/s on {o.info['workers']} workers; expansion "
          f"{t_exp:.1f} s, check {o.info['check_s']:.1f} s; per point: engine median {statistics.median(eng) * 1e3:.0f} ms, "
          f"build+engine median {statistics.median(run) * 1e3:.0f} ms, max {max(run):.2f} s; "
          f"CPU median {statistics.median(r['cpu_s'] for r in ok) * 1e3:.0f} ms; busy {busy:.0%}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--dask-local", type=int, default=None)
    ap.add_argument("--compare", action="store_true", help="joblib, then Dask with 2 workers")
    ap.add_argument("--batch-size", type=int, default=None)
    args = ap.parse_args()
    from netcosim.sweep import Backend

    if args.compare:
        a = run_once(args.points, Backend(jobs=args.jobs or 2, batch_size=args.batch_size,
                                          progress=False), "joblib")
        b = run_once(args.points, Backend(dask_local=2, batch_size=args.batch_size,
                                          progress=False), "dask-local 2")
        print(f"Dask / joblib wall time: {b / a:.2f}")
        return
    backend = Backend(jobs=args.jobs, dask_local=args.dask_local, batch_size=args.batch_size,
                      progress=False)
    run_once(args.points, backend, "dask-local" if args.dask_local else "joblib")


if __name__ == "__main__":
    main()
