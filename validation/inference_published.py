"""netcosim's serving model against published measurements (docs/inference.md, "Validation").

Every row of ``validation/inference_data/trtllm_h100.csv`` (TensorRT-LLM's published H100 FP8 tables:
throughput at a fixed batch, input and output length, and first-token latency at batch 1)
becomes an inference scenario: one node of 8 H100 SXM GPUs on a two-tier fabric (NVLink 4,
3600 Gb/s per GPU; the model uses the first ``tp`` GPUs), the row's model, TP, precision
(FP8 weights and KV cache) and lengths. The published runs used static batching (the whole batch
is admitted at once and runs to completion), so a row is one wave of ``batch`` requests from
``batch`` closed-loop clients, every request of exactly the stated lengths, with
``max_seqs = batch``. The scenario runs through ``netcosim.runner.simulate_scenario`` (what
``netcosim run`` does) and the row's metric is read from the summary.

Calibration: two efficiency figures of the H100 spec, ``memory`` (achieved fraction of HBM
bandwidth) and ``gemm_max`` (best GEMM fraction of the FP8 peak), are given to every scenario as
``[workload.gpu] = {base = "h100_sxm", efficiency = {...}}``. Two methods (docs/inference.md,
"Validation"). The default, ``--calibration gemm-anchor``: ``gemm_max`` comes from no serving row
but from public FP8 GEMM measurements (``validation/inference_data/h100_fp8_gemm.csv``) through
the library's own shape model (``gemm_anchor``), and only ``memory`` is fitted, on the
decode-bound ``calibration`` row of the 7B model; the prefill-bound 70B ``calibration`` row is
then held out like the rest. ``--calibration rows`` (the earlier method): both figures are
fitted on the two rows whose ``role`` is ``calibration`` (chosen before any held-out row was
simulated). Under both methods ``prefill_host_us`` (the host cost of a context pass, per
kernel) is solved on the one row whose role is ``anchor``: the same table's first-token latency
of a model that no held-out row uses (GPT-J 6B, 128 tokens); rows of role ``check`` (other
models of that table) are reported beside the headline, not in it. Nothing else is tuned; the
library's defaults are untouched. Every row sets ``decode_attention = "per_query_head"`` (a fact
of the measured software, not a fit: both versions predate the XQA kernel, 0.7.0 in the
repository's CHANGELOG.md, and their decode attention read each GQA KV head once per query
head). Error = model / measured - 1.

    python -m validation.inference_published [--calibration rows|gemm-anchor] [--calibrate-only]
        [--out validation/results]
    python -m validation.inference_published --gemm-anchor-only   # the derivation of gemm_max
"""
from __future__ import annotations

import argparse
import copy
import csv
import time
from pathlib import Path

DATA = Path(__file__).with_name("inference_data")
RESULTS = Path(__file__).with_name("results")
TARGET = 0.15

# Llama 2 as built by the sources' commands (same file): GQA with 8 KV heads on the 70B only
MODELS = {
    "llama2-7b": {"preset": "llama3-8b", "layers": 32, "hidden": 4096, "heads": 32,
                  "kv_heads": 32, "ffn": 11008, "vocab": 32000, "seq": 4096},
    "llama2-70b": {"preset": "llama3-70b", "layers": 80, "hidden": 8192, "heads": 64,
                   "kv_heads": 8, "ffn": 28672, "vocab": 32000, "seq": 4096},
    # the anchor and check rows' models, from the same file's build commands: GPT-J 6B (28
    # layers, 16 heads, hidden 4096, GELU MLP of 4 x hidden; vocabulary 50400 and an untied
    # output layer, GPT-J's own) and Falcon 180B (80 layers, 232 heads, 8 KV heads, hidden
    # 14848, vocabulary 65024; GELU MLP of 4 x hidden, tied embeddings: Falcon's). Their
    # position limit (2048) is below prompt + output of the 2048-token rows, which the sources
    # ran: the context is set to 4096. Falcon's parallel attention/MLP (one all-reduce per
    # layer in place of two) is not modelled.
    "gptj-6b": {"preset": "llama3-8b", "layers": 28, "hidden": 4096, "heads": 16,
                "kv_heads": 16, "ffn": 16384, "vocab": 50400, "seq": 4096,
                "gated_mlp": False, "vocab_multiple": 1},
    "falcon-180b": {"preset": "llama3-70b", "layers": 80, "hidden": 14848, "heads": 232,
                    "kv_heads": 8, "ffn": 59392, "vocab": 65024, "seq": 4096,
                    "gated_mlp": False, "tied_embeddings": True, "vocab_multiple": 1},
}
SOURCES = {
    "v061": ("TensorRT-LLM performance.md (v0.6.1 data)",
             "https://github.com/NVIDIA/TensorRT-LLM/blob/"
             "138f96d45f90b9667426f7c47297d8c06bafac73/docs/source/performance.md"),
    "v05": ("TensorRT-LLM performance.md (release/0.5.0)",
            "https://github.com/NVIDIA/TensorRT-LLM/blob/release/0.5.0/docs/source/"
            "performance.md"),
}
FIT = ("memory", "gemm_max")
# the host cost of a context pass (``efficiency.prefill_host_us``) is solved on the row whose
# role is ANCHOR (a model outside the held-out rows); CHECK rows (other models) are reported
# beside the headline, never in it
HOST = "prefill_host_us"
ANCHOR, CHECK = "anchor", "check"
GEMM_DATA = DATA / "h100_fp8_gemm.csv"
# the two calibration methods (docs/inference.md, "Validation"): "rows" fits memory and gemm_max on
# the two calibration rows; "gemm-anchor" takes gemm_max from public FP8 GEMM measurements and fits
# only memory, on the decode-bound calibration row
METHODS = ("rows", "gemm-anchor")
DEFAULT_METHOD = "gemm-anchor"


