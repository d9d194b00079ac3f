"""Run netcosim scenarios in ns-3 (the packet simulator the field trusts) for cross-validation.

``run_ns3(topology, schedule, routing, faults, mtu, buffer_packets, ...)`` returns the same
``netcore.result.Result`` as the engines. ns-3 comes from the optional extra
(``pip install -e ".[ns3]"``) and is imported on first use. docs/ns3.md has the details.
"""
from validation.ns3.binding import NS3Unavailable, available
from validation.ns3.runner import run_ns3
from validation.ns3.support import NS3Unsupported

__all__ = ["run_ns3", "available", "NS3Unavailable", "NS3Unsupported"]
