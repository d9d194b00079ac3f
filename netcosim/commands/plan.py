"""`netcosim plan SCENARIO`: the best parallel layout of a training job on the scenario's fabric.

Enumerates the layouts (compute/layouts.py), drops those that do not divide the model or do not
fit, ranks the rest by a cheap estimate, simulates the best ``--top`` of them (plus published
reference layouts) on the scenario's engine, in parallel like a sweep, and prints them ranked.
``--out DIR`` writes DIR/plan.csv and DIR/best.toml. See docs/plan.md.
"""
from __future__ import annotations

import sys

from netcosim.cli import add_scenario_arguments, load_from_args

CSV_NAME = "plan.csv"
BEST_NAME = "best.toml"


def register(sub) -> None:
    from netcosim.commands.sweep import add_backend_arguments

    p = sub.add_parser("plan", help="find the best parallel layout of a training scenario on "
                                    "its fabric",
                       description="Enumerate the parallel layouts (TP, CP, PP, VP, EP, micro-"
                                   "batch, recomputation, distributed optimizer, SP) of a "
                                   "kind = \"training\" scenario, drop those that do not fit, "
                                   "rank the rest by an estimate, simulate the most promising "
                                   "and print them ranked. Values in [workload.parallel] (or "
                                   "--set workload.parallel.tp=8) are fixed. See docs/plan.md.")
    add_scenario_arguments(p)
    p.add_argument("--out", metavar="DIR", default=None,
                   help="write DIR/plan.csv (every layout, simulated ones ranked) and "
                        "DIR/best.toml (the scenario with the best layout)")
    p.add_argument("--top", default=None, metavar="N",
                   help="layouts to simulate (default: [workload.plan] top, else 8); feasible "
                        "reference layouts are simulated as well")
    p.add_argument("--objective", default=None, metavar="NAME",
                   help="step_time (default), mfu or tokens_per_s")
    p.add_argument("--engine", choices=("flow", "packet"), default=None,
                   help="engine to use instead of the scenario's engine.kind")
    add_backend_arguments(p)
    p.set_defaults(func=run)


def _top(text):
    from topo.errors import InputError

    if text is None:
        return None
    try:
        v = int(text)
    except ValueError:
        raise InputError(f"--top = {text!r}: expected an integer >= 1") from None
    if v < 1:
        raise InputError(f"--top = {text!r}: expected an integer >= 1")
    return v


def run(args) -> int:
    from netcosim import outpaths, plan
    from netcosim.commands.sweep import backend_from_args

    top = _top(args.top)
    if args.objective is not None:
        plan.check_objective(args.objective, "--objective")
    scenario = load_from_args(args, engine=args.engine)
    spec = plan.plan_spec(scenario, top=top, objective=args.objective)
    backend = backend_from_args(args)
    if args.resume:
        from topo.errors import InputError

        raise InputError("--resume: netcosim plan keeps no journal; run it again")
    label = f"--out {args.out!r}"
    if args.out:
        outpaths.check_dir(args.out, label, (CSV_NAME, BEST_NAME), (args.scenario,))
    res = plan.search(spec, scenario, backend, progress=backend.progress)
    e = res.enum
    print(f"{scenario.name}: {res.n_gpus:,} x {res.gpu_name}, global batch "
          f"{spec.base['global_batch']:,}; {e.total:,} layouts looked at, "
          f"{len(e.candidates):,} feasible" + (f"; fixed {_fixed(spec)}" if spec.fixed else ""))
    if e.rejected:
        print("  rejected: " + e.reasons_text())
    print(f"  simulated {len(res.simulated)} ({spec.top} best-estimated shapes"
          + (" + references" if any(r.cand.reference for r in res.simulated) else "")
          + f") on the {scenario.engine_kind} engine; objective {spec.objective}")
    print(plan.format_table(res))
    for line in plan.reference_lines(res):
        print(line)
    t = res.timings
    print(f"wall {res.wall_s:.1f} s (fabric {t['fabric_s']:.1f} s, enumerate + estimate "
          f"{t['enumerate_estimate_s']:.1f} s, simulate {t['simulate_s']:.1f} s)")
    if res.best is None:
        print("netcosim: error: every simulated layout failed", file=sys.stderr)
        return 1
    b = res.best
    print(f"best: {b.cand.layout.label()}: step {b.step:.4f} s, MFU "
          f"{100 * b.summary['mfu']:.1f} %, {b.summary['tokens_per_s']:,.0f} tokens/s")
    if args.out:
        from pathlib import Path

        out = Path(args.out)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise outpaths.OutputError(f"{label}: cannot create it ({err.strerror})") from None
        outpaths.write_file(out / CSV_NAME, label,
                            lambda tmp: plan.write_csv(tmp, plan.table_rows(res)))
        header = (f"best layout found by netcosim plan for {scenario.source or scenario.name}: "
                  f"{b.cand.layout.label()}\nstep {b.step:.4f} s, MFU "
                  f"{100 * b.summary['mfu']:.1f} % ({scenario.engine_kind} engine)")
        outpaths.write_text(out / BEST_NAME, label, plan.to_toml(res.best_data(), header))
        print(f"-> {out / CSV_NAME}, {out / BEST_NAME}")
    return 0


def _fixed(spec) -> str:
    return ", ".join(f"{k} = {v!r}" for k, v in spec.fixed.items())
