"""Parameter sweeps: a scenario plus a [sweep] table -> one tidy table of results.

``load_sweep(path)`` parses the file (netcosim.sweep.spec), ``expand(spec)`` makes the points
(netcosim.sweep.points; ``PointSet(spec)`` makes them on demand), ``run_points(points, out_dir, Backend(...))`` checks and runs them
(netcosim.sweep.run) and ``run_sweep`` does all three. docs/sweeps.md is the user guide.
"""
from netcosim.sweep.execute import Backend
from netcosim.sweep.points import Point, PointSet, expand
from netcosim.sweep.run import Outcome, run_points
from netcosim.sweep.spec import SweepSpec, load_sweep, parse_sweep


def run_sweep(spec: SweepSpec, out_dir, backend: Backend | None = None,
              resume: bool = False) -> Outcome:
    points = PointSet(spec)  # made on demand: a million points are never held at once
    return run_points(points, out_dir, backend, resume, params=spec.columns,
                      meta={"kind": "sweep", "source": spec.source,
                            "name": spec.base.get("name"), "plots": spec.plots})


__all__ = ["Backend", "Outcome", "Point", "PointSet", "SweepSpec", "expand", "load_sweep", "parse_sweep",
           "run_points", "run_sweep"]
