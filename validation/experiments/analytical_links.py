"""The analytical estimate against the flow engine where a round's messages share links
(docs/collectives.md, "Analytical estimate"): every all-reduce algorithm without a fabric
layout of its own over two_tier (2 and 4 nodes of 8 GPUs), 4x4 and 4x4x4 tori, fat_tree k=4
and a 2:1 leaf-spine, at 1 and 64 MiB, Simple protocol, `ecmp`.

    python -m validation.experiments.analytical_links          # a few seconds
    python -m validation.experiments.analytical_links --grid   # every op and algorithm

Error = estimate / flow engine - 1. The flow engine runs the schedule as `netcosim collective
--engine flow` does (collectives.report.run: one ECMP hash per connection). ``--grid``: every
op and algorithm without a fabric layout of its own (not all_to_all_v, send_recv, nvls,
sharp, nvls_tree, torus, hierarchical) on eight small fabrics x routing ecmp / shortest /
spray x 64 KiB / 1 MiB / 16 MiB; prints the worst cases and the share within 10% and 25%.
"""
from __future__ import annotations

import argparse
import itertools

import numpy as np

import collectives as co
from collectives.analytical import estimate
from collectives.choose import ordered_ranks
from collectives.report import run as run_one
from topo.builders import build

FABRICS = [
    ("two_tier", {"nodes": 2, "scaleup_gbps": 2960, "nic_gbps": 376}),
    ("two_tier", {"nodes": 4, "scaleup_gbps": 2960, "nic_gbps": 376}),
    ("torus", {"dims": [4, 4], "link_gbps": 400}),
    ("torus", {"dims": [4, 4, 4], "link_gbps": 400}),
    ("fat_tree", {"k": 4, "link_gbps": 100}),
    ("leaf_spine", {"leaves": 4, "hosts_per_leaf": 8, "spines": 2, "oversubscription": 2.0,
                    "link_gbps": 100}),
]
ALGORITHMS = ("ring", "bidirectional_ring", "double_binary_tree", "recursive_halving_doubling")
SIZES = (1 << 20, 64 << 20)
GRID_FABRICS = [
    ("fat_tree", {"k": 4, "link_gbps": 100}), ("fat_tree", {"k": 8, "link_gbps": 400}),
    ("leaf_spine", {"leaves": 4, "hosts_per_leaf": 4, "spines": 2, "oversubscription": 2.0,
                    "link_gbps": 100}),
    ("torus", {"dims": [4, 4], "link_gbps": 100}), ("torus", {"dims": [3, 3, 2], "link_gbps": 100}),
    ("two_tier", {"nodes": 2, "gpus_per_node": 4, "scaleup_gbps": 1600, "nic_gbps": 200}),
    ("fullflat", {"n_gpus": 16, "planes": 4, "switch_radix": 32, "gpu_gbps": 800})]
GRID_SKIP = ("nvls", "sharp", "nvls_tree", "torus", "hierarchical")


def grid() -> None:
    """Every op x algorithm on the grid fabrics x routings x sizes."""
    from topo.errors import InputError

    out = []
    for (kind, params), routing in itertools.product(GRID_FABRICS, ("ecmp", "shortest", "spray")):
        t = build(kind, params)
        r = ordered_ranks(t, None)
        for op, algos in co.ALGORITHMS.items():
            if op in ("all_to_all_v", "send_recv"):
                continue
            for algo in (a for a in algos if a not in GRID_SKIP):
                for size in (1 << 16, 1 << 20, 1 << 24):
                    try:
                        e = estimate(t, op, algo, r, size, routing=routing, protocol="simple")
                        f = run_one(t, op, algo, r, size, engine="flow", routing=routing,
                                    protocol="simple")["time_s"]
                    except InputError:  # e.g. an algorithm that needs a power of two
                        continue
                    out.append((e / f - 1, f"{kind} {params}"[:40], routing, op, algo, size))
    out.sort()
    for row in out[:10] + out[-10:]:
        print(f"{row[0]:+7.1%} {row[1]:40} {row[2]:8} {row[3]:14} {row[4]:28} {row[5]}")
    err = np.abs([o[0] for o in out])
    print(f"{len(out)} cases: {np.mean(err <= 0.10):.1%} within 10%, "
          f"{np.mean(err <= 0.25):.1%} within 25%, worst {err.max():.1%}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grid", action="store_true", help="every op and algorithm, small fabrics")
    if ap.parse_args().grid:
        grid()
        return
    print(f"{'fabric':44} {'algorithm':28} {'size':>6} {'flow us':>10} {'estimate us':>12} "
          f"{'error':>7}")
    for kind, params in FABRICS:
        t = build(kind, params)
        r = ordered_ranks(t, None)
        for algo in ALGORITHMS:
            for size in SIZES:
                f = run_one(t, "all_reduce", algo, r, size, engine="flow",
                            protocol="simple")["time_s"]
                e = estimate(t, "all_reduce", algo, r, size, protocol="simple")
                print(f"{kind + ' ' + str(params):44.44} {algo:28} {size >> 20:>5}M "
                      f"{f * 1e6:10.1f} {e * 1e6:12.1f} {e / f - 1:+7.1%}", flush=True)


if __name__ == "__main__":
    main()
