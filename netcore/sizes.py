"""Sizes as users write them: 4096, "256MiB", "1.5GB" -> integer bytes.

The one parser of byte sizes for every layer: collectives take ``nbytes="1GiB"`` and the
scenario layer (netcosim.units, which re-exports it) reads sizes in files, so it lives here,
below both. Decimal units (kB, MB, GB: powers of 1000) and binary ones (KiB, MiB, GiB: powers
of 1024); parsing is exact (Decimal arithmetic), so "1.5KiB" is 1536 bytes and "0.3B" is
refused instead of silently rounded.
"""
from __future__ import annotations

import math
import re
from decimal import Decimal, Inexact, InvalidOperation, localcontext

from topo.errors import InputError

# Suffix -> bytes. Matched case-sensitively except for the plain "b"/"B": "Mb" would be
# megabits elsewhere, so we only accept the byte spellings people actually use for sizes.
SIZE_UNITS = {
    "": 1, "B": 1,
    "kB": 10**3, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "PB": 10**15,
    "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50,
}
NUMBER = r"[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?"
_SIZE_RE = re.compile(rf"^\s*({NUMBER})\s*([A-Za-z]*)\s*$")
MAX_BYTES = 2**63 - 1  # Schedule.size is int64


def is_int(v) -> bool:
    """An integer, and not a bool (which Python counts as one)."""
    return isinstance(v, int) and not isinstance(v, bool)


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
        if not m or m.group(2) not in SIZE_UNITS:
            raise InputError(f"{field} = {value!r}: expected a size such as 4096, \"64KiB\", "
                             f"\"256MiB\" or \"1.5GB\" (units: {', '.join(u for u in SIZE_UNITS if u)})")
        try:
            with localcontext() as ctx:  # any rounding would make the size inexact: refuse it
                ctx.traps[Inexact] = True
                ctx.prec = 60  # exact for every size up to int64 and well beyond
                exact = Decimal(m.group(1)) * SIZE_UNITS[m.group(2)]
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
