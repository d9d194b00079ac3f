"""Benchmark: one hour of a Poisson stream at 20 requests/s on 64 GPUs (Llama 3 70B, 8 replicas
of TP 8 on a two-tier fabric), examples/inference_llama3_70b.toml with duration_s = 3600.

Target (docs/inference.md): under 60 s on one core. Prints wall time (a warm-up run first
compiles and caches the numba kernels) and peak memory.

    PYTHONPATH=. python benchmarks/bench_inference.py [--duration 3600] [--rate 20]

``--disaggregated``: the same stream on 4 prefill + 4 decode replicas of TP 8
(``[workload.disaggregated]``, KV transfers over the fabric).
"""
from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

from netcosim.runner import simulate_scenario
from netcosim.scenario import load_scenario

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "inference_llama3_70b.toml"


def _load(sets, disaggregated):
    sc = load_scenario(EXAMPLE, sets)
    if disaggregated:
        import copy

        from netcosim.scenario import Scenario

        d = copy.deepcopy(sc.data)
        d["workload"].pop("parallel")
        d["workload"]["disaggregated"] = {"prefill": {"tp": 8, "dp": 4},
                                          "decode": {"tp": 8, "dp": 4}}
        sc = Scenario.from_dict(d, default_name=sc.name)
    return sc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=3600.0)
    ap.add_argument("--rate", type=float, default=20.0)
    ap.add_argument("--disaggregated", action="store_true")
    a = ap.parse_args()
    warm = _load([f"workload.requests.duration_s=1"], a.disaggregated)
    simulate_scenario(warm)
    sc = _load([f"workload.requests.duration_s={a.duration}",
                f"workload.requests.rate={a.rate}"], a.disaggregated)
    t0 = time.perf_counter()
    _, _, s = simulate_scenario(sc)
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{s['requests']:,} requests, {s['iterations']:,} iterations, {s['gpus']} GPUs: "
          f"wall {wall:.2f} s, peak RSS {peak:.0f} MiB")
    print(f"TTFT p50 {s['ttft_p50_s'] * 1e3:.1f} ms p99 {s['ttft_p99_s'] * 1e3:.1f} ms; "
          f"ITL p50 {s['itl_p50_s'] * 1e3:.2f} ms p99 {s['itl_p99_s'] * 1e3:.2f} ms; "
          f"{s['output_tokens_per_s_per_gpu']:.1f} output tokens/s per GPU; "
          f"comm share {s['comm_share']:.3f}")


if __name__ == "__main__":
    main()
