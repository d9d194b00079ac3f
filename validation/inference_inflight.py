"""netcosim's serving model against published IN-FLIGHT-batching measurements (held out).

The rows of ``validation/inference_data/trtllm_bench_h100.csv`` are TensorRT-LLM's published
``trtllm-bench throughput`` figures on H100 SXM 80GB with FP8 checkpoints (Llama 3.1 8B on one
GPU, Llama 3.3 70B on TP 2): many requests of exactly ISL input and OSL output tokens, all
queued at once, served by the runtime's in-flight batching; the metric is the total output
tokens/s of the run. Unlike validation/inference_published.py (static batching, the batch
stated), here the scheduler sets the batch, so the row exercises netcosim's serving loop
(admission against the KV cache, the token budget, prefill and decode mixed in iterations).

Each row becomes an inference scenario run through ``netcosim.runner.simulate_scenario``:

* one node of 8 H100 SXM (two-tier, NVLink 4 at 3600 Gb/s per GPU; the model uses the first
  ``tp``), the row's model (presets ``llama3-8b`` / ``llama3-70b``: Llama 3.1 8B and Llama 3.3
  70B have these dimensions; ``context`` raised to ISL + OSL), FP8 weights and KV cache;
* ``arrival = "concurrency"`` with ``concurrency = count``: every request is released at t = 0
  (trtllm-bench throughput submits the whole dataset with no delay and, by default, no
  concurrency limit);
* ``max_seqs`` / ``max_batch_tokens`` = the max batch size and max num tokens that
  trtllm-bench's heuristic picks when neither is given (the source gives neither):
  ``trtllm_bench_limits`` below restates it (tensorrt_llm/bench/build/tuning.py,
  ``calc_engine_setting`` and ``finetune_setting``; tensorrt_llm/bench/benchmark/utils/general.py,
  ``get_settings``: chunked prefill is off by default, so max num tokens is raised to at least
  ISL + max batch size; read at commits 04cba882084a25665e7f80f5bda71b35b9790b6f and
  0171265edef1c67ef334e0db2427148161aa2815 of NVIDIA/TensorRT-LLM, the stored versions, not
  necessarily the page's own commit; the parameter count is the checkpoint's, which the
  dimensions give to within rounding);
* admission as netcosim's loop does it: a request is admitted only if the cache can hold its
  whole context (input + output), never preempted; that is TensorRT-LLM's default capacity
  scheduler policy, GUARANTEED_NO_EVICT (its performance-tuning guide, "Useful Runtime
  Options"). netcosim chunks a prompt when the token budget left is short; the measured runs
  did not (chunked prefill off), which changes how prompts are packed, not the tokens computed;
* ``decode_attention = "grouped"`` (the library default): the measured software (v1.0,
  PyTorch backend with the TRTLLM attention backend) decodes with the XQA kernel, which reads a
  GQA KV head once for the query heads sharing it (0.7.0 onwards; docs/inference.md);
* KV-cache capacity: the library default (``memory_utilization`` 0.9 of the spec's 80 GB for
  weights, activations and cache); trtllm-bench's default gives the cache 0.90 of the memory
  left after the weights and runtime buffers on an 81,559 MiB device, for the 70B on TP 2
  about 10-20 % more (the buffers are not stated, so the default is kept; docs/inference.md);
* GPU: ``h100_sxm`` with the efficiency figures of ``validation.inference_published``'s
  calibration (recomputed here by calling its ``calibrate`` with the same ``--calibration``
  method, default ``gemm-anchor``: ``gemm_max`` from public FP8 GEMM measurements, ``memory``
  fitted on one static decode-bound row, ``prefill_host_us`` on its GPT-J first-token anchor
  row; nothing is fitted on these rows). Every other figure is the library default,
  including ``launch_us`` = 5 µs per kernel, although the measured runs used CUDA graphs (see
  docs/inference.md, Validation: the diagnostic column ``launch_us = 0`` shows what that is worth).

Every row is held out. Error = model / measured - 1.

    python -m validation.inference_inflight [--calibration gemm-anchor|rows] [--out validation/results]
        [--max-count N]
"""
from __future__ import annotations

import argparse
import csv
import math
import time
from pathlib import Path

from validation import inference_published as ip

DATA = ip.DATA / "trtllm_bench_h100.csv"
RESULTS = ip.RESULTS
TARGET = ip.TARGET

