"""Plot wall time and peak memory against GPUs from saved `bench_scale.py` outputs.

    python benchmarks/bench_scale.py gpt3 > gpt3_two_tier.txt   # (and other cases)
    python benchmarks/plot_scale.py docs/scale.png gpt3_two_tier.txt fullflat.txt ...

Each input file is one run of bench_scale.py (its printed table); its first line names the
case, which becomes the curve's label.
"""
from __future__ import annotations

import sys
from pathlib import Path


def read(path: Path):
    lines = path.read_text().splitlines()
    label = lines[0].lstrip("# ").split(";")[0]
    pts = []
    for ln in lines[2:]:
        f = ln.split()
        if len(f) >= 3 and f[0].isdigit() and "ok" in ln:
            pts.append((int(f[0]), float(f[1]), float(f[2])))
    return label, pts


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2:
        print(__doc__)
        return 2
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for p in argv[1:]:
        label, pts = read(Path(p))
        if not pts:
            continue
        n, w, m = zip(*pts)
        a.plot(n, w, "o-", label=label)
        b.plot(n, m, "o-", label=label)
    lo, hi = 1000, 110000
    a.plot([lo, hi], [1.0, hi / lo], "k:", lw=0.8, label="linear (reference slope)")
    for ax, what in ((a, "wall time of `netcosim run` (s)"), (b, "peak memory (GB)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("GPUs (hosts)")
        ax.set_ylabel(what)
        ax.grid(True, which="both", alpha=0.3)
    a.legend(fontsize=7)
    fig.suptitle("network_detail = \"auto\", one core")
    fig.tight_layout()
    fig.savefig(argv[0], dpi=110)
    print(f"-> {argv[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
