"""User-facing units: sizes ("256MiB", "1.5GB", 4096), size ranges, bandwidth and time.

Inside the simulator sizes are integer bytes, bandwidth is bytes/s and time is seconds (see
DESIGN.md, Units). Users write bandwidth in Gbps and times in microseconds, and sizes either as
integers or as strings with a decimal (kB, MB, GB: powers of 1000) or binary (KiB, MiB, GiB:
powers of 1024) suffix. Parsing is exact (Decimal arithmetic), so "1.5KiB" is 1536 bytes and
"0.3B" is refused instead of silently rounded.
"""
from __future__ import annotations

import math
import re

# sizes are parsed one layer down (collectives read them too); re-exported here for the
# scenario layer and its users
from netcore.sizes import (MAX_BYTES, NUMBER as _NUMBER, SIZE_UNITS as _SIZE_UNITS,  # noqa: F401
                           is_int, parse_bytes)
from topo.errors import InputError

_RANGE_RE = re.compile(r"^\s*(?P<lo>[^.\s][^\s]*?)\s*\.\.\s*(?P<hi>[^\s]+?)\s*"
                       r"(?:[xX*]\s*(?P<factor>[0-9]+))?\s*$")

GBPS = 1e9 / 8.0  # bytes/s in one Gbit/s


def short_repr(v, limit: int = 60) -> str:
    """``repr(v)`` cut to ``limit`` characters, for error messages."""
    r = repr(v)
    return r if len(r) <= limit else r[: limit - 3] + "..."


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def parse_size_range(value, field: str = "bytes") -> list[int]:
    """Sizes for a sweep: a list of sizes, one size, or a geometric range string.

    ``"1KiB..8GiB"`` is every power-of-2 multiple of the start up to the end (1KiB, 2KiB, ...,
    8GiB); ``"1MiB..1GiB x4"`` steps by a factor of 4. The end is included when the steps hit it
    and is never exceeded.
    """
    if isinstance(value, list):
        if not value:
            raise InputError(f"{field} = []: the list of sizes is empty")
        return [parse_bytes(v, f"{field}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, str) and ".." in value:
        m = _RANGE_RE.match(value)
        if not m:
            raise InputError(f"{field} = {value!r}: expected a range such as \"1KiB..8GiB\" or "
                             f"\"1MiB..1GiB x4\"")
        lo = parse_bytes(m.group("lo"), f"{field} (start of {value!r})", allow_zero=False)
        hi = parse_bytes(m.group("hi"), f"{field} (end of {value!r})", allow_zero=False)
        factor = int(m.group("factor")) if m.group("factor") else 2
        if factor < 2:
            raise InputError(f"{field} = {value!r}: the step factor x{factor} must be >= 2")
        if hi < lo:
            raise InputError(f"{field} = {value!r}: the range is empty (end < start)")
        out = [lo]
        while out[-1] * factor <= hi:
            out.append(out[-1] * factor)
        return out
    return [parse_bytes(value, field)]


def format_bytes(n: int) -> str:
    """The largest binary unit that divides ``n`` exactly: 3145728 -> "3MiB", 1536 -> "1536B"."""
    n = int(n)
    for unit in ("PiB", "TiB", "GiB", "MiB", "KiB"):
        size = _SIZE_UNITS[unit]
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return f"{n}B"


# --------------------------------------------------------------------------- bandwidth, time
# unit -> (power of ten, factor): the value is number x 10^power x factor in Gbps or us. The
# power of ten is applied to the decimal text, so the result is the double nearest the exact
# value, the one the same figure written as a plain number gives ("13ns" is 0.013 us; as
# 13 * 1e-3 it was 0.013000000000000001, which put a fault at "13ns" after a transfer
# starting at 0.013 us); the factor is 1 or 8, exact in binary.
_BW_UNITS = {"bps": (-9, 1), "Kbps": (-6, 1), "Mbps": (-3, 1), "Gbps": (0, 1), "Tbps": (3, 1),
             "Gb/s": (0, 1), "Tb/s": (3, 1), "Mb/s": (-3, 1),
             "GB/s": (0, 8), "MB/s": (-3, 8), "TB/s": (3, 8)}
_TIME_UNITS = {"ps": (-6, 1), "ns": (-3, 1), "us": (0, 1), "ms": (3, 1), "s": (6, 1)}
_QTY_RE = re.compile(rf"^\s*({_NUMBER})\s*([A-Za-z/]+)\s*$")


def gbps_to_Bps(gbps: float) -> float:
    """Gbit/s -> bytes/s."""
    return float(gbps) * GBPS


def Bps_to_gbps(bps: float) -> float:
    """bytes/s -> Gbit/s."""
    return float(bps) / GBPS


def us_to_s(us: float) -> float:
    return float(us) * 1e-6


def s_to_us(s: float) -> float:
    return float(s) * 1e6


def parse_gbps(value, field: str = "gbps") -> float:
    """A bandwidth in Gbit/s: a number (Gbps) or a string with a unit ("400Gbps", "3.2Tbps",
    "50GB/s"). Must be finite and > 0."""
    g = _parse_quantity(value, field, _BW_UNITS, "bandwidth", "400 or \"3.2Tbps\"")
    if not g > 0:
        raise InputError(f"{field} = {value!r}: a bandwidth must be > 0")
    return g


def parse_us(value, field: str = "us") -> float:
    """A time in microseconds: a number (us) or a string with a unit ("500ns", "2ms")."""
    t = _parse_quantity(value, field, _TIME_UNITS, "time", "0.5 or \"500ns\"")
    if t < 0:
        raise InputError(f"{field} = {value!r}: a time must be >= 0")
    return t


def records_with_times(records, key: str, where: str):
    """``records`` (a list of tables, e.g. ``faults``) with every string ``key`` ("1ms",
    "500ns") parsed to microseconds, as a flow's ``start_us`` is; anything else, and a value
    that is not a list of tables, is left for its own check."""
    if not isinstance(records, list):
        return records
    out = []
    for i, rec in enumerate(records):
        if isinstance(rec, dict) and isinstance(rec.get(key), str):
            rec = {**rec, key: parse_us(rec[key], f"{where}[{i}].{key}")}
        out.append(rec)
    return out


def _parse_quantity(value, field, units, what, example) -> float:
    if _is_number(value):
        try:
            x = float(value)
        except OverflowError:  # an integer beyond the float range (10**400): it stopped the
            # CLI with "internal error: OverflowError: int too large to convert to float"
            raise InputError(f"{field} = {short_repr(value)}: beyond the range of a number "
                             f"(at most about 1.8e308)") from None
    elif isinstance(value, str):
        m = _QTY_RE.match(value)
        if not m or m.group(2) not in units:
            raise InputError(f"{field} = {value!r}: expected a {what} such as {example} "
                             f"(units: {', '.join(units)})")
        power, factor = units[m.group(2)]
        mantissa, _, exponent = m.group(1).lower().partition("e")
        x = float(f"{mantissa}e{int(exponent or 0) + power}") * factor
    else:
        raise InputError(f"{field} = {value!r}: expected a {what}, got {type(value).__name__}")
    if not math.isfinite(x):
        raise InputError(f"{field} = {value!r}: must be finite")
    return x