def read_data(path, ints=(), floats=("measured",)) -> list[dict]:
    """Rows of a data csv of validation/inference_data/ (comment lines start with #), with
    the columns ``ints`` as int and ``floats`` as float."""
    with open(path, newline="") as f:
        lines = [ln for ln in f if not ln.startswith("#")]
    rows = []
    for r in csv.DictReader(lines):
        r.update({k: int(r[k]) for k in ints})
        r.update({k: float(r[k]) for k in floats})
        rows.append(r)
    return rows


def load_rows(path=None) -> list[dict]:
    """The rows of validation/inference_data/trtllm_h100.csv, the static-batching tables (the
    in-flight-batching rows are validation/inference_inflight.py's)."""
    return read_data(Path(path) if path else DATA / "trtllm_h100.csv",
                     ("tp", "batch", "input", "output"))


def load_gemm_points(path=None) -> list[dict]:
    """The FP8 GEMM measurements of validation/inference_data/h100_fp8_gemm.csv (sources in its
    header comment): one dict per row with m, n, k (int), tflops (float), use (bool)."""
    pts = read_data(Path(path) if path else GEMM_DATA, ("m", "n", "k"), ("tflops",))
    for r in pts:
        r["use"] = r["use"].strip() == "1"
    return pts


def gemm_anchor(points=None, gpu: str = "h100_sxm", precision: str = "fp8",
                all_rows: bool = False) -> dict:
    """``gemm_max`` implied by measured GEMM throughput through the library's own shape model.

    For each measured shape (m, n, k) the model's GEMM rate is peak * gemm_max * s(m, n, k), with
    s the shape factor of ``compute.operators.gemm_efficiency`` at the spec's default knee (that
    function with gemm_max = 1); so each point implies gemm_max = measured / (peak * s). The
    anchor is the median over the rows marked ``use`` (every row with ``all_rows``, a
    sensitivity). Returns {"gemm_max", "points": [... with "shape_factor", "implied"], "peak_tflops"}.
    """
    from compute.hardware import get_gpu
    from compute.operators import gemm_efficiency

    spec = get_gpu(gpu)
    unit = spec.with_efficiency(gemm_max=1.0)
    peak = spec.peak_flops(precision) / 1e12
    pts = [dict(p) for p in (points if points is not None else load_gemm_points())]
    for p in pts:
        p["shape_factor"] = gemm_efficiency(p["m"], p["n"], p["k"], unit)
        p["implied"] = p["tflops"] / (peak * p["shape_factor"])
    sel = [p["implied"] for p in pts if all_rows or p["use"]]
    if not sel:
        raise ValueError("gemm_anchor: no GEMM point selected")
    return {"gemm_max": round(_median(sel), 4), "points": pts, "peak_tflops": peak,
            "knee": spec.efficiency.gemm_knee}


