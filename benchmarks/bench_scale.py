"""Scaling curve of whole `netcosim run` commands: wall time and peak memory against GPUs.

Each point is a fresh process (`netcosim run` on a generated scenario, `--out` in a temporary
folder), timed from outside with its peak resident memory (getrusage of the child), so the
figures are what a user sees, start-up and Numba cache loading included. Cases:

* ``gpt3``: GPT-3 175B, h100_sxm, TP 8, PP 8, VP 12, SP + selective recompute, distributed
  optimizer, global batch = GPUs / 4 (at least 2 x DP), granularity coarse, flow engine, on
  ``two_tier`` (8 GPUs per node, 400 Gb/s NICs) and on ``fullflat`` (8 planes of radix-512
  switches, 7.2 Tb/s per GPU);
* ``llama``: llama3-405b, TP 8, PP 16, VP 8, full recompute, global batch 2,048 sequences
  (examples/llama3_405b_16k.toml), on two_tier;
* ``moe``: deepseek-v3 (256 routed experts, top 8), TP 1, PP 16, EP 64, selective recompute,
  distributed optimizer, 16 micro-batches of one sequence, on two_tier: its expert
  all-to-alls are 4,032 pairs each, in classes (compute/pair_classes.py);
* ``ring`` / ``dbt``: 1 GiB all-reduce over every host of fat_tree k (ecmp).

    python benchmarks/bench_scale.py gpt3 --gpus 1024 4096 16384 65536 102400 [--fabric fullflat]
    python benchmarks/bench_scale.py ring --k 16 32 64 128
    python benchmarks/bench_scale.py gpt3 --gpus 2048 --detail full     # the reference form
    python benchmarks/bench_scale.py moe --gpus 2048 4096 16384
    python benchmarks/bench_scale.py gpt3 --gpus 1024 4096 --dp-algorithm double_binary_tree

Prints one row per point and, with three or more points, the exponent of a power-law fit of
wall time against GPUs (the issue's "no faster than about linearly").
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def training_scenario(model: str, gpus: int, fabric: str, detail: str,
                      dp_algorithm: str | None = None) -> str:
    algo = ""
    if model == "gpt3":
        dp = gpus // 64  # interleaving needs micro-batches per pipeline a multiple of pp
        par = dict(tp=8, pp=8, vp=12, sp="true", recompute='"selective"', dist_opt="true",
                   global_batch=max(gpus // 4, 8 * dp))
        name = "gpt3-175b"
        if dp_algorithm:  # a gradient all-reduce of that algorithm: no distributed optimizer
            par["dist_opt"] = "false"
            algo = f'algorithm = {{all_reduce = "{dp_algorithm}"}}\n'
    elif model == "moe":
        dp = gpus // 16
        par = dict(tp=1, pp=16, ep=64, recompute='"selective"', dist_opt="true", micro_batch=1,
                   global_batch=16 * dp)
        name = "deepseek-v3"
    else:
        dp = gpus // 128  # the layout of examples/llama3_405b_16k.toml
        par = dict(tp=8, pp=16, vp=8, sp="true", recompute='"full"', dist_opt="true",
                   global_batch=max(2048, 16 * dp))
        name = "llama3-405b"
    if fabric == "two_tier":
        topo = f'kind = "two_tier"\nnodes = {gpus // 8}\ngpus_per_node = 8\nnic_gbps = 400\n'
    else:
        topo = (f'kind = "fullflat"\nn_gpus = {gpus}\nplanes = 8\nswitch_radix = 512\n'
                f'gpu_gbps = 7200\n')
    p = "\n".join(f"{k} = {v}" for k, v in par.items())
    return (f'name = "scale"\nseed = 1\n[topology]\n{topo}[routing]\npolicy = "ecmp"\n'
            f'[workload]\nkind = "training"\nmodel = "{name}"\ngpu = "h100_sxm"\n'
            f'granularity = "coarse"\nnetwork_detail = "{detail}"\n{algo}[workload.parallel]\n{p}\n')


def collective_scenario(algo: str, k: int, detail: str) -> str:
    return (f'name = "scale"\nseed = 1\n[topology]\nkind = "fat_tree"\nk = {k}\n'
            f'link_gbps = 400\n[routing]\npolicy = "ecmp"\n[workload]\nkind = "collective"\n'
            f'op = "all_reduce"\nalgorithm = "{algo}"\nbytes = "1GiB"\n'
            f'network_detail = "{detail}"\n')


def run_point(text: str, timeout: float) -> dict:
    with tempfile.TemporaryDirectory() as d:
        sc = Path(d) / "s.toml"
        sc.write_text(text)
        log = open(Path(d) / "log", "w+")
        t0 = time.perf_counter()
        p = subprocess.Popen([sys.executable, "-m", "netcosim", "run", str(sc), "--out",
                              str(Path(d) / "out")], stdout=log, stderr=log)
        deadline = t0 + timeout
        while True:  # wait4: this child's own peak memory, not the largest child's so far
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                p.kill()
                os.wait4(p.pid, 0)
                return {"status": f"timeout {timeout:.0f} s"}
            time.sleep(0.05)
        wall = time.perf_counter() - t0
        code = os.waitstatus_to_exitcode(status)
        log.seek(0)
        out = {"wall_s": wall, "peak_GB": ru.ru_maxrss * 1024 / 1e9,
               "status": "ok" if code == 0 else f"exit {code}: {log.read().strip()[-300:]}"}
        if code == 0:
            s = json.loads((Path(d) / "out" / "summary.json").read_text())
            out.update({k: s.get(k) for k in ("engine_flows", "transfers_represented",
                                              "step_time_s", "makespan_us",
                                              "network_detail_used")})
            out["engine_s"] = s.get("wall_s")
        return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("case", choices=("gpt3", "llama", "moe", "ring", "dbt"))
    ap.add_argument("--gpus", type=int, nargs="*", default=[1024, 4096, 16384, 65536, 102400])
    ap.add_argument("--k", type=int, nargs="*", default=[16, 32, 64])
    ap.add_argument("--fabric", choices=("two_tier", "fullflat"), default="two_tier")
    ap.add_argument("--detail", choices=("auto", "full"), default="auto")
    ap.add_argument("--timeout", type=float, default=1200)
    ap.add_argument("--dp-algorithm", help="gpt3: the data-parallel all-reduce's algorithm "
                    "(e.g. double_binary_tree; the distributed optimizer is turned off)")
    a = ap.parse_args(argv)
    # one warm-up so the first point does not pay Numba's first compilation
    run_point(collective_scenario("ring", 4, "auto"), a.timeout)
    rows = []
    if a.case in ("gpt3", "llama", "moe"):
        points = [(g, training_scenario(a.case, g, a.fabric, a.detail, a.dp_algorithm))
                  for g in a.gpus]
        what = (f"{a.case} on {a.fabric}, network_detail {a.detail}"
                + (f", data-parallel {a.dp_algorithm}" if a.dp_algorithm else ""))
    else:
        algo = "ring" if a.case == "ring" else "double_binary_tree"
        points = [(k ** 3 // 4, collective_scenario(algo, k, a.detail)) for k in a.k]
        what = f"1 GiB {algo} all-reduce on fat_tree, network_detail {a.detail}"
    print(f"# {what}; one process per point (os.cpu_count() = {os.cpu_count()})")
    print(f"{'GPUs':>8} {'wall s':>8} {'peak GB':>8} {'flows':>8} {'transfers':>14} "
          f"{'result':>14}  status")
    for n, text in points:
        r = run_point(text, a.timeout)
        rows.append((n, r))
        res = (f"{r['step_time_s']:.4f} s" if r.get("step_time_s") is not None else
               f"{r['makespan_us']:.1f} us" if r.get("makespan_us") is not None else "")
        print(f"{n:>8} {r.get('wall_s', float('nan')):>8.1f} {r.get('peak_GB', float('nan')):>8.2f} "
              f"{r.get('engine_flows') or '':>8} {r.get('transfers_represented') or '':>14} "
              f"{res:>14}  {r['status']}", flush=True)
    ok = [(n, r["wall_s"]) for n, r in rows if r.get("status") == "ok"]
    if len(ok) >= 3:
        xs = [math.log(n) for n, _ in ok]
        ys = [math.log(w) for _, w in ok]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        print(f"wall time ~ GPUs^{b:.2f} over {ok[0][0]}..{ok[-1][0]}")


if __name__ == "__main__":
    main()
