"""Checks shared by both engines' incremental drivers (``add_transfers``)."""
from __future__ import annotations

import numpy as np

from netcore.sizes import MAX_BYTES
from topo.errors import InputError


def check_new_transfers(n_hosts: int, now_s: float, src, dst, size, start_s,
                        engine: str = "packet"):
    """Validate transfers handed to an incremental engine; returns ``(src, dst, size, start)``
    as arrays, with ``start`` in seconds (``now_s`` where ``start_s`` is None). A start at or
    past the clock's end (2^62 ps, both engines: netcore/flow/limits.py) is a PacketLimit
    naming ``engine``."""
    src = np.atleast_1d(np.asarray(src))
    dst = np.atleast_1d(np.asarray(dst))
    size = np.atleast_1d(np.asarray(size))
    n = len(src)
    for name, a in (("dst", dst), ("size", size)):
        if len(a) != n:
            raise InputError(f"{name} has {len(a)} entries, expected {n} (one per src)")
    for name, a in (("src", src), ("dst", dst)):
        if n and (not np.issubdtype(a.dtype, np.integer) or a.min() < 0 or a.max() >= n_hosts):
            bad = a[(a < 0) | (a >= n_hosts)][:1] if np.issubdtype(a.dtype, np.integer) else a[:1]
            raise InputError(f"{name} must be host ids in [0, {n_hosts}); got {bad.tolist()}")
    if n and np.any(src == dst):
        raise InputError(f"src and dst must differ; got {int(src[src == dst][0])} twice")
    if n and (not np.issubdtype(size.dtype, np.integer) or size.min() < 0):
        raise InputError(f"size must be non-negative integers (bytes); got {size[:3].tolist()}")
    if n and int(size.max()) > MAX_BYTES:  # uint64: the engines' int64 casts wrap (-1 bytes)
        raise InputError(f"size = {int(size.max())}: larger than the {MAX_BYTES} bytes an int64 "
                         f"holds")
    if start_s is None:
        return src, dst, size, np.full(n, float(now_s))
    start = np.array(np.broadcast_to(np.asarray(start_s, dtype=np.float64), (n,)))
    if n and not np.all(np.isfinite(start)):
        raise InputError(f"start_s must be finite seconds; got {start[:3].tolist()}")
    if n and start.min() < now_s:
        raise InputError(f"start_s must be >= now() = {now_s!r} s; got {float(start.min())!r}")
    from netcore.packet import limits

    with np.errstate(over="ignore"):  # 1e300 s overflows to inf: refused just below
        late = np.flatnonzero(~(start * limits.PS < limits.TIME_LIMIT_PS))
    if len(late):  # past it float64 seconds no longer resolve a transfer's duration
        raise limits.PacketLimit(f"start_s = {float(start[late[0]])!r}: beyond the {engine} "
                                 f"engine's clock, which ends at {limits.TIME_LIMIT_TEXT}")
    return src, dst, size, start