def with_method(rows: list[dict], method: str = DEFAULT_METHOD) -> list[dict]:
    """The rows with the roles of a calibration method: under "gemm-anchor" only the
    decode-bound calibration row calibrates (``memory``); the prefill-bound one is held out."""
    if method not in METHODS:
        raise ValueError(f"unknown calibration method {method!r} (known: {', '.join(METHODS)})")
    rows = [dict(r) for r in rows]
    if method == "gemm-anchor":
        cal = [r for r in rows if r["role"] == "calibration"]
        dec = max(cal, key=lambda r: r["output"] / r["input"])
        for r in cal:
            if r is not dec:
                r["role"] = "held-out"
    return rows


def on_dgx_h100(name: str, workload: dict) -> dict:
    """A scenario table of ``workload`` on one node of 8 H100 SXM (two-tier, NVLink 4 at
    3600 Gb/s per GPU), as the sources ran."""
    return {"name": name, "seed": 1,
            "topology": {"kind": "two_tier", "nodes": 1, "gpus_per_node": 8,
                         "scaleup_gbps": 3600, "nic_gbps": 400},
            "routing": {"policy": "ecmp"}, "workload": workload}


def scenario_dict(row: dict, efficiency: dict | None = None) -> dict:
    """The inference scenario of one table row (see the module docstring)."""
    batch = row["batch"]
    gpu = {"base": "h100_sxm", "efficiency": dict(efficiency)} if efficiency else "h100_sxm"
    return on_dgx_h100(row["id"], {
            "kind": "inference", "model": copy.deepcopy(MODELS[row["model"]]), "gpu": gpu,
            "precision": "fp8", "parallel": {"tp": row["tp"], "pp": 1, "ep": 1, "dp": 1},
            # the token budget of an iteration: 8192 (vLLM/TensorRT-LLM's usual value), raised
            # to the batch when the batch is larger (every running request decodes a token)
            "max_batch_tokens": max(8192, batch), "max_seqs": batch,
            # both versions predate TensorRT-LLM's XQA kernel (0.7.0): decode attention was the
            # masked multi-head attention kernel, one thread block per (sequence, query head),
            # so a GQA KV head is read once per query head sharing it (docs/inference.md)
            "decode_attention": "per_query_head",
            "requests": {"arrival": "concurrency", "concurrency": batch, "count": batch,
                         "input_tokens": row["input"], "output_tokens": row["output"]}})


def model_value(row: dict, efficiency: dict | None = None) -> float:
    """The row's metric as netcosim predicts it (same unit as ``measured``)."""
    from netcosim.runner import simulate_scenario
    from netcosim.scenario import Scenario

    sc = Scenario.from_dict(scenario_dict(row, efficiency), default_name=row["id"])
    s = simulate_scenario(sc)[2]
    metric = row["metric"]
    if metric == "out_tok_s":
        return s["output_tokens_per_s"]
    if metric == "out_tok_s_per_gpu":
        return s["output_tokens_per_s_per_gpu"]
    if metric == "ttft_ms":
        return s["ttft_mean_s"] * 1e3
    raise ValueError(f"{row['id']}: unknown metric {metric!r}")


def error(row: dict, efficiency: dict | None = None) -> tuple[float, float]:
    """(model value, model / measured - 1)."""
    v = model_value(row, efficiency)
    return v, v / row["measured"] - 1


def _solve(row, eff, key, lo, hi, iters=14):
    """Bisect efficiency[key] in [lo, hi] so that the row's error is zero (throughput rises and
    latency falls with either efficiency figure, the reverse with the host cost
    ``prefill_host_us``); the bound if the root lies outside."""
    sign = -1.0 if (row["metric"] == "ttft_ms") != (key == HOST) else 1.0

    def f(x):
        return sign * error(row, {**eff, key: x})[1]

    flo, fhi = f(lo), f(hi)
    if flo >= 0:
        return lo
    if fhi <= 0:
        return hi
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        if f(mid) < 0:
            lo = mid
        else:
            hi = mid
    return round(0.5 * (lo + hi), 4)


