"""`netcosim sweep FILE --out DIR`: run every point of a sweep file into one table."""
from __future__ import annotations

import sys


def add_backend_arguments(p) -> None:
    """Where points run; shared with `netcosim faults`."""
    g = p.add_argument_group("where it runs")
    g.add_argument("--jobs", "-j", type=int, default=None, metavar="N",
                   help="local worker processes (default: one per core; 1 = in this process)")
    g.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run on the Dask cluster whose scheduler is at ADDRESS "
                        "(tcp://host:8786)")
    g.add_argument("--dask-local", type=int, default=None, metavar="N",
                   help="start a local Dask cluster of N worker processes and run on it")
    g.add_argument("--batch-size", type=int, default=None, metavar="N",
                   help="points per task (default: chosen from the sweep size)")
    g.add_argument("--resume", action="store_true",
                   help="skip points already in DIR's journal (rows.jsonl) from an earlier run")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")


def backend_from_args(args):
    from netcosim.sweep import Backend

    return Backend(jobs=args.jobs, scheduler=args.scheduler, dask_local=args.dask_local,
                   batch_size=args.batch_size,
                   progress=not args.no_progress and sys.stderr.isatty())


def register(sub) -> None:
    p = sub.add_parser("sweep", help="run a parameter sweep into one table",
                       description="Run every point of FILE (a scenario plus a [sweep] table of "
                                   "dotted scenario paths -> lists or ranges) and write "
                                   "DIR/sweep.csv (and sweep.parquet with pyarrow): swept "
                                   "parameters and results as columns, each row's scenario "
                                   "as JSON. See docs/sweeps.md.")
    p.add_argument("file", metavar="FILE", help="sweep file (.toml or .json)")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="output directory (default: out/<scenario name>-sweep)")
    p.add_argument("--dry-run", action="store_true",
                   help="count the points, check them (a sample of each block beyond "
                        "2,000 points), print a summary, run nothing")
    p.add_argument("--plot", action="store_true", help="also draw the plots (netcosim plot)")
    add_backend_arguments(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from netcosim import outputs
    from netcosim.sweep import PointSet, load_sweep, run_points

    spec = load_sweep(args.file)
    if args.dry_run:
        return dry_run(spec)
    # made on demand while checking, running and writing the table: a sweep of a million
    # points starts checking at once instead of first building a million scenario tables
    points = PointSet(spec)
    backend = backend_from_args(args)
    name = outputs.table_name(spec.base, args.file)
    out = outputs.command_out_dir(args.out, name, "-sweep")
    from netcosim import outpaths
    from netcosim.sweep import table
    from netcosim.sweep.run import META_NAME

    label = outputs.out_label(args.out, out)
    outpaths.check_dir(out, label, (table.CSV_NAME, table.JOURNAL, META_NAME), (args.file,))
    if args.plot:
        check_plot_deps()
    try:
        outcome = run_points(points, out, backend, resume=args.resume, params=spec.columns,
                             meta={"kind": "sweep", "source": spec.source, "name": name,
                                   "plots": spec.plots})
    except OSError as e:  # the table or journal could not be written (disk full, ...)
        raise outpaths.OutputError(f"{label}: cannot write the results "
                                   f"({e.strerror or type(e).__name__})") from None
    info = outcome.info
    extra = "".join(f", {info[k]} {k}" for k in ("errors", "infeasible") if info[k])
    resumed = f" ({outcome.skipped} resumed)" if outcome.skipped else ""
    print(f"{info['finished']} of {info['points']} points{resumed}{extra} in "
          f"{outcome.wall_s:.1f} s on {info['workers']} {info['backend']} workers -> "
          f"{out / 'sweep.csv'}")
    return finish(out, args.plot and info["finished"] > 0, outcome.interrupted)


# a dry run checks every point up to this many; beyond it, a summary and a sample of points
DRY_RUN_FULL = 2_000
DRY_RUN_SAMPLE = 50  # points checked per block of a larger sweep


def dry_run(spec) -> int:
    """Count the points from the axes, check them all (up to DRY_RUN_FULL) or a sample, and
    print a summary; nothing runs and nothing is written."""
    from netcosim.sweep.points import Checker, count_points, expand, sample_points
    from topo.errors import InputError

    total = count_points(spec)  # refuses a sweep beyond the limit at once, with the count
    full = total <= DRY_RUN_FULL
    points = expand(spec) if full else sample_points(spec, DRY_RUN_SAMPLE)
    checker = Checker()
    for p in points:
        try:
            checker.check(p.data)
        except InputError as e:
            if type(e).__name__ != "MemoryInfeasible":
                raise InputError(f"{p.where}: {e}") from None
    if full:
        print(f"{total} points, columns {', '.join(spec.columns)}: all pass the check")
        return 0
    print(f"{total:,} points, columns {', '.join(spec.columns)}: {len(points)} checked (the "
          f"first, the last and evenly spaced ones of each block; every point is checked "
          f"before a run starts) and pass")
    for b in spec.blocks:
        axes = ", ".join(f"{a.column}: {len(a.values):,} values "
                         f"({_short(a.values[0])} .. {_short(a.values[-1])})" for a in b.axes)
        print(f"  {b.where}: {b.mode}, {axes}")
    return 0


def _short(v) -> str:
    t = str(v)
    return t if len(t) <= 40 else t[:37] + "..."


def check_plot_deps() -> None:
    """--plot needs matplotlib: say so before the run, not after it."""
    from topo.errors import InputError

    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise InputError("--plot needs matplotlib (pip install 'netcosim[plot]')") from None


def finish(out, plot: bool, interrupted: bool) -> int:
    """The end of a sweep-like command (sweep, faults): plots on request, and exit status
    130 with a hint when Ctrl-C stopped the run (its finished rows are kept)."""
    if plot:
        from netcosim import plots
        from netcosim.outpaths import OutputError

        try:
            paths = plots.plot_dir(out)
        except OSError as e:
            raise OutputError(f"--plot: cannot write the plots into {str(out)!r} "
                              f"({e.strerror or type(e).__name__})") from None
        for path in paths:
            print(f"  {path}")
    if interrupted:
        print("netcosim: interrupted; the finished rows are kept (rerun with --resume)",
              file=sys.stderr)
        return 130
    return 0
