"""The flow engine's clock: float64 seconds, checked before a run.

A time t in float64 resolves steps of about t x 2.2e-16: at 1e17 us a 32 MiB transfer's
duration was already 0.2% off, and past 1e22 us whole transfers took no time at all (their
end equalled their start, links were never busy), silently. The flow engine therefore ends
its clock where the packet engine's integer clock ends, 2^62 ps (53 days, where float64 still
resolves 1 ns), and refuses inputs beyond it with the packet engine's check and error type,
so the scenario layer names the field (netcosim.scenario._limit_message).

A fault time needs no such limit: a fault after the run's end never strikes (a large
``at_us`` is a way to say "not in this run"), and the run itself cannot reach the clock's end
unless its own times do.
"""
from __future__ import annotations

from netcore.packet.limits import check_times


def check(schedule) -> None:
    """Refuse starts and compute/delay durations at or past the clock's end."""
    check_times(schedule, "flow engine")
