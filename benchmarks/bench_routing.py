"""Routing speed and memory on a big fat-tree (figures go to docs/routing.md, never asserted).

    python benchmarks/bench_routing.py            # fat_tree(k=32): 8,192 hosts, 9,472 nodes
    python benchmarks/bench_routing.py --k 16     # quicker

Phases, each timed on one core: build the fabric; build the full ecmp routing table (distance
rows to every host, cached in the Routing object); paths for a random permutation; paths for
a sample of all-to-all pairs; paths for ring traffic (neighbour pairs) at 2 million flows;
spray paths for a permutation. Peak RSS is the process high-water mark after each phase.
"""
import argparse
import resource
import time

import numpy as np

from topo.routing import Routing

try:
    from topo.builders import fat_tree as _ft

    fat_tree = _ft if callable(_ft) else _ft.fat_tree
except ImportError:  # pragma: no cover
    raise SystemExit("topo.builders.fat_tree is needed")


def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def timed(label, fn):
    """Run fn; print wall and CPU seconds (CPU time is what to compare on a busy machine)."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"{label:<48s} wall {dt:7.3f} s  cpu {cpu:7.3f} s  peak RSS {peak_mb():6.0f} MB",
          flush=True)
    return out, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=32)
    ap.add_argument("--sample", type=int, default=1_000_000, help="all-to-all pairs sampled")
    ap.add_argument("--ring", type=int, default=2_000_000, help="ring-traffic flows")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)

    t, _ = timed(f"fat_tree(k={a.k}) build", lambda: fat_tree(a.k))
    nh = t.n_hosts
    print(f"  {nh} hosts, {t.n_switches} switches, {t.n_dlinks} directed links")
    r = Routing(t, "ecmp", seed=a.seed)
    timed(f"ecmp full table ({nh} destinations)", r.prepare)
    print(f"  cached rows: {r.cache_nbytes / 2**20:.0f} MiB")

    src = np.arange(nh)
    dst = rng.permutation(nh)
    p, dt = timed(f"ecmp paths, permutation ({nh} flows)", lambda: r.paths(src, dst))
    print(f"  {nh / dt:,.0f} flows/s, mean hops {p.hops.mean():.2f}")

    s = rng.integers(0, nh, a.sample)
    d = (s + rng.integers(1, nh, a.sample)) % nh  # uniform over pairs with s != d
    p, dt = timed(f"ecmp paths, all-to-all sample ({a.sample:,} flows)", lambda: r.paths(s, d))
    print(f"  {a.sample / dt:,.0f} flows/s, mean hops {p.hops.mean():.2f}")

    s = np.arange(a.ring) % nh
    d = (s + 1) % nh
    fid = np.arange(a.ring)
    p, dt = timed(f"ecmp paths, ring ({a.ring:,} flows)", lambda: r.paths(s, d, flow_id=fid))
    print(f"  {a.ring / dt:,.0f} flows/s, {len(p.link):,} links")

    rs = Routing(t, "spray", seed=a.seed)
    r.cache_clear()
    p, dt = timed(f"spray paths, permutation ({nh} flows, cold)", lambda: rs.paths(src, dst))
    print(f"  {nh / dt:,.0f} flows/s, {len(p.link) / nh:.0f} DAG links per flow")

    cold = Routing(t, "ecmp", seed=a.seed)
    alive = np.ones(t.n_dlinks, bool)
    alive[rng.choice(t.n_dlinks, t.n_dlinks // 100, replace=False)] = False
    timed("ecmp paths, permutation, 1% links down (cold)",
          lambda: cold.paths(src, dst, alive=alive))


if __name__ == "__main__":
    main()