def calibrate(rows: list[dict], log=print, method: str = DEFAULT_METHOD) -> dict:
    """Method "rows": fit ``memory`` on the decode-bound calibration row and ``gemm_max`` on the
    prefill-bound one, alternating (each figure moves both rows a little) until stable.
    Method "gemm-anchor": ``gemm_max`` from ``gemm_anchor()`` (public GEMM measurements, no
    serving row), then ``memory`` alone on the decode-bound calibration row."""
    if method not in METHODS:
        raise ValueError(f"unknown calibration method {method!r} (known: {', '.join(METHODS)})")
    cal = [r for r in rows if r["role"] == "calibration"]
    # the row whose time is most sensitive to a figure calibrates it: decode-heavy rows (long
    # outputs) HBM bandwidth, prefill-heavy rows (long inputs, short outputs) GEMM efficiency
    dec = max(cal, key=lambda r: r["output"] / r["input"])
    pre = min(cal, key=lambda r: r["output"] / r["input"])
    from compute.hardware import get_gpu

    base = get_gpu("h100_sxm").efficiency
    eff = {"memory": base.memory, "gemm_max": base.gemm_max}
    if method == "gemm-anchor":
        eff["gemm_max"] = gemm_anchor()["gemm_max"]
        eff["memory"] = _solve(dec, eff, "memory", 0.3, 1.0)
        log(f"calibration: gemm_max {eff['gemm_max']:.4f} (GEMM anchor, "
            f"{GEMM_DATA.name}), memory {eff['memory']:.4f} (on {dec['id']})")
        return _host(rows, eff, log)
    for it in range(4):
        old = dict(eff)
        eff["memory"] = _solve(dec, eff, "memory", 0.3, 1.0)
        eff["gemm_max"] = _solve(pre, eff, "gemm_max", 0.2, 1.0)
        log(f"calibration pass {it + 1}: memory {eff['memory']:.4f} (on {dec['id']}), "
            f"gemm_max {eff['gemm_max']:.4f} (on {pre['id']})")
        if all(abs(eff[k] - old[k]) < 2e-3 for k in eff):
            break
    return _host(rows, eff, log)


def _host(rows: list[dict], eff: dict, log=print) -> dict:
    """``prefill_host_us`` solved on the ANCHOR row (first-token latency of a model outside the
    held-out rows, batch 1, short prompt: the row where the GPU's share is least), with the
    efficiencies already fitted; the library's default when no row is the anchor. The other
    figures hardly move it (one context pass among thousands of iterations in their rows)."""
    from compute.hardware import get_gpu

    anchor = [r for r in rows if r["role"] == ANCHOR]
    if not anchor:
        return {**eff, HOST: get_gpu("h100_sxm").efficiency.prefill_host_us}
    eff = {**eff, HOST: _solve(anchor[0], {**eff, HOST: 0.0}, HOST, 0.0, 100.0, iters=20)}
    log(f"calibration: {HOST} {eff[HOST]:.3f} us per kernel (on {anchor[0]['id']})")
    return eff


def _config(r) -> str:
    return (f"{r['model']}, H100 x TP {r['tp']}, FP8, batch {r['batch']}, "
            f"{r['input']}/{r['output']}")


def run(rows, efficiency, log=print):
    out = []
    for r in rows:
        t0 = time.perf_counter()
        d, e = error(r, efficiency) if efficiency else error(r)
        d0, e0 = error(r)
        out.append({**r, "model_value": d, "error": e, "default_value": d0,
                    "default_error": e0})
        log(f"{r['id']:22s} {r['role']:11s} measured {r['measured']:9.1f}  model {d:9.1f}  "
            f"{100 * e:+6.1f}%  (defaults {100 * e0:+6.1f}%)  {time.perf_counter() - t0:.1f} s")
    return out


def _median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def headline(res) -> dict:
    held = [abs(r["error"]) for r in res if r["role"] == "held-out"]
    return {"held_out": len(held), "within": sum(x <= TARGET for x in held),
            "median": _median(held), "worst": max(held)}


GROUPS = (
    ("Llama 2 7B, TP 1, throughput",
     lambda r: r["model"] == "llama2-7b" and r["metric"] != "ttft_ms"),
    ("Llama 2 70B, TP 2-4, throughput",
     lambda r: r["model"] == "llama2-70b" and r["metric"] != "ttft_ms"),
    # check rows only: the same v0.6.1 throughput table's other models (docs/inference.md)
    ("GPT-J 6B (multi-head attention), TP 1, throughput",
     lambda r: r["model"] == "gptj-6b" and r["metric"] != "ttft_ms"),
    ("Falcon 180B (29 query heads per KV head), TP 4-8, throughput",
     lambda r: r["model"] == "falcon-180b" and r["metric"] != "ttft_ms"),
    ("first-token latency, batch 1", lambda r: r["metric"] == "ttft_ms"),
)


def groups(res, role: str = "held-out"):
    out = []
    for name, sel in GROUPS:
        rows = [r for r in res if sel(r) and r["role"] == role]
        if rows:
            out.append((name, headline([{**r, "role": "held-out"} for r in rows])))
    return out


