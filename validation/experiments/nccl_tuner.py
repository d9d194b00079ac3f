"""NCCL's own tuner prediction beside the measured multi-node nccl-tests times.

For every multi-node table of validation/nccl_tests_data and every size from 1 MiB to 8 GiB,
prints the measured all-reduce time (the better of the two columns), the out-of-place /
in-place ratio (a large ratio marks the first use of an algorithm: NCCL connects it then),
and what NCCL's tuner picks and predicts (collectives/nccl_tuner.py, on the validation's
fabric). It shows that the tuner's picks switch where the spikes are, and how far NCCL's own
predicted times sit from what the clusters measure (docs/collectives.md, "NCCL's choice on
two_tier"). A diagnostic, not part of the product.

    python -m validation.experiments.nccl_tuner
"""
from __future__ import annotations

from collectives import nccl_tuner
from collectives.choose import ordered_ranks
from topo.builders import build
from validation.nccl_tests import FABRIC, SIZES, datasets


def main() -> int:
    print(f"{'table':>14} {'size':>8} {'measured us':>12} {'oop/ip':>7} "
          f"{'NCCL pick':>24} {'predicted us':>13}")
    for d in datasets():
        nodes = d["nodes"]
        if nodes == 1:
            continue
        t = build("two_tier", dict(FABRIC, nodes=nodes))
        v = nccl_tuner.view(t, ordered_ranks(t))
        n = 8 * nodes
        for s in SIZES:
            oop, ip = d["rows"][s]  # bus bandwidths, GB/s
            measured = s / (max(oop, ip) / (2 * (n - 1) / n)) / 1e3
            algo, proto, us = nccl_tuner.pick(v, s)
            size = f"{s >> 20} MiB" if s < 1 << 30 else f"{s >> 30} GiB"
            print(f"{d['name']:>14} {size:>8} {measured:12.1f} {ip / oop:7.2f} "
                  f"{algo + '/' + proto:>24} {us:13.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
