"""Time to build collective schedules at scale (figures only; nothing asserted)."""
import time

import collectives as co

CASES = [("all_reduce", "ring", 1024, {}), ("all_reduce", "ring", 1024, {"step_latency_s": 1e-6}),
         ("all_reduce", "double_binary_tree", 1024, {"chunks": 8}),
         ("all_reduce", "hierarchical", 1024, {"group_size": 8}),
         ("all_reduce", "torus", 1024, {"dims": (8, 8, 16)}),
         ("all_to_all", "direct", 1024, {})]
for op, algo, n, kw in CASES:
    t = time.perf_counter()
    s = co.build(op, algo, n, 1 << 30, **kw)
    print(f"{op:12s} {algo:20s} n={n:5d} {kw}: {time.perf_counter() - t:6.2f} s  {s.describe()}")