def _host_text(eff: dict, res=None) -> str:
    """What the results page says of ``prefill_host_us``."""
    anchor = [r for r in (res or []) if r["role"] == ANCHOR]
    if not anchor:
        return (f"`efficiency.{HOST}` = {eff.get(HOST, 0):.2f} µs per kernel of a context "
                "pass (the library's default).")
    a = anchor[0]
    return (f"`efficiency.{HOST}` = {eff[HOST]:.2f} µs per kernel of an iteration that runs "
            f"prompt tokens (library default 8.6) is solved on one row outside the 19: "
            f"`{a['id']}` ({_config(a)}, {a['measured']:g} ms, role `{ANCHOR}`), the same "
            "table's first-token latency of another model; rows of role `check` (GPT-J 6B at "
            "2048 tokens, Falcon 180B; and the v0.6.1 throughput table's GPT-J 6B and Falcon "
            "180B rows) are other models of those tables, reported beside the headline, not "
            "in it.")


def command(module: str, method: str) -> str:
    """The command line a results page names: ``module``, and the calibration method when it
    is not the default."""
    cmd = f"python -m {module}"
    return cmd if method == DEFAULT_METHOD else f"{cmd} --calibration {method}"


def _stem(method: str) -> str:
    """Result-file stem: the default method's table is inference_published.*, the other
    method's inference_published_<method>.*"""
    return ("inference_published" if method == DEFAULT_METHOD
            else "inference_published_" + method.replace("-", "_"))


def _method_text(eff: dict, method: str) -> str:
    if method == "gemm-anchor":
        a = gemm_anchor()
        used = [p for p in a["points"] if p["use"]]
        return (
            f"GEMM-anchored calibration (`--calibration gemm-anchor`): H100 "
            f"`efficiency.gemm_max` = {eff['gemm_max']:.3f} (default 0.80) comes from no serving "
            f"row but from {len(used)} public FP8 GEMM measurements (DeepGEMM README, H800 SXM, "
            f"M = 4096, N and K >= 2048; `validation/inference_data/h100_fp8_gemm.csv`): the "
            f"median of measured / (peak {a['peak_tflops']:.0f} TFLOPS x the library's shape "
            f"factor at knee {a['knee']:g}). Only `efficiency.memory` = {eff['memory']:.3f} "
            "(default 0.75) is fitted, on the decode-bound `calibration` row; the prefill-bound "
            "row `v061-70b-2048-128` is held out.")
    return (
        f"Calibrated on the two `calibration` rows only (chosen before any held-out row was "
        f"simulated): H100 `efficiency.memory` = {eff['memory']:.3f} (default 0.75) and "
        f"`efficiency.gemm_max` = {eff['gemm_max']:.3f} (default 0.80).")


