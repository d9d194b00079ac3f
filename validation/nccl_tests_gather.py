"""netcosim collective's all-gather against a published nccl-tests all_gather_perf table.

The one multi-node all-gather table found (validation/nccl_tests_data/all_gather/: 4 nodes of
8 H100 with 8 x 400 Gb/s, NCCL 2.24.3, the third cluster of validation.nccl_tests) against
`netcosim collective --op all_gather --algo auto` on the same two_tier fabric as the
all-reduce comparison (validation.nccl_tests.FABRIC: no figure is calibrated here, every
point is a validation point). On whole nodes the algorithm is the rail ring and the protocol
the one NCCL's tuner formula picks (collectives/nccl_tuner.py). Writes
validation/results/nccl_tests_all_gather.md. The issue's targets (10% from 64 MiB, 25%
below) are the all-reduce's; the same bands are reported here.

    python -m validation.nccl_tests_gather    # about 5 s
"""
from __future__ import annotations

import argparse
from pathlib import Path

from validation.nccl_tests import (DATA, FABRIC, LARGE, RESULTS, SIZES, TARGET_LARGE,
                                   TARGET_SMALL, _size, cli_topo, load)

OP = "all_gather"


def compare(engine: str = "flow") -> list[dict]:
    from netcosim.commands.collective import sweep
    from topo.builders import build

    out = []
    for path in sorted((DATA / OP).glob("*.txt")):
        d = load(path)
        topology = build("two_tier", dict(FABRIC, nodes=d["nodes"]))
        got = {r["bytes"]: r for r in sweep(topology, OP, "auto", SIZES, engine=engine)}
        for size in SIZES:
            meas = max(d["rows"][size])
            r = got[size]
            err = r["busbw_GBps"] / meas - 1
            target = TARGET_LARGE if size >= LARGE else TARGET_SMALL
            out.append({"dataset": d["name"], "nodes": d["nodes"], "bytes": size,
                        "measured": meas, "model": r["busbw_GBps"], "error": err,
                        "within": abs(err) <= target, "large": size >= LARGE,
                        "choice": f"{r['algorithm']}/{r['protocol']}", "source": d["source"]})
    return out


def write(rows: list[dict], path: Path) -> None:
    big = [r for r in rows if r["large"]]
    small = [r for r in rows if not r["large"]]
    lines = ["# netcosim collective against published nccl-tests (all_gather_perf, H100)", "",
             f"`python -m validation.nccl_tests_gather`: `netcosim collective --topo "
             f"{cli_topo('N')} --op all_gather --sizes 1MiB..8GiB --engine flow` against "
             "the table of `validation/nccl_tests_data/all_gather/`. busbw in GB/s; error = "
             "model / measured - 1; measured = the better of out-of-place and in-place. "
             "Nothing is calibrated on these points.", "",
             f"From 64 MiB: {sum(r['within'] for r in big)} of {len(big)} within 10%; below: "
             f"{sum(r['within'] for r in small)} of {len(small)} within 25%.", ""]
    for name in dict.fromkeys(r["dataset"] for r in rows):
        rs = [r for r in rows if r["dataset"] == name]
        lines += [f"## {name} ({rs[0]['nodes']} nodes x 8 H100)", "",
                  f"Source: {rs[0]['source']}", "",
                  "| size | measured | model | error | within | model's algorithm/protocol |",
                  "|---:|---:|---:|---:|:---:|---|"]
        lines += [f"| {_size(r['bytes'])} | {r['measured']:.1f} | {r['model']:.1f} | "
                  f"{100 * r['error']:+.1f}% | {'yes' if r['within'] else '**no**'} | "
                  f"{r['choice']} |" for r in rs]
        lines.append("")
    path.write_text("\n".join(lines))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--engine", default="flow", choices=("flow", "analytical", "packet"))
    args = ap.parse_args(argv)
    rows = compare(args.engine)
    RESULTS.mkdir(exist_ok=True)
    write(rows, RESULTS / f"nccl_tests_{OP}.md")
    for r in rows:
        print(f"{r['dataset']:>14} {_size(r['bytes']):>7} {r['measured']:8.1f} "
              f"{r['model']:8.1f} {100 * r['error']:+7.1f}% "
              f"{'ok' if r['within'] else 'MISS':>4}  {r['choice']}")
    big = [r for r in rows if r["large"]]
    small = [r for r in rows if not r["large"]]
    print(f"from 64 MiB: {sum(r['within'] for r in big)}/{len(big)} within 10%; below: "
          f"{sum(r['within'] for r in small)}/{len(small)} within 25%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
