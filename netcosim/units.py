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
from decimal import Decimal, Inexact, InvalidOperation, localcontext

from topo.errors import InputError

# Suffix -> bytes. Matched case-sensitively except for the plain "b"/"B": "Mb" would be
# megabits elsewhere, so we only accept the byte spellings people actually use for sizes.
_SIZE_UNITS = {
    "": 1, "B": 1,
    "kB": 10**3, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "PB": 10**15,
    "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50,
}
_NUMBER = r"[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?"
_SIZE_RE = re.compile(rf"^\s*({_NUMBER})\s*([A-Za-z]*)\s*$")
_RANGE_RE = re.compile(r"^\s*(?P<lo>[^.\s][^\s]*?)\s*\.\.\s*(?P<hi>[^\s]+?)\s*"
                       r"(?:[xX*]\s*(?P<factor>[0-9]+))?\s*$")

GBPS = 1e9 / 8.0  # bytes/s in one Gbit/s
MAX_BYTES = 2**63 - 1  # Schedule.size is int64


def is_int(v) -> bool:
    """An integer, and not a bool (which Python counts as one)."""
    return isinstance(v, int) and not isinstance(v, bool)


def short_repr(v, limit: int = 60) -> str:
    """``repr(v)`` cut to ``limit`` characters, for error messages."""
    r = repr(v)
    return r if len(r) <= limit else r[: limit - 3] + "..."


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def parse_bytes(value, field: str = "bytes", allow_zero: bool = True) -> int:
    """An integer number of bytes from an int, an integral float, or a string with a unit.

    ``field`` names the setting in error messages (``workload.bytes``).
    """
    if is_int(value):
        n = value
    elif isinstance(value, float):
        if not math.isfinite(value) or value != math.floor(value):
            raise InputError(f"{field} = {value!r}: a size must be a whole number of bytes")
        if abs(value) > MAX_BYTES:
            raise InputError(f"{field} = {value!r}: larger than the {MAX_BYTES} bytes an "
                             f"int64 holds")
        n = int(value)
    elif isinstance(value, str):
        m = _SIZE_RE.match(value)
        if not m or m.group(2) not in _SIZE_UNITS:
            raise InputError(f"{field} = {value!r}: expected a size such as 4096, \"64KiB\", "
                             f"\"256MiB\" or \"1.5GB\" (units: {', '.join(u for u in _SIZE_UNITS if u)})")
        try:
            with localcontext() as ctx:  # any rounding would make the size inexact: refuse it
                ctx.traps[Inexact] = True
                ctx.prec = 60  # exact for every size up to int64 and well beyond
                exact = Decimal(m.group(1)) * _SIZE_UNITS[m.group(2)]
        except (InvalidOperation, ArithmeticError):  # exponent beyond Decimal's range
            raise InputError(f"{field} = {value!r}: not a representable size") from None
        if abs(exact) > MAX_BYTES:  # before int(): "1e999999999" would take forever
            raise InputError(f"{field} = {value!r}: larger than the {MAX_BYTES} bytes an "
                             f"int64 holds")
        if exact != exact.to_integral_value():
            raise InputError(f"{field} = {value!r}: is {exact} bytes, not a whole number")
        n = int(exact)
    else:
        raise InputError(f"{field} = {value!r}: expected a size (integer bytes or a string "
                         f"such as \"256MiB\"), got {type(value).__name__}")
    if n > MAX_BYTES:
        raise InputError(f"{field} = {value!r}: larger than the {MAX_BYTES} bytes an int64 holds")
    if n < 0 or (n == 0 and not allow_zero):
        raise InputError(f"{field} = {value!r}: a size must be {'>= 0' if allow_zero else '> 0'}")
    return n


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
_BW_UNITS = {"bps": 1e-9, "Kbps": 1e-6, "Mbps": 1e-3, "Gbps": 1.0, "Tbps": 1e3,
             "Gb/s": 1.0, "Tb/s": 1e3, "Mb/s": 1e-3,
             "GB/s": 8.0, "MB/s": 8e-3, "TB/s": 8e3}
_TIME_UNITS = {"ps": 1e-6, "ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
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


def _parse_quantity(value, field, units, what, example) -> float:
    if _is_number(value):
        x = float(value)
    elif isinstance(value, str):
        m = _QTY_RE.match(value)
        if not m or m.group(2) not in units:
            raise InputError(f"{field} = {value!r}: expected a {what} such as {example} "
                             f"(units: {', '.join(units)})")
        x = float(m.group(1)) * units[m.group(2)]
    else:
        raise InputError(f"{field} = {value!r}: expected a {what}, got {type(value).__name__}")
    if not math.isfinite(x):
        raise InputError(f"{field} = {value!r}: must be finite")
    return x