MODELS = {"llama3.1-8b": "llama3-8b", "llama3.3-70b": "llama3-70b"}
SOURCES = {
    "v10": ("TensorRT-LLM perf-overview.md (v1.0 text, trtllm-bench, PyTorch backend)",
            "https://github.com/NVIDIA/TensorRT-LLM/blob/"
            "00f37686aa854010d68bcbd0f4ab000221541ca6/docs/source/performance/perf-overview.md"),
}
# trtllm-bench's defaults that its heuristic uses: the KV-cache share of free memory
# (--kv_cache_free_gpu_mem_fraction, 0.90) and the device memory NVML reports, in GiB
# (H100 SXM 80GB: 81,559 MiB)
KV_FRACTION = 0.90
H100_NVML_GIB = 81559 / 1024
# Simulated request count: the source's own count (a row takes well under a second once the
# numba kernels are compiled); a cap is only for quick runs (tests, --max-count)
MAX_COUNT = 10 ** 9


def load_rows(path=None) -> list[dict]:
    return ip.read_data(path or DATA, ("tp", "input", "output", "requests"))


def _params(m) -> float:
    """Parameter count of a dense Llama-style model (untied embeddings)."""
    hd = m.hidden // m.heads
    per_layer = (m.hidden * (m.heads + 2 * m.kv_heads) * hd + m.heads * hd * m.hidden
                 + (3 if m.gated_mlp else 2) * m.hidden * m.ffn)
    return m.layers * per_layer + 2 * m.vocab * m.hidden


