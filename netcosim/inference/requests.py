"""The request stream of a serving scenario: ``[workload.requests]`` -> numpy arrays.

Arrival processes: ``arrival = "poisson"`` with ``rate`` (requests/s) over ``duration_s`` (or
``count`` requests); ``"concurrency"`` with ``concurrency`` clients that each send the next
request when the previous one finishes (``count`` requests in all); ``"trace"`` with ``trace``, a
CSV file of ``arrival_s,input_tokens,output_tokens`` rows. Its first row is a header only if
none of its cells is a number (a first row with a number is data, and an error if malformed);
blank lines and ``#`` comments are skipped. Arrivals must lie within HORIZON_S of the first
(a trace's own time origin is free: the serving run starts its clock at the first arrival).
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
# the longest stretch of arrivals we take, in seconds (46 days). The serving loop's clock is
# float64 seconds: at 1e16 s its step is 2 s, so 10 ms iterations vanished (TTFT, e2e and the
# span read 0), and at 1e12 s TTFT was off by 0.5 %. At 4e6 s the step is 0.93 ns, so a
# millisecond iteration keeps ~6 significant digits at worst. And the run's clock (the flow
# and packet engines') ends at 2^62 ps, 53 days: a longer stream was refused there with a
# message naming no field; this leaves a week for the last requests to finish.
HORIZON_S = 4e6


def _num(d, k, where, integer=False, minimum=0.0):
    v = d[k]
    ok = (isinstance(v, int) if integer else isinstance(v, (int, float))) and \
        not isinstance(v, bool)
    too_big = False
    if ok and not integer:
        try:  # an int beyond the float range (rate = 10**400) stopped the CLI with
            # "internal error: OverflowError: int too large to convert to float"
            v = float(v)
        except OverflowError:
            ok, too_big = False, v > 0
    if not (ok and (integer or math.isfinite(v)) and v > minimum):
        from netcosim.units import short_repr

        raise InputError(f"{where}.{k} = {short_repr(v)}: expected a positive "
                         f"{'integer' if integer else 'number'}"
                         f"{' (at most about 1.8e308)' if too_big else ''}")
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


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _trace(path, base_dir, where):
    if not isinstance(path, str) or not path:  # trace = 3 stopped on Path's TypeError
        raise InputError(f"{where} = {path!r}: expected the name of a CSV file "
                         f"(arrival_s,input_tokens,output_tokens per row)")
    p = Path(path)
    if not p.is_absolute() and base_dir is not None:
        p = Path(base_dir) / p
    if p.is_dir():
        raise InputError(f"{where} = {path!r}: a directory, not a CSV file")
    if not p.is_file():
        raise InputError(f"{where} = {path!r}: file not found")
    try:
        text = p.read_text()
    except UnicodeDecodeError as e:  # a binary file stopped on the codec's error
        raise InputError(f"{where} = {path!r}: not a text (CSV) file (byte "
                         f"{e.object[e.start]:#04x} at offset {e.start} is not UTF-8)") from None
    except OSError as e:
        raise InputError(f"{where} = {path!r}: cannot be read ({e.strerror or e})") from None
    at = f"{where} = {path!r}"

    def bad(line_no, what):
        # the field and line lead (tests and users grep "trace: line N: cell = value"), the
        # file closes the message
        return InputError(f"{where}: line {line_no}: {what} (in {path!r})")

    rows = []
    first_row = True
    for i, line in enumerate(text.splitlines()):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        cells = [c.strip() for c in line.split(",")]
        # a header has no number in it: a first row with one is data, so a typo in it (5l2)
        # is reported, not dropped as a header (that lost a request in silence)
        if first_row and not any(_is_number(c) for c in cells):
            first_row = False
            continue
        first_row = False
        if len(cells) != 3:
            raise bad(i + 1, f"row {line!r}: expected 3 cells "
                      f"(arrival_s,input_tokens,output_tokens), got {len(cells)}")
        try:
            a = float(cells[0])
        except ValueError:
            raise bad(i + 1, f"arrival_s = {cells[0]!r}: expected a number of seconds") \
                from None
        vals = []
        for k, c in (("input_tokens", cells[1]), ("output_tokens", cells[2])):
            try:
                vals.append(int(c))
            except ValueError:
                raise bad(i + 1, f"{k} = {c!r}: expected an integer number of tokens") \
                    from None
        inp, out = vals
        if not (math.isfinite(a) and a >= 0):
            raise bad(i + 1, f"arrival_s = {cells[0]}: expected >= 0")
        if inp < 1:
            raise bad(i + 1, f"input_tokens = {inp}: expected >= 1")
        if out < 1:
            raise bad(i + 1, f"output_tokens = {out}: expected >= 1")
        for k, x in (("input_tokens", inp), ("output_tokens", out)):
            if x > MAX_TOKENS:
                raise bad(i + 1, f"{k} = {x}: at most {MAX_TOKENS:,}")
        rows.append((a, inp, out, i + 1, cells[0]))
    if not rows:
        raise InputError(f"{at}: no requests")
    # token counts stay integers (through float64 they rounded past 2^53)
    arrival = np.array([r[0] for r in rows], dtype=np.float64)
    order = np.argsort(arrival, kind="stable")
    first, last = rows[order[0]], rows[order[-1]]
    if last[0] - first[0] > HORIZON_S:
        raise bad(last[3], f"arrival_s = {last[4]}: {last[0] - first[0]:.3g} s after the "
                  f"first arrival (line {first[3]}); arrivals may span at most "
                  f"{HORIZON_S:.0e} s (the simulated clock's resolution)")
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
            if n > MAX_REQUESTS:
                raise InputError(f"{where}.count = {n}: at most {MAX_REQUESTS:,} requests")
            asked = f"{where}.count = {n}"
        elif "duration_s" in spec:
            dur = _num(spec, "duration_s", where)
            m = rate * dur  # inf when the product of two finite numbers overflows
            asked = f"{where}.duration_s = {dur:.3g}"
            # compact numbers: 1e300 requests printed as a 301-digit integer
            what = (f"{where}: rate x duration_s = {m:.3g} requests ({where}.rate = "
                    f"{rate:.3g}, {asked})")
            if not m < MAX_REQUESTS + 0.5:  # what rounds to more than MAX_REQUESTS, or inf
                raise InputError(f"{what}; at most {MAX_REQUESTS:,}")
            n = int(round(m))
            if n < 1:  # served as one request before
                raise InputError(f"{what}: fewer than one")
        else:
            raise InputError(f"{where}.duration_s: missing (or count)")
        arrival = np.cumsum(rng.exponential(1.0 / rate, n))
        # a rate so low that the arrivals reach past the horizon (1 / rate overflowing to inf
        # too): float64 would no longer resolve the iterations there
        if not arrival[-1] <= HORIZON_S:
            raise InputError(f"{where}.rate = {rate:.3g} ({asked}): the Poisson arrivals reach "
                             f"{arrival[-1]:.3g} s; they may span at most {HORIZON_S:.0e} s "
                             f"(the simulated clock's resolution)")
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
