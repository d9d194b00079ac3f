"""The analytical estimate against the flow engine where a round's messages share links
(docs/collectives.md, "Analytical estimate"): every all-reduce algorithm without a fabric
layout of its own over two_tier (2 and 4 nodes of 8 GPUs), 4x4 and 4x4x4 tori, fat_tree k=4
and a 2:1 leaf-spine, at 1 and 64 MiB, Simple protocol, `ecmp`.

    python -m validation.experiments.analytical_links          # about a minute

Error = estimate / flow engine - 1. The flow engine runs the schedule as `netcosim collective
--engine flow` does (collectives.report.run: one ECMP hash per connection).
"""
from __future__ import annotations

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


def main() -> None:
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