def trtllm_bench_limits(model: str, tp: int, isl: int, osl: int, pp: int = 1,
                        kv_fraction: float = KV_FRACTION,
                        gpu_gib: float = H100_NVML_GIB) -> tuple[int, int]:
    """(max batch size, max num tokens) as trtllm-bench picks them for an FP8 model (FP8 weights
    and KV cache) when neither is given: the KV cache left after the weights, over
    (ISL + OSL) tokens per request, sets a raw batch (at most 4096 / pp) and raw tokens
    (batch x (1 + ISL/OSL), at most 32768), each rounded up to a coarse step; without chunked
    prefill the tokens are at least ISL + batch. Restated from tensorrt_llm/bench/build/tuning.py
    and bench/benchmark/utils/general.py (see the module docstring)."""
    from compute.model import get_model

    m = get_model(MODELS[model])
    gib = 1024 ** 3
    kv_token = 2 * m.layers * max(tp, m.kv_heads) * (m.hidden // m.heads) * 1 / gib
    free = gpu_gib * tp * pp - _params(m) * 1 / gib
    kv_requests = free * kv_fraction / (kv_token * (isl + osl))
    raw_bs = min(kv_requests, 4096) / pp
    raw_tok = min(raw_bs * (1 + isl / osl), 32768)
    bs = _round_up_tiered(raw_bs, ((256, 32), (1024, 128), (None, 256)), 64)
    tok = _round_up_tiered(raw_tok, ((4096, 256), (8192, 512), (None, 1024)), 2048)
    return bs, max(tok, isl + bs)


def _round_up_tiered(x: float, tiers, floor: int) -> int:
    """``x`` rounded up to the step of the first tier (below ``limit``, or the last) it
    falls in, at least ``floor``."""
    for limit, step in tiers:
        if limit is None or x < limit:
            return max(floor, step * math.ceil(x / step))


def scenario_dict(row: dict, efficiency: dict | None = None, count: int | None = None,
                  launch_us: float | None = None) -> dict:
    """The inference scenario of one row (see the module docstring); ``count`` requests
    (default: the source's count capped at MAX_COUNT)."""
    n = count or min(row["requests"], MAX_COUNT)
    eff = dict(efficiency or {})
    if launch_us is not None:
        eff["launch_us"] = launch_us
    gpu = {"base": "h100_sxm", "efficiency": eff} if eff else "h100_sxm"
    bs, tok = trtllm_bench_limits(row["model"], row["tp"], row["input"], row["output"])
    ctx = row["input"] + row["output"]
    return ip.on_dgx_h100(row["id"], {
            "kind": "inference", "model": MODELS[row["model"]], "gpu": gpu,
            "precision": "fp8", "parallel": {"tp": row["tp"], "pp": 1, "ep": 1, "dp": 1},
            "max_batch_tokens": tok, "max_seqs": bs, "context": max(8192, ctx),
            "decode_attention": "grouped",
            "requests": {"arrival": "concurrency", "concurrency": n, "count": n,
                         "input_tokens": row["input"], "output_tokens": row["output"]}})


def simulate(row: dict, efficiency: dict | None = None, count: int | None = None,
             launch_us: float | None = None) -> dict:
    """summary.json's serving figures of the row's scenario."""
    from netcosim.runner import simulate_scenario
    from netcosim.scenario import Scenario

    d = scenario_dict(row, efficiency, count, launch_us)
    return simulate_scenario(Scenario.from_dict(d, default_name=row["id"]))[2]


def model_value(row, efficiency=None, count=None, launch_us=None) -> float:
    s = simulate(row, efficiency, count, launch_us)
    if row["metric"] == "out_tok_s":
        return s["output_tokens_per_s"]
    raise ValueError(f"{row['id']}: unknown metric {row['metric']!r}")


def run(rows, eff, log=print) -> list[dict]:
    out = []
    for r in rows:
        t0 = time.perf_counter()
        s = simulate(r, eff)
        v = s["output_tokens_per_s"]
        v0 = model_value(r, eff, launch_us=0.0)
        bs, tok = trtllm_bench_limits(r["model"], r["tp"], r["input"], r["output"])
        res = {**r, "model_value": v, "error": v / r["measured"] - 1, "max_batch": bs,
               "max_tokens": tok, "count": min(r["requests"], MAX_COUNT),
               "mean_batch": s["mean_batch_seqs"], "kv_capacity": s["kv_capacity_tokens"],
               "comm_share": s["comm_share"], "nolaunch_value": v0,
               "nolaunch_error": v0 / r["measured"] - 1}
        out.append(res)
        log(f"{r['id']:20s} bs {bs:5d} tok {tok:6d}  measured {r['measured']:8.0f}  "
            f"model {v:8.0f} {100 * res['error']:+6.1f}%  (launch 0: {100 * res['nolaunch_error']:+6.1f}%)  "
            f"mean batch {s['mean_batch_seqs']:6.0f}  {time.perf_counter() - t0:.1f} s")
    return out


def convergence(rows, eff, log=print) -> list[tuple]:
    """Throughput against the simulated request count, up to the source's count (a table of
    how much the ramp-up and the drain weigh)."""
    out = []
    for r in rows:
        counts = sorted({c for c in (250, 500, 1000, 3000, 10000, r["requests"])
                         if c <= min(r["requests"], MAX_COUNT)})
        vals = []
        for c in counts:
            t0 = time.perf_counter()
            vals.append((c, model_value(r, eff, count=c), time.perf_counter() - t0))
        out.append((r["id"], vals))
        log(f"{r['id']:20s} " + "  ".join(f"{c}: {v:8.0f} ({t:.1f} s)" for c, v, t in vals))
    return out


GROUPS = (("Llama 3.1 8B, H100 TP 1", lambda r: r["model"] == "llama3.1-8b"),
          ("Llama 3.3 70B, H100 TP 2", lambda r: r["model"] == "llama3.3-70b"))


def _head(res, key="error"):
    xs = [abs(r[key]) for r in res]
    return {"n": len(xs), "within": sum(x <= TARGET for x in xs),
            "median": ip._median(xs), "worst": max(res, key=lambda r: abs(r[key]))[key]}


def _stem(method: str) -> str:
    return ("inference_inflight" if method == ip.DEFAULT_METHOD
            else "inference_inflight_" + method.replace("-", "_"))


def write(res, eff, outdir: Path, cmd: str, conv=None, method: str = ip.DEFAULT_METHOD):
    outdir.mkdir(parents=True, exist_ok=True)
    stem = _stem(method)
    how = ("its GEMM-anchored calibration (`--calibration gemm-anchor`: `gemm_max` from public "
           "FP8 GEMM measurements, `memory` fitted on its decode-bound static row; recomputed, "
           "not fitted here)" if method == "gemm-anchor" else
           "its row calibration (its two static-batching rows, recomputed, not fitted here)")
    with open(outdir / f"{stem}.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "source", "url", "model", "gpu_tp", "isl", "osl", "requests_source",
                    "requests_simulated", "max_batch_size", "max_num_tokens", "metric",
                    "measured", "model_value", "error", "mean_batch_seqs", "model_launch0",
                    "error_launch0"])
        for r in res:
            w.writerow([r["id"], SOURCES[r["source"]][0], SOURCES[r["source"]][1], r["model"],
                        f"H100 TP{r['tp']}", r["input"], r["output"], r["requests"],
                        r["count"], r["max_batch"], r["max_tokens"], r["metric"],
                        r["measured"], f"{r['model_value']:.5g}", f"{r['error']:+.4f}",
                        f"{r['mean_batch']:.1f}", f"{r['nolaunch_value']:.5g}",
                        f"{r['nolaunch_error']:+.4f}"])
    h = _head(res)
    h0 = _head(res, "nolaunch_error")
    lines = [
        "# Serving, in-flight batching: TensorRT-LLM's trtllm-bench H100 figures vs netcosim",
        "",
        f"Produced by `{cmd}`. All rows held out. Requests of exactly ISL/OSL tokens, all "
        "released at t = 0, served by netcosim's continuous-batching loop with trtllm-bench's "
        "own max batch size / max num tokens heuristic (neither is stated by the source); "
        "one node of 8 H100 SXM (two-tier, NVLink 3600 Gb/s per GPU), FP8 weights and KV "
        "cache, grouped (XQA) decode attention. Error = model / measured - 1.", "",
        f"Efficiencies from `validation.inference_published`'s calibration, {how}: "
        f"`memory` = {eff['memory']:.3f}, "
        f"`gemm_max` = {eff['gemm_max']:.3f}, `prefill_host_us` = "
        f"{eff.get('prefill_host_us', 0):.2f} µs per kernel of an iteration that runs prompt "
        "tokens (solved on its GPT-J anchor row, 2023 software); every other figure is the "
        "library default "
        "(launch_us 5 µs per kernel; the measured runs used CUDA graphs, so the last columns "
        "show the model with `launch_us = 0` as a diagnostic, not the headline).", "",
        f"**Held-out rows within {100 * TARGET:.0f}%: {h['within']} of {h['n']}; median "
        f"|error| {100 * h['median']:.1f}%, worst {100 * h['worst']:+.1f}%.** "
        f"(Diagnostic, launch_us = 0: {h0['within']} of {h0['n']}, median "
        f"{100 * h0['median']:.1f}%, worst {100 * h0['worst']:+.1f}%.)", "",
        "By group:", ""]
    for name, sel in GROUPS:
        g = [r for r in res if sel(r)]
        if g:
            gh = _head(g)
            lines.append(f"* {name}: {gh['within']} of {gh['n']} within "
                         f"{100 * TARGET:.0f}%, median {100 * gh['median']:.1f}%, worst "
                         f"{100 * gh['worst']:+.1f}%")
    lines += ["", "| id | model, GPU | ISL/OSL | requests (source / simulated) | max batch, "
              "max tokens | measured tok/s | netcosim | error | mean batch | launch_us 0: "
              "netcosim, error |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in res:
        lines.append(
            f"| {r['id']} | {r['model']}, H100 TP {r['tp']} | {r['input']}/{r['output']} | "
            f"{r['requests']:,} / {r['count']:,} | {r['max_batch']}, {r['max_tokens']} | "
            f"{r['measured']:,.0f} | {r['model_value']:,.0f} | {100 * r['error']:+.1f}% | "
            f"{r['mean_batch']:.0f} | {r['nolaunch_value']:,.0f}, "
            f"{100 * r['nolaunch_error']:+.1f}% |")
    if conv:
        lines += ["", "Convergence (output tok/s against simulated requests):", ""]
        for rid, vals in conv:
            lines.append(f"* {rid}: " + ", ".join(f"{c:,}: {v:,.0f}" for c, v, _ in vals))
    ip.write_with_sources(outdir / f"{stem}.md", lines, SOURCES)


def main(argv=None):
    global MAX_COUNT
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--max-count", type=int, default=None,
                    help="simulate at most this many requests per row (default: the source's)")
    ap.add_argument("--calibration", choices=ip.METHODS, default=ip.DEFAULT_METHOD,
                    help="validation.inference_published's calibration method (default "
                         f"{ip.DEFAULT_METHOD})")
    a = ap.parse_args(argv)
    if a.max_count:
        MAX_COUNT = a.max_count
    t0 = time.perf_counter()
    eff = ip.calibrate(ip.with_method(ip.load_rows(), a.calibration), method=a.calibration)
    print(f"calibrated (validation.inference_published): {eff}")
    rows = load_rows()
    res = run(rows, eff)
    conv = convergence(rows, eff)
    h = _head(res)
    print(f"held-out within {100 * TARGET:.0f}%: {h['within']}/{h['n']}; median "
          f"{100 * h['median']:.1f}%, worst {100 * h['worst']:+.1f}%; "
          f"{time.perf_counter() - t0:.1f} s")
    write(res, eff, Path(a.out), ip.command("validation.inference_inflight", a.calibration),
          conv, a.calibration)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
