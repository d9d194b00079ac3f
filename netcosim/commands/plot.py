"""`netcosim plot DIR`: draw the plots of a sweep or fault-study directory (PNG and SVG)."""
from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("plot", help="plot a sweep or fault-study result directory",
                       description="Read DIR/sweep.csv (written by netcosim sweep or netcosim "
                                   "faults) and write line plots, heat maps, slowdown curves, "
                                   "CDFs and costliest-link bars as PNG and SVG into DIR.")
    p.add_argument("dir", metavar="DIR", help="directory written by netcosim sweep/faults")
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    from topo.errors import InputError

    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise InputError("plot: needs matplotlib (pip install 'netcosim[plot]')") from None
    if not Path(args.dir).is_dir():
        raise InputError(f"plot {args.dir!r}: not a directory")
    from netcosim import outpaths, plots

    outpaths.check_dir(args.dir, f"plot {args.dir!r}")  # the plots are written into it
    try:
        paths = plots.plot_dir(args.dir)
    except OSError as e:
        raise outpaths.OutputError(f"plot {args.dir!r}: cannot write the plots "
                                   f"({e.strerror or type(e).__name__})") from None
    if not paths:
        print(f"{args.dir}: nothing to plot (no finished rows with a numeric swept parameter)")
    for p in paths:
        print(p)
    return 0
