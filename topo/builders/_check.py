"""Argument checks shared by the builders: every bad value raises InputError naming
``<where>.<key>`` and the value, so the scenario loader can pass messages straight through."""
from __future__ import annotations

from numbers import Integral, Real

from topo.errors import InputError, is_finite

# Hard ceiling on what a builder will allocate: a typo such as k = 4000 must fail at once
# with a message, not after minutes of swapping. 2e7 links is ~1 GB of arrays.
MAX_NODES = 10_000_000
MAX_LINKS = 20_000_000


def as_int(value, field: str, lo: int | None = None, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise InputError(f"{field} = {value!r}: expected an integer")
    v = int(value)
    if lo is not None and v < lo:
        raise InputError(f"{field} = {v}: must be >= {lo}")
    if hi is not None and v > hi:
        raise InputError(f"{field} = {v}: must be <= {hi}")
    return v


def as_number(value, field: str, positive: bool = True) -> float:
    """A finite real; ``positive`` asks for > 0, otherwise >= 0."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise InputError(f"{field} = {value!r}: expected a number")
    if not is_finite(value):  # 10**400 Gb/s too (float() of it raised: exit 1)
        raise InputError(f"{field} = {value!r}: expected a finite number")
    v = float(value)
    if positive and not v > 0:
        raise InputError(f"{field} = {value!r}: must be > 0")
    if not positive and v < 0:
        raise InputError(f"{field} = {value!r}: must be >= 0")
    return v


# Link rates a builder takes: far slower ones overflow the engines' times to inf (5e-324
# Gb/s; 1e-15, a microbit/s, moves 2**63 bytes in a finite time), faster than 1e299 Gb/s
# overflows bytes/s.
MIN_GBPS, MAX_GBPS = 1e-15, 1e299


def as_gbps(value, field: str) -> float:
    """A link rate in Gb/s (MIN_GBPS..MAX_GBPS) as bytes/s."""
    v = as_number(value, field)
    if not MIN_GBPS <= v <= MAX_GBPS:
        raise InputError(f"{field} = {value!r}: expected a rate in Gb/s from {MIN_GBPS:g} "
                         f"to {MAX_GBPS:g}")
    return v * 1e9 / 8.0


# Link latencies a builder takes: at most 2^60 ps (1.15e12 us, 13 days), the longest delay
# the packet engine adds to its clock (netcore/packet/limits.py DELAY_LIMIT_PS). Beyond it the
# packet engine refused naming a link, not the field, and the others overflowed: 1e308 us was
# an internal error on the flow engine (with numpy warnings) and an inf time in the estimate.
MAX_LATENCY_US = 2**60 / 1e6


def as_latency_us(value, field: str) -> float:
    """A link latency in us (0..MAX_LATENCY_US)."""
    v = as_number(value, field, positive=False)
    if v > MAX_LATENCY_US:
        raise InputError(f"{field} = {value!r}: expected a latency in us from 0 to "
                         f"{MAX_LATENCY_US:.4g} (2^60 ps, the longest delay the engines take)")
    return v


def check_derived_gbps(rate: float, field: str, value, what: str, before=(),
                       gbps: float | None = None, how: str = "") -> float:
    """A link rate (bytes/s) a builder derived from ``field`` (an oversubscription): in the
    range ``as_gbps`` allows, else refused naming the field and the rate it gave (``gbps``:
    the same rate in Gb/s, where bytes/s may have overflowed; ``how``: how it was derived).

    ``before``: ``(field, value, gbps, how)`` of the same rate with ``field`` (and every input
    after it) left at 1, from the given link rate outward; the first of them already outside
    the range is the one named. A link_gbps of 1e299 on more hosts per leaf than spines is out
    of range whatever the oversubscription, which the message used to blame (at its default
    of 1.0)."""
    last = (field, value, rate * 8 / 1e9 if gbps is None else gbps, how)
    for f, v, g, h in (*before, last):
        if not MIN_GBPS <= g <= MAX_GBPS:  # NaN and inf too
            raise InputError(f"{f} = {v!r}: gives {what} of {g:.4g} Gb/s{h}, outside "
                             f"{MIN_GBPS:g}..{MAX_GBPS:g} Gb/s")
    return rate


def as_bool(value, field: str) -> bool:
    if not isinstance(value, bool):
        raise InputError(f"{field} = {value!r}: expected true or false")
    return value


def largest(where: str, **counts) -> tuple[str, int]:
    """``(<where>.<key>, value)`` of the largest of the given counts: the one to name when a
    fabric is too big (spines = 10**12 on 4 nodes used to be reported as ``nodes = 4``)."""
    key = max(counts, key=lambda k: counts[k])
    return f"{where}.{key}", counts[key]


def check_size(n_nodes: int, n_links: int, field: str, value) -> None:
    """Refuse fabrics beyond the allocation ceiling before allocating anything."""
    if n_nodes > MAX_NODES or n_links > MAX_LINKS:
        raise InputError(f"{field} = {value!r}: the fabric would have {n_nodes} nodes and "
                         f"{n_links} links, beyond the limit of {MAX_NODES} nodes / "
                         f"{MAX_LINKS} links")
