"""Load ns-3 (the `ns3` PyPI package, Python bindings through cppyy) and compile our driver.

Importing ns-3 takes ~15 s (cppyy parses the headers), so it happens once per process, on
first use. Time resolution is set to picoseconds before any simulation object exists: ns-3's
default (nanoseconds) would round a 9,002-byte frame at 400 Gb/s (180.04 ns) to 180 ns, which
is the kind of per-packet rounding the packet engine avoids.
"""
from __future__ import annotations

import os
import time

from topo.errors import InputError

_DRIVER_CC = os.path.join(os.path.dirname(__file__), "driver.cc")
_state: dict = {}


class NS3Unavailable(InputError):
    """The ns-3 Python package is not installed (pip install -e '.[ns3]')."""


def available() -> bool:
    import importlib.util

    return importlib.util.find_spec("ns") is not None


def load():
    """Return ``(ns, drv)``: the ns-3 namespace and our compiled ``netcosim_ns3`` namespace."""
    if "ns" in _state:
        return _state["ns"], _state["drv"]
    t0 = time.perf_counter()
    try:
        from ns import ns  # noqa: F401  (the ns3 package installs the `ns` module)
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise NS3Unavailable(f"ns-3 is not installed ({e}); pip install -e '.[ns3]'") from None
    import cppyy

    if ns.Time.GetResolution() != ns.Time.PS:
        ns.Time.SetResolution(ns.Time.PS)  # may only be called once per process
    with open(_DRIVER_CC) as f:
        cppyy.cppdef(f.read())
    _state["ns"] = ns
    _state["drv"] = cppyy.gbl.netcosim_ns3
    _state["load_s"] = time.perf_counter() - t0
    return _state["ns"], _state["drv"]


def load_seconds() -> float:
    return float(_state.get("load_s", 0.0))
