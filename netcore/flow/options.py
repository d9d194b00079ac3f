"""Options of the flow engine: defaults, types and ranges. Errors name ``engine.<key>``."""
from __future__ import annotations

import math

from topo.errors import InputError

DEFAULTS = {
    # bytes of one packet; when set, a transfer's end includes one store-and-forward
    # serialisation of its last packet on every hop after the first (see docs/flow_engine.md)
    "mtu": None,
    # time between a link going down and the re-routing of the flows it carried (microseconds)
    "reroute_delay_us": 0.0,
    # record the piecewise-constant rate of every directed link (Result.link_extra["series_*"])
    "link_series": False,
    # record the directed links each transfer used (Result.node_extra["path_*"])
    "record_paths": True,
}


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_options(opts: dict) -> dict:
    """Fill defaults and check every option; unknown keys are errors (a typo must not be
    silently ignored in a sweep of thousands of runs)."""
    out = dict(DEFAULTS)
    for key, val in (opts or {}).items():
        if key not in DEFAULTS:
            raise InputError(f"engine.{key}: unknown option of the flow engine (known: "
                             f"{', '.join(sorted(DEFAULTS))})")
        out[key] = val
    mtu = out["mtu"]
    if mtu is not None:
        if not isinstance(mtu, int) or isinstance(mtu, bool) or mtu <= 0:
            raise InputError(f"engine.mtu = {mtu!r}: expected a positive integer number of "
                             f"bytes (or nothing)")
    d = out["reroute_delay_us"]
    if not _is_number(d) or not math.isfinite(d) or d < 0:
        raise InputError(f"engine.reroute_delay_us = {d!r}: expected a time >= 0")
    out["reroute_delay_us"] = float(d)
    for key in ("link_series", "record_paths"):
        if not isinstance(out[key], bool):
            raise InputError(f"engine.{key} = {out[key]!r}: expected true or false")
    return out
