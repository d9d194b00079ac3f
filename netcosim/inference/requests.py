"""The request stream of a serving scenario: ``[workload.requests]`` -> numpy arrays.

Arrival processes: ``arrival = "poisson"`` with ``rate`` (requests/s) over ``duration_s`` (or
``count`` requests); ``"concurrency"`` with ``concurrency`` clients that each send the next
request when the previous one finishes (``count`` requests in all); ``"trace"`` with ``trace``, a
CSV file of ``arrival_s,input_tokens,output_tokens`` rows (a header line is allowed).
Lengths (``input_tokens``, ``output_tokens``): an integer, or ``{dist = "uniform", min, max}``,
``{dist = "normal", mean, std, min, max}`` (clipped), ``{dist = "lognormal", mean, sigma,
min, max}`` (``mean`` of the length, ``sigma`` of its log; clipped). Sampled from the scenario
seed, so a run is deterministic.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from topo.errors import InputError

ARRIVALS = ("poisson", "concurrency", "trace")
KEYS = ("arrival", "rate", "duration_s", "count", "concurrency", "trace", "input_tokens",
        "output_tokens")
MAX_REQUESTS = 10_000_000
# longest request length we take (input or output tokens): far beyond any model's context, and
# small enough that input + output, and their sums over a run, stay exact in int64 (a length
# of 2^62 + 2^62 wrapped to a negative length that passed the context check)
MAX_TOKENS = 2**40


def _num(d, k, where, integer=False, minimum=0.0):
    v = d[k]
    ok = (isinstance(v, int) if integer else isinstance(v, (int, float))) and \
        not isinstance(v, bool) and math.isfinite(v) and v > minimum
    if not ok:
        raise InputError(f"{where}.{k} = {v!r}: expected a positive "
                         f"{'integer' if integer else 'number'}")
    return v


def _lengths(v, n, rng, where):
    if isinstance(v, int) and not isinstance(v, bool):
        if v < 1:
            raise InputError(f"{where} = {v}: expected a length of at least 1 token")
        if v > MAX_TOKENS:
            raise InputError(f"{where} = {v}: at most {MAX_TOKENS:,} tokens")
        return np.full(n, v, dtype=np.int64)
    if not isinstance(v, dict):
        raise InputError(f"{where} = {v!r}: expected an integer or a table with dist")
    from netcosim.scenario import check_keys

    dist = v.get("dist")
    need = {"uniform": ("min", "max"), "normal": ("mean", "std"),
            "lognormal": ("mean", "sigma")}
    if not isinstance(dist, str) or dist not in need:
        raise InputError(f"{where}.dist = {dist!r}: expected one of {', '.join(need)}")
    check_keys(v, ("dist", "min", "max", "mean", "std", "sigma"), where)
    for k in need[dist]:
        if k not in v:
            raise InputError(f"{where}.{k}: missing for dist = {dist!r}")
        _num(v, k, where, minimum=-1e-300 if k in ("std", "sigma") else 0.0)
    lo = v.get("min", 1)
    hi = v.get("max", None)
    for k, x in (("min", lo), ("max", hi)):
        if x is not None and (not isinstance(x, int) or isinstance(x, bool) or x < 1):
            raise InputError(f"{where}.{k} = {x!r}: expected a length of at least 1 token")
        if x is not None and x > MAX_TOKENS:
            raise InputError(f"{where}.{k} = {x}: at most {MAX_TOKENS:,} tokens")
    if hi is not None and hi < lo:
        raise InputError(f"{where}.max = {hi}: below min = {lo}")
    if dist == "uniform":
        x = rng.integers(lo, hi + 1, n)
    elif dist == "normal":
        x = np.rint(rng.normal(v["mean"], float(v["std"]) + 0.0, n))  # -0.0: numpy refuses
    else:
        s = float(v["sigma"]) + 0.0
        x = np.rint(rng.lognormal(math.log(v["mean"]) - s * s / 2, s, n))
    x = np.clip(x, lo, hi if hi is not None else None)
    if len(x) and not x.max() <= MAX_TOKENS:  # before the cast: 1e30 became -2^63 tokens
        raise InputError(f"{where}: a sampled length of {float(x.max()):.4g} tokens; at most "
                         f"{MAX_TOKENS:,} (set {where}.max)")
    return x.astype(np.int64)


def _trace(path, base_dir, where):
    p = Path(path)
    if not p.is_absolute() and base_dir is not None:
        p = Path(base_dir) / p
    if not p.is_file():
        raise InputError(f"{where} = {path!r}: file not found")
    rows = []
    for i, line in enumerate(p.read_text().splitlines()):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        cells = [c.strip() for c in line.split(",")]
        try:
            a, inp, out = float(cells[0]), int(cells[1]), int(cells[2])
        except (ValueError, IndexError):
            if i == 0:
                continue  # header
            raise InputError(f"{where}: line {i + 1} = {line!r}: expected "
                             f"arrival_s,input_tokens,output_tokens") from None
        if not (math.isfinite(a) and a >= 0):
            raise InputError(f"{where}: line {i + 1}: arrival_s = {cells[0]}: expected >= 0")
        if inp < 1:
            raise InputError(f"{where}: line {i + 1}: input_tokens = {inp}: expected >= 1")
        if out < 1:
            raise InputError(f"{where}: line {i + 1}: output_tokens = {out}: expected >= 1")
        for k, x in (("input_tokens", inp), ("output_tokens", out)):
            if x > MAX_TOKENS:
                raise InputError(f"{where}: line {i + 1}: {k} = {x}: at most {MAX_TOKENS:,}")
        rows.append((a, inp, out))
    if not rows:
        raise InputError(f"{where} = {path!r}: no requests")
    # token counts stay integers (through float64 they rounded past 2^53)
    arrival = np.array([r[0] for r in rows], dtype=np.float64)
    order = np.argsort(arrival, kind="stable")
    inp = np.array([r[1] for r in rows], dtype=np.int64)
    out = np.array([r[2] for r in rows], dtype=np.int64)
    return arrival[order], inp[order], out[order]


def sample(spec, seed: int, where: str, base_dir=None):
    """(arrival_s, input_tokens, output_tokens, concurrency) arrays; arrival is NaN for a
    closed-loop (concurrency) request, whose arrival the serving loop sets; concurrency is 0
    for an open stream."""
    from netcosim.scenario import check_keys

    if not isinstance(spec, dict):
        raise InputError(f"{where}: expected a table")
    check_keys(spec, KEYS, where)
    kind = spec.get("arrival", "poisson")
    if kind not in ARRIVALS:
        raise InputError(f"{where}.arrival = {kind!r}: expected one of {', '.join(ARRIVALS)}")
    rng = np.random.default_rng([int(seed), 0x1F3])
    if kind == "trace":
        if "trace" not in spec:
            raise InputError(f"{where}.trace: missing (a CSV of arrival_s,input_tokens,"
                             f"output_tokens)")
        a, i, o = _trace(spec["trace"], base_dir, f"{where}.trace")
        return a, i, o, 0
    for k in ("input_tokens", "output_tokens"):
        if k not in spec:
            raise InputError(f"{where}.{k}: missing")
    if kind == "poisson":
        if "rate" not in spec:
            raise InputError(f"{where}.rate: missing (requests per second)")
        rate = _num(spec, "rate", where)
        if "count" in spec:
            n = _num(spec, "count", where, integer=True)
        elif "duration_s" in spec:
            m = rate * _num(spec, "duration_s", where)
            if not math.isfinite(m):  # the product of two finite numbers overflowed
                raise InputError(f"{where}: rate x duration_s = {m} requests; at most "
                                 f"{MAX_REQUESTS:,}")
            n = int(round(m))
        else:
            raise InputError(f"{where}.duration_s: missing (or count)")
        if n > MAX_REQUESTS:
            raise InputError(f"{where}: {n:,} requests; at most {MAX_REQUESTS:,}")
        arrival = np.cumsum(rng.exponential(1.0 / rate, max(n, 1)))
        conc = 0
    else:
        if "concurrency" not in spec:
            raise InputError(f"{where}.concurrency: missing")
        conc = _num(spec, "concurrency", where, integer=True)
        if "count" not in spec:
            raise InputError(f"{where}.count: missing (requests in all)")
        n = _num(spec, "count", where, integer=True)
        if n > MAX_REQUESTS:
            raise InputError(f"{where}.count = {n}: at most {MAX_REQUESTS:,}")
        arrival = np.full(n, np.nan)
    inp = _lengths(spec["input_tokens"], len(arrival), rng, f"{where}.input_tokens")
    out = _lengths(spec["output_tokens"], len(arrival), rng, f"{where}.output_tokens")
    return arrival, inp, out, conc
