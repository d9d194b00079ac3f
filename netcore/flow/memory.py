"""What the flow engine's state costs in memory, for the guards that refuse a run too large.

The engine checks its own run where it knows it exactly (engine.py, ``memory_budget``): before
it splits members off their sets (the pieces and the schedule's copy) and once the schedule's
member sets are routed. The training workload checks a step before the engine sees it
(netcosim/memory_guard.py), without the split, which only routing can tell: both price the same
state with these figures.

Measured (session 34) as the peak above the memory in use once the paths were routed, with the
path entries taken out, per schedule node after splitting: 443 bytes on the 1.8T MoE step on
32,768 FullFlat GPUs (4.28 M nodes, 1.29 M flows), 340 on the 1T dense step beside it (1.74 M
nodes), 363 / 379 on two_tier steps of GPT-3-class models, 592 and 584 on DeepSeek-V3 on 2,048
and 16,384 GPUs (0.68 M / 0.64 M nodes, more of them flows). The per-node arrays themselves
(``FlowState``: 31 numbers, three heaps, the timeline, reroute marks) are about 370 bytes; the
rest is the results gathered at the end.
"""
from __future__ import annotations

# a schedule node's state for the whole run, rounded up from the largest figure above
NODE_STATE_BYTES = 600
# Memory of one path entry (a flow's weight on a representative link) from its building to the
# end of the run, at its peak: the routed paths and their copies while they are assigned, the
# entry pool and the per-link slots the engine keeps. Measured on DeepSeek-V3 (EP 64) on 2,048 /
# 16,384 GPUs of two_tier: 17.0 M / 132.3 M entries, the peak 1.24 / 7.14 GB above the memory
# in use before the run: 73 / 54 bytes an entry; rounded up
ENTRY_BYTES = 80


def schedule_bytes(schedule) -> int:
    """Bytes of ``schedule``'s arrays: its columns, dependency CSR, extra columns and member
    sets (what a copy of it, such as the split's, allocates)."""
    import numpy as np

    arrays = [v for v in vars(schedule).values() if isinstance(v, np.ndarray)]
    arrays += [v for v in schedule.extra.values() if isinstance(v, np.ndarray)]
    if schedule.sets is not None:
        arrays += [v for v in vars(schedule.sets).values() if isinstance(v, np.ndarray)]
    return int(sum(a.nbytes for a in arrays))