def write(res, eff, outdir: Path, cmd: str, method: str = DEFAULT_METHOD):
    outdir.mkdir(parents=True, exist_ok=True)
    stem = _stem(method)
    unit = {"out_tok_s": "output tok/s", "out_tok_s_per_gpu": "output tok/s/GPU",
            "ttft_ms": "TTFT ms"}
    with open(outdir / f"{stem}.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "source", "url", "configuration", "metric", "measured", "model",
                    "error", "role", "model_defaults", "error_defaults"])
        for r in res:
            w.writerow([r["id"], SOURCES[r["source"]][0], SOURCES[r["source"]][1], _config(r),
                        r["metric"], r["measured"], f"{r['model_value']:.4g}",
                        f"{r['error']:+.4f}", r["role"], f"{r['default_value']:.4g}",
                        f"{r['default_error']:+.4f}"])
    h = headline(res)
    lines = [
        "# Serving: TensorRT-LLM's published H100 measurements vs netcosim", "",
        f"Produced by `{cmd}`. One node of 8 H100 SXM (two-tier, NVLink 3600 Gb/s per GPU), "
        "Llama 2 7B / 70B (anchor and check rows: GPT-J 6B, Falcon 180B) as the sources built "
        "them, FP8 weights and KV cache, one static "
        "wave of `batch` requests of exactly the stated lengths (the sources used static "
        "batching). Error = model / measured - 1.", "",
        _method_text(eff, method) + " " + _host_text(eff, res) + " The three figures are "
        "given to every row as "
        "`gpu = {base = \"h100_sxm\", efficiency = {...}}`; every other figure is the "
        "library's default (launch_us 5; TP all-reduces with NCCL's protocol latencies, "
        "`algorithm.protocol = \"auto\"`). Every row sets `decode_attention = "
        "\"per_query_head\"`: both versions predate TensorRT-LLM's XQA kernel (0.7.0 in its "
        "CHANGELOG.md), and their "
        "decode attention read each GQA KV head once per query head (docs/inference.md, "
        "Validation).", "",
        f"**Held-out rows within {100 * TARGET:.0f}%: {h['within']} of {h['held_out']}; "
        f"median |error| {100 * h['median']:.1f}%, worst {100 * h['worst']:.1f}%.**", "",
        "By group (held-out rows):", ""] + [
        f"* {name}: {g['within']} of {g['held_out']} within {100 * TARGET:.0f}%, median "
        f"{100 * g['median']:.1f}%, worst {100 * g['worst']:.1f}%"
        for name, g in groups(res)] + ([
        "", f"Rows of other models (role `{CHECK}`, not in the headline):", ""] + [
        f"* {name}: {g['within']} of {g['held_out']} within {100 * TARGET:.0f}%, median "
        f"{100 * g['median']:.1f}%, worst {100 * g['worst']:.1f}%"
        for name, g in groups(res, CHECK)] if any(r["role"] == CHECK for r in res) else []) + [
        "",
        "| id | source | configuration | metric | measured | netcosim | error | role | "
        "defaults: netcosim, error |",
        "|---|---|---|---|---|---|---|---|---|"]
    for r in res:
        lines.append(
            f"| {r['id']} | [{r['source']}]({SOURCES[r['source']][1]}) | {_config(r)} | "
            f"{unit[r['metric']]} | {r['measured']:,.0f} | {r['model_value']:,.1f} | "
            f"{100 * r['error']:+.1f}% | {r['role']} | {r['default_value']:,.1f}, "
            f"{100 * r['default_error']:+.1f}% |")
    write_with_sources(outdir / f"{stem}.md", lines, SOURCES)


def write_with_sources(path, lines: list, sources: dict) -> None:
    """Write a results page: ``lines``, then the list of ``sources`` (key: (name, url))."""
    lines = lines + ["", "Sources:", ""] + [f"* `{k}`: {name}, <{url}>"
                                            for k, (name, url) in sources.items()]
    path.write_text("\n".join(lines + [""]))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--calibrate-only", action="store_true",
                    help="fit on the calibration rows and stop (no held-out row is run)")
    ap.add_argument("--calibration", choices=METHODS, default=DEFAULT_METHOD,
                    help="rows: memory and gemm_max fitted on the two calibration rows; "
                         "gemm-anchor: gemm_max from public FP8 GEMM measurements, memory "
                         f"fitted on the decode-bound row (default {DEFAULT_METHOD})")
    ap.add_argument("--gemm-anchor-only", action="store_true",
                    help="print the derivation of the GEMM anchor and stop")
    a = ap.parse_args(argv)
    if a.gemm_anchor_only:
        g = gemm_anchor()
        print(f"{GEMM_DATA}: peak {g['peak_tflops']:.0f} TFLOPS, knee {g['knee']:g}")
        for p in g["points"]:
            print(f"  {p['source']} {p['gpu']} M {p['m']:5d} N {p['n']:5d} K {p['k']:5d}: "
                  f"{p['tflops']:6.0f} TFLOPS, shape factor {p['shape_factor']:.4f}, implied "
                  f"gemm_max {p['implied']:.4f}{'' if p['use'] else '  (not used)'}")
        print(f"gemm_max (median of the used rows) = {g['gemm_max']:.4f}; "
              f"all rows: {gemm_anchor(all_rows=True)['gemm_max']:.4f}")
        return 0
    rows = with_method(load_rows(), a.calibration)
    t0 = time.perf_counter()
    eff = calibrate(rows, method=a.calibration)
    print(f"calibrated: {eff}  ({time.perf_counter() - t0:.1f} s)")
    if a.calibrate_only:
        return 0
    res = run(rows, eff)
    h = headline(res)
    print(f"held-out within {100 * TARGET:.0f}%: {h['within']}/{h['held_out']}; median "
          f"{100 * h['median']:.1f}%, worst {100 * h['worst']:.1f}%; "
          f"{time.perf_counter() - t0:.1f} s")
    write(res, eff, Path(a.out), command("validation.inference_published", a.calibration),
          a.calibration)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
