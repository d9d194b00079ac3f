"""Serving figures for summary.json from the loop's per-request and per-iteration arrays."""
from __future__ import annotations

import numpy as np

from netcosim.inference.loop import IT_COMM, IT_DECODE, IT_DUR, IT_PREFILL, IT_SEQS

QUANTILES = (("p50", 50), ("p90", 90), ("p99", 99))


def _stats(prefix: str, x: np.ndarray, out: dict, weights=None) -> None:
    """mean, p50, p90, p99 of x (seconds) as ``<prefix>_mean_s`` ...; weighted quantiles
    (each x counted ``weights`` times) for inter-token gaps."""
    if x.size == 0 or (weights is not None and weights.sum() == 0):
        for k in ("mean",) + tuple(q for q, _ in QUANTILES):
            out[f"{prefix}_{k}_s"] = None
        return
    if weights is None:
        out[f"{prefix}_mean_s"] = float(x.mean())
        for name, q in QUANTILES:
            out[f"{prefix}_{name}_s"] = float(np.percentile(x, q))
        return
    order = np.argsort(x, kind="stable")
    xs, ws = x[order], weights[order].astype(np.float64)
    cw = np.cumsum(ws)
    out[f"{prefix}_mean_s"] = float((xs * ws).sum() / cw[-1])
    for name, q in QUANTILES:
        # the smallest gap with at least q% of the tokens at or below it
        i = int(np.searchsorted(cw, q / 100.0 * cw[-1], side="left"))
        out[f"{prefix}_{name}_s"] = float(xs[min(i, len(xs) - 1)])


def summarize(arrival, inp, out_tokens, first, finish, iterations: list, n_gpus: int,
              slo: dict) -> dict:
    """``iterations``: one (k, IT_COLS) array per replica."""
    its = np.concatenate(iterations) if iterations else np.zeros((0, 7))
    ttft = first - arrival
    e2e = finish - arrival
    multi = out_tokens > 1
    tpot = np.full(len(arrival), np.nan)
    tpot[multi] = (finish[multi] - first[multi]) / (out_tokens[multi] - 1)
    span = float(finish.max() - arrival.min()) if len(arrival) else 0.0
    res: dict = {"requests": int(len(arrival))}
    _stats("ttft", ttft, res)
    _stats("itl", its[:, IT_DUR], res, its[:, IT_DECODE])
    _stats("tpot", tpot[multi], res)
    _stats("e2e", e2e, res)
    total_out = float(out_tokens.sum())
    res["input_tokens"] = int(inp.sum())
    res["output_tokens"] = int(total_out)
    res["serving_span_s"] = span
    res["request_rate_rps"] = len(arrival) / span if span > 0 else None
    res["output_tokens_per_s"] = total_out / span if span > 0 else None
    res["output_tokens_per_s_per_gpu"] = total_out / span / n_gpus if span > 0 else None
    ok = np.ones(len(arrival), dtype=bool)
    for key, arr in (("ttft_ms", ttft), ("tpot_ms", tpot), ("e2e_ms", e2e)):
        if key in slo:
            ok &= ~(arr > slo[key] * 1e-3)  # a one-token request has no tpot: it meets it
    res["slo"] = dict(slo) or None
    res["slo_attainment"] = float(ok.mean()) if len(ok) else None
    res["goodput_rps"] = float(ok.sum()) / span if span > 0 else None
    busy = float(its[:, IT_DUR].sum())
    res["iterations"] = int(len(its))
    res["comm_share"] = float(its[:, IT_COMM].sum()) / busy if busy > 0 else 0.0
    res["mean_batch_seqs"] = float(its[:, IT_SEQS].mean()) if len(its) else 0.0
    res["prefill_tokens_per_iteration"] = float(its[:, IT_PREFILL].mean()) if len(its) else 0.0
    return res


def stats(prefix: str, x: np.ndarray, out: dict) -> None:
    """mean, p50, p90, p99 of x (seconds) as ``<prefix>_mean_s`` ... in ``out``."""
    _stats(prefix, np.asarray(x, dtype=np.float64), out)


def pool_figures(prefix: str, iterations: list, out: dict) -> None:
    """Busy figures of one pool of a disaggregated run: ``<prefix>_iterations``,
    ``_comm_share``, ``_mean_batch_seqs``, ``_busy_s`` (summed over its replicas)."""
    its = np.concatenate(iterations) if iterations else np.zeros((0, 7))
    busy = float(its[:, IT_DUR].sum())
    out[f"{prefix}_iterations"] = int(len(its))
    out[f"{prefix}_comm_share"] = float(its[:, IT_COMM].sum()) / busy if busy > 0 else 0.0
    out[f"{prefix}_mean_batch_seqs"] = float(its[:, IT_SEQS].mean()) if len(its) else 0.0
    out[f"{prefix}_busy_s"] = busy
