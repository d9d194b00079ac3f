"""`netcosim faults SCENARIO`: slowdown under random link failures, and the costliest links."""
from __future__ import annotations

import sys

from netcosim.cli import add_scenario_arguments
from netcosim.commands.sweep import add_backend_arguments, backend_from_args, finish


def register(sub) -> None:
    p = sub.add_parser("faults", help="link-failure sensitivity of a scenario",
                       description="Run SCENARIO under seeded random link failures and report "
                                   "the slowdown distribution per failure fraction (median, "
                                   "p90, p99, worst, stranded runs), and rank the links whose "
                                   "single failure costs most. SCENARIO may hold a "
                                   "[faults_study] table with these options (the command line "
                                   "wins) and [[faults_study.case]] variants, each run as its "
                                   "own study. See docs/sweeps.md.")
    add_scenario_arguments(p)
    p.add_argument("--out", metavar="DIR", default=None,
                   help="output directory (default: out/<scenario name>-faults)")
    p.add_argument("--fraction", default=None, metavar="F",
                   help="fractions of the layer's links that fail: 0.01, 0.001,0.01,0.05, "
                        "0.001..0.05 (6 log-spaced values), 0.001..0.05 n8 or 0.01..0.05 +0.01 "
                        "(default 0.001..0.05)")
    p.add_argument("--kind", default=None, metavar="KIND",
                   help="down, or degrade:F to run at F of the bandwidth (default down); "
                        "training steps: gpu_slow:F (GPUs at F of their FLOP/s) or "
                        "hbm_degrade:F (at F of their HBM bandwidth), sampled over the GPUs")
    p.add_argument("--layer", default=None, metavar="LAYER",
                   help="links to fail: any, or a layer of the fabric (fat_tree: edge, "
                        "aggregation, core)")
    p.add_argument("--trials", type=int, default=None, metavar="N",
                   help="random fault sets per fraction (default 100)")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--at-us", type=float, default=None, metavar="T",
                      help="faults strike at T microseconds (default: from the start)")
    when.add_argument("--at-fraction", type=float, default=None, metavar="F",
                      help="faults strike at F times the fault-free makespan")
    p.add_argument("--recover-after-us", type=float, default=None, metavar="D",
                   help="the failed links come back D microseconds after they strike (a "
                        "flap); default: they stay down")
    p.add_argument("--no-single", action="store_true",
                   help="skip the single-link ranking")
    p.add_argument("--max-single", type=int, default=None, metavar="N",
                   help="fail every link of the layer alone when it has at most N links, "
                        "else a sample (default 256)")
    p.add_argument("--single-samples", type=int, default=None, metavar="N",
                   help="links sampled for the ranking on larger layers (default 64)")
    p.add_argument("--plot", action="store_true", help="also draw the plots (netcosim plot)")
    add_backend_arguments(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from netcosim import outputs
    from netcosim.faults_study import run_study
    from netcosim.scenario import apply_override, parse_override, read_file

    data = read_file(args.scenario)
    for text in args.overrides:
        keys, value = parse_override(text)
        apply_override(data, keys, value, text)
    name = outputs.table_name(data, args.scenario)
    out = outputs.command_out_dir(args.out, name, "-faults")
    opts = {"fraction": args.fraction, "kind": args.kind, "layer": args.layer,
            "trials": args.trials, "at_us": args.at_us, "at_fraction": args.at_fraction,
            "recover_after_us": args.recover_after_us,
            "single": False if args.no_single else None, "max_single": args.max_single,
            "single_samples": args.single_samples}
    from netcosim import outpaths
    from netcosim.commands.sweep import check_plot_deps

    label = outputs.out_label(args.out, out)
    from netcosim.faults_study import OUTPUT_NAMES
    from netcosim.sweep import table
    from netcosim.sweep.run import META_NAME

    outpaths.check_dir(out, label, (*OUTPUT_NAMES, table.CSV_NAME, table.JOURNAL, META_NAME),
                       (args.scenario,))
    if args.plot:
        check_plot_deps()
    try:
        results = run_study(data, opts, out, backend=backend_from_args(args),
                            resume=args.resume, source=args.scenario, name=name)
    except OSError as e:  # a table could not be written (disk full, ...)
        raise outpaths.OutputError(f"{label}: cannot write the results "
                                   f"({e.strerror or type(e).__name__})") from None
    for res in results:
        _print(res, name)
    print(f"-> {out}")
    return finish(out, args.plot, any(r["outcome"].interrupted for r in results))


def _print(res, name) -> None:
    base = res["baseline"]["makespan_us"]
    case = f" [{res['case']}]" if res["case"] else ""
    back = res.get("recover_after_us")
    back = f", back {back:.6g} us later" if back is not None else ""
    print(f"{name}{case}: fault-free makespan {base:.6g} us; {res['kind']} faults at "
          f"{res['at_us']:.6g} us{back}")
    for mode, us in res.get("tp_baselines", {}).items():
        print(f"{res['tp_rows'][mode]} runs priced tensor parallelism '{mode}' (a scale-up "
              f"link of a GPU of the job faulted): their slowdown is against the fault-free "
              f"step priced so, {us:.6g} us (baseline_tp_modes.json)")
    for mode, us in res.get("unfolded_baselines", {}).items():
        print(f"runs with every replica simulated (tensor parallelism '{mode}'): their "
              f"slowdown is against the fault-free step simulated so, {us:.6g} us "
              f"(baseline.json, unfolded_makespan_us)")
    if res["baseline"].get("symmetry_uneven_sends"):
        from netcosim.workload_kinds.training import symmetry_warning

        print(f"warning: {symmetry_warning(res['baseline']['symmetry_uneven_sends'])}; a trial "
              f"that simulates faulted replicas on their own folds fewer, so its slowdown "
              f"can read below 1", file=sys.stderr)
    t = res.get("tcp_timers")
    if t:
        syn = (f", initial RTO {t['init_rto_s'] * 1e3:.6g} ms, SYN timeout "
               f"{t['conn_timeout_s'] * 1e3:.6g} ms" if "init_rto_s" in t else "")
        print(f"TCP timers '{t['preset']}': minimum RTO {t['min_rto_s'] * 1e3:.6g} ms{syn} "
              f"(engine.tcp_timers; the recovery timers can decide a lossy or cut-off run's "
              f"time)")
    gpu = any("failed_gpus" in r for r in res["summary"])
    print(f"{'fraction':>9} {'gpus' if gpu else 'links':>6} {'runs':>5} {'stranded':>8} "
          f"{'median':>8} {'p90':>8} {'p99':>8} {'worst':>8}")
    for r in res["summary"]:
        vals = "".join(f" {r[k]:8.4f}" if k in r else f" {'-':>8}"
                       for k in ("median", "p90", "p99", "worst"))
        print(f"{r['fraction']:9.4g} {r['failed_gpus' if gpu else 'failed_links']:6d} "
              f"{r['trials']:5d} {r['stranded_runs']:8d}{vals}")
    top = res["costliest"][:5]
    if top and "gpu" in top[0]:
        print("costliest single GPUs (host): " + "; ".join(
            f"{c['gpu']} x{c['slowdown']:.4f}" if c["slowdown"] is not None else f"{c['gpu']} -"
            for c in top))
    elif top:
        print("costliest single links: " + "; ".join(
            f"{c['u']}-{c['v']} ({c['layer']}) " +
            ("strands" if c["stranded"] else f"x{c['slowdown']:.4f}") for c in top))
