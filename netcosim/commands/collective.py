"""`netcosim collective`: an NCCL-tests-style size sweep of one collective on one fabric.

    netcosim collective --topo fat_tree:k=8 --op all_reduce --algo ring --sizes 1KiB..8GiB
        [--engine analytical|flow|packet] [--ranks 0..63] [--chunks C]
        [--protocol auto|ll|ll128|simple] [--csv F] [--plot F.png]

``--topo kind:key=value,key=value`` goes to ``topo.builders.build(kind, params)``; values are
ints, floats, true/false, or lists written with ``x`` (``torus:dims=4x4x4``). ``--algo auto``
asks ``collectives.choose``; ``--protocol auto`` (default) takes the protocol of least estimate
per size, as NCCL's tuner (collectives/protocols.py). The default engine is the alpha-beta
estimate (instant); the flow engine simulates every transfer with max-min fair sharing.
"""
from __future__ import annotations

import csv
import re

import numpy as np

from topo.errors import InputError
from topo.innet import FIELD as REDUCE_FIELD, NoReduction


def register(sub) -> None:
    p = sub.add_parser("collective", help="size sweep of one collective (size, time, algbw, busbw)")
    p.add_argument("--topo", required=True, metavar="KIND:K=V,...",
                   help="fabric, e.g. fat_tree:k=8 or torus:dims=4x4,link_gbps=400")
    p.add_argument("--op", required=True, help="all_reduce, all_to_all, reduce_scatter, "
                   "all_gather, broadcast, reduce, send_recv")
    p.add_argument("--algo", default="auto", help="algorithm name, or auto (collectives.choose)")
    p.add_argument("--sizes", default="1KiB..1GiB", help="sizes: 1KiB..8GiB (x2 steps), "
                   "'1MiB..1GiB x4', or a comma list")
    p.add_argument("--engine", default="analytical", choices=("analytical", "flow", "packet"))
    p.add_argument("--routing", default="ecmp", help="routing policy for the engines")
    p.add_argument("--ranks", default=None, help="hosts taking part: 'a..b' or a comma list "
                   "(default: all hosts)")
    p.add_argument("--chunks", type=int, default=None,
                   help="pipelined chunks (default: the protocol's chunk size for trees, "
                        "chains and in-network algorithms, 1 for rings)")
    p.add_argument("--protocol", default="auto",
                   help="NCCL protocol: ll, ll128, simple, or auto (least estimate per size)")
    p.add_argument("--step-latency-us", type=float, default=None,
                   help="a fixed per-step latency (us) instead of the protocol's per-step "
                        "and launch latencies")
    p.add_argument("--group-size", type=int, default=None, help="ranks per group (hierarchical)")
    p.add_argument("--csv", default=None, metavar="FILE", help="also write the table as CSV")
    p.add_argument("--plot", default=None, metavar="FILE.png", help="plot busbw against size")
    p.set_defaults(func=run)


def parse_topo_spec(spec: str) -> tuple[str, dict]:
    """'fat_tree:k=8,link_gbps=400' -> ('fat_tree', {'k': 8, 'link_gbps': 400})."""
    if not isinstance(spec, str) or not spec.strip():
        raise InputError(f"--topo = {spec!r}: expected kind:key=value,... e.g. fat_tree:k=8")
    kind, _, rest = spec.strip().partition(":")
    params = {}
    for item in filter(None, (x.strip() for x in rest.split(","))):
        key, eq, val = item.partition("=")
        if not eq or not key.strip():
            raise InputError(f"--topo = {spec!r}: {item!r} is not key=value")
        if key.strip() in params:
            raise InputError(f"--topo = {spec!r}: {key.strip()!r} is given twice")
        params[key.strip()] = _value(val.strip())
    return kind.strip(), params


def _value(v: str):
    if v.lower() in ("true", "false"):
        return v.lower() == "true"
    if "x" in v and all(p.strip().isdigit() for p in v.split("x")):
        return [int(p) for p in v.split("x")]
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    return v


def _parse_ranks(text, n_hosts):
    if text is None:
        return None
    try:
        if ".." in text:
            a, b = (int(x) for x in text.split(".."))
            ids = [a, b]
        else:
            ids = [int(x) for x in text.split(",")]
    except ValueError:
        raise InputError(f"--ranks = {text!r}: expected 'a..b' or a comma list of host ids") \
            from None
    # checked before a range is expanded: '0..10**20' must not build a list first
    bad = [h for h in ids if not 0 <= h < n_hosts]
    if bad:
        raise InputError(f"--ranks = {text!r}: host {bad[0]} does not exist (the fabric has "
                         f"hosts 0..{n_hosts - 1})")
    if ".." in text and ids[1] < ids[0]:
        raise InputError(f"--ranks = {text!r}: the range is empty (end < start)")
    return list(range(ids[0], ids[1] + 1)) if ".." in text else ids


def sweep(topology, op, algo, sizes, engine="analytical", ranks=None, chunks=None,
          step_latency_s=None, group_size=None, routing="ecmp", protocol="auto") -> list[dict]:
    from collectives import protocols
    from collectives.analytical import Fabric, TooManyPairs

    from topo.routing import Routing

    if op == "all_to_all_v":
        raise InputError("--op = 'all_to_all_v': a size sweep has one size per point, but "
                         "all_to_all_v needs a byte matrix per rank pair; use all_to_all here, "
                         "or a scenario with workload.bytes_matrix")
    if group_size is not None and (isinstance(group_size, bool) or not isinstance(group_size, int)
                                   or group_size < 1):
        raise InputError(f"--group-size = {group_size!r}: expected an integer >= 1")
    if chunks is not None and (isinstance(chunks, bool) or not isinstance(chunks, int)
                               or chunks < 1):
        raise InputError(f"--chunks = {chunks!r}: expected an integer >= 1")
    if step_latency_s is not None and not step_latency_s >= 0:
        raise InputError(f"--step-latency-us = {step_latency_s * 1e6!r}: expected >= 0")
    protocol = protocols.resolve(protocol, "--protocol")
    # the routing is checked for every engine; the analytical estimate takes its paths
    # (latency and bottleneck per rank pair) from it too
    try:
        router = Routing(topology, routing)
    except InputError as e:
        raise InputError(f"--routing = {routing!r}: {str(e).split(': ', 1)[-1]}") from None
    fab = None
    if engine == "analytical":
        fab = Fabric.cached(topology, routing)
        fab.routing = router
    rows = []
    for s in sizes:
        try:
            rows.append(_point(topology, op, algo, s, engine, ranks, chunks, step_latency_s,
                               group_size, routing, protocol, fab, router))
        except TooManyPairs as e:
            raise _unpriced(e, engine, algo, protocol, topology, ranks, group_size,
                            chunks) from None
    return rows


def _unpriced(e, engine: str, algo: str, protocol: str, topology, ranks, group_size,
              chunks) -> InputError:
    """The analytical estimate's refusal of an all-pairs collective, named by the flag that
    asked for the estimate: it said "--algo = 'direct'" (or 'hierarchical') where no --algo
    was given, and offered "a ring/tree algorithm" to an all-to-all, which has none."""
    import collectives as co
    from collectives import protocols
    from netcosim.collective_remedies import estimate_refused, fabric_group

    if engine == "analytical":
        lead = "--engine analytical (the default):"
    elif algo == "auto":
        lead = "--algo auto: the algorithm is chosen by the analytical estimate, and"
    else:
        lead = "--protocol auto: the protocol is chosen by the analytical estimate, and"
    given = None if algo == "auto" else co.resolve(e.op, algo)[1]  # "shift": pairwise
    return estimate_refused(e, lead, f"--engine {engine}", algorithm=given,
                            protocol_given=protocol != protocols.AUTO, engine=engine,
                            group=group_size or fabric_group(topology, ranks),
                            chunks=chunks or 1)


def _point(topology, op, algo, s, engine, ranks, chunks, step_latency_s, group_size, routing,
           protocol, fab, router) -> dict:
    """One size of the sweep."""
    import collectives as co
    from collectives import protocols
    from collectives.analytical import Fabric
    from collectives.choose import ordered_ranks, torus_ring_order
    from collectives.report import run as run_one

    if algo == "auto":
        ch = co.choose(topology, op, s, ranks, protocol=protocol)
        algorithm, r, opts = ch.algorithm, ch.ranks, dict(ch.options)
    else:
        _, algorithm = co.resolve(op, algo)
        r = ordered_ranks(topology, ranks)
        # all hosts of a torus: rings, chains and trees on a cycle of one-hop neighbours,
        # as the automatic choice lays them (the torus algorithm keeps row-major order)
        snake = torus_ring_order(topology) if ranks is None and algorithm != "torus" \
            else None
        if snake is not None:
            r = snake
        opts = {}
        if algorithm in ("hierarchical", "nvls_tree"):
            opts["group_size"] = (group_size if group_size is not None
                                  else int(np.bincount(topology.host_group[r]).max()))
        if algorithm == "torus":
            opts["dims"] = tuple(topology.params.get("dims", ()))
    if chunks is not None:
        opts["chunks"] = chunks
    if step_latency_s is not None:
        opts["step_latency_s"] = step_latency_s
    p = protocols.check_for(algorithm, opts.get("protocol", protocol), "--protocol")
    if p == protocols.AUTO or (algo == "auto" and chunks is not None):
        rest = {k: v for k, v in opts.items() if k != "protocol"}
        p = protocols.best(topology, op, algorithm, r, s,
                           fabric=fab or Fabric.cached(topology, routing), **rest)[0]
    opts["protocol"] = p
    if engine == "analytical":
        row = run_one(topology, op, algorithm, r, s, engine=engine, routing=routing,
                      fabric=fab, **opts)
    else:
        row = _simulated(topology, op, algorithm, r, s, engine, router, opts)
    row["protocol"] = p
    return row


class SizeRefused(InputError):
    """A size of the sweep the packet engine cannot number (segments per transfer, events per
    run): ``run`` names --sizes as the user wrote it, which ``sweep`` never sees."""


def _simulated(topology, op, algorithm, ranks, nbytes, engine, routing, opts) -> dict:
    """One point on the flow or packet engine; a size beyond the packet engine's numbering is
    a SizeRefused naming the size, not the schedule node the engine found it in."""
    from netcore.packet.limits import PacketLimit

    try:
        return _simulated_point(topology, op, algorithm, ranks, nbytes, engine, routing, opts)
    except PacketLimit as e:
        if e.what in ("clock", "start", "duration"):
            # the core's advice is engine.max_time_s, a scenario key this command has not;
            # the flow engine refuses a step (a stream's step latencies, summed) past the same
            # end, and its 'node 0' means nothing here
            from netcore.packet.limits import TIME_LIMIT_TEXT

            raise InputError(f"--engine = '{engine}': size {nbytes} bytes: the {algorithm} "
                             f"{op} over {len(ranks)} ranks does not fit within the {engine} "
                             f"engine's clock, which ends at {TIME_LIMIT_TEXT}; use --engine "
                             f"analytical, which has no such end, or a shorter run (a smaller "
                             f"--sizes or --step-latency-us, faster links in --topo)") from None
        if e.what not in ("bytes", "events"):
            raise
        # "node 17: 62500000000000000 bytes are ...": node 17 means nothing on this command
        rest = re.sub(r"^node \d+: ", "", str(e))
        who = f"one transfer of the {algorithm} {op} over {len(ranks)} ranks: "
        raise SizeRefused(f"size {nbytes} bytes: {who if e.what == 'bytes' else ''}{rest}") \
            from None


def _simulated_point(topology, op, algorithm, ranks, nbytes, engine, routing, opts) -> dict:
    """One point on the flow or packet engine, in the form `netcosim run` would use: on the
    flow engine a ring all-reduce, reduce-scatter or all-gather runs as one stream
    (network_detail = "auto", docs/scale.md); any other schedule is built transfer by transfer
    only after the memory guard has checked it fits. Before, every point was built in full:
    a ring over 16,000 ranks (512 M transfers) died of MemoryError or was killed."""
    import collectives as co
    from collectives.report import figures, run as run_one, undelivered
    from netcore.api import simulate
    from netcosim.workloads import _collective_scalable

    from topo.routing import Routing

    spec = {"network_detail": "auto" if engine == "flow" else "full"}
    r = [int(x) for x in co._plan.check_ranks(ranks)]
    where = f"--engine {engine}"
    # one Routing (a policy name, or sweep's, shared by its sizes) for the stream form's
    # shared-link check and the run: its distance rows are kept
    router = Routing(topology, routing) if isinstance(routing, str) else routing
    try:
        sched = _collective_scalable(co, spec, op, algorithm, r, nbytes, dict(opts), where,
                                     topology, router)
    except InputError as e:
        raise _as_flags(e, where) from None
    if sched is None:  # the full schedule fits
        return run_one(topology, op, algorithm, ranks, nbytes, engine=engine, routing=router,
                       **opts)
    res = simulate(topology, sched, routing=router, engine=engine)
    if res.n_stranded:
        raise InputError(undelivered(res))
    return {**figures(op, len(r), nbytes, res.makespan), "engine": engine, "op": op,
            "algorithm": algorithm, "protocol": opts.get("protocol")}


# the scenario fields the library's messages name, as this command's flags
_FLAGS = {"chunks": "--chunks", "protocol": "--protocol", "algorithm": "--algo", "op": "--op"}


def _as_flags(e: InputError, where: str) -> InputError:
    """``where.chunks = ...`` (a [workload] field of `netcosim run`) as ``--chunks = ...``:
    this command has no such field, only the flag (it said "--engine flow.chunks")."""
    msg = str(e)
    for field, flag in _FLAGS.items():
        if msg.startswith(f"{where}.{field} = "):
            return InputError(flag + msg[len(where) + 1 + len(field):])
    return e


def _image_types() -> set:
    """File extensions matplotlib can save (png, svg, pdf, ...)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        raise InputError("--plot needs matplotlib (pip install -e '.[plot]')") from None
    return set(FigureCanvasBase.get_supported_filetypes())


def run(args) -> int:
    from collectives.report import table
    from netcosim import outpaths
    from netcosim.units import parse_size_range
    from netcosim.workloads import step_latency_s
    from topo.builders import build

    # where the results go, checked before anything runs
    outpaths.check_distinct((args.csv, f"--csv {args.csv!r}"),
                            (args.plot, f"--plot {args.plot!r}"))
    if args.csv:
        outpaths.check_file(args.csv, f"--csv {args.csv!r}")
    if args.plot:
        outpaths.check_file(args.plot, f"--plot {args.plot!r}", _image_types())
    kind, params = parse_topo_spec(args.topo)
    topology = build(kind, params, where="--topo")
    sizes = parse_size_range(args.sizes.split(",") if "," in args.sizes else args.sizes,
                             "--sizes")
    if any(s <= 0 for s in sizes):
        raise InputError(f"--sizes = {args.sizes!r}: sizes must be > 0")
    ranks = _parse_ranks(args.ranks, topology.n_hosts)
    lat = None if args.step_latency_us is None else \
        step_latency_s(args.step_latency_us, "--step-latency-us")
    try:
        rows = sweep(topology, args.op, args.algo, sizes, args.engine, ranks, args.chunks,
                     lat, args.group_size, args.routing, args.protocol)
    except SizeRefused as e:
        raise InputError(f"--sizes = {args.sizes!r}: {e}") from None
    except NoReduction as e:  # the fabric came from --topo: say how to give it there
        raise InputError(e.for_cli("--topo", args.topo)) from None
    except InputError as e:  # the library's "op = ..." / "algorithm = ...": the flags
        msg = str(e)
        for key, flag in (("op = ", "--op = "), ("algorithm = ", "--algo = "),
                          ("protocol = ", "--protocol = "), ("chunks = ", "--chunks = "),
                          ("step_latency_s = ", "--step-latency-us (s) = "),
                          # the fabric's other reduce_gbps refusals (topo/innet.py)
                          (f"{REDUCE_FIELD}: ", f"--topo = {args.topo!r}: reduce_gbps: ")):
            if msg.startswith(key):
                msg = flag + msg[len(key):]
        raise InputError(msg) from None
    n = len(ranks) if ranks else topology.n_hosts
    algos = sorted({r["algorithm"] for r in rows})
    protos = sorted({r["protocol"] for r in rows})
    print(table(rows, f"{args.op} on {args.topo} ({n} ranks), algorithm {'/'.join(algos)}, "
                      f"protocol {'/'.join(protos)}, engine {args.engine}"))
    if any(f.sampled for f in topology.__dict__.get("_analytical_fabrics", {}).values()):
        from collectives.analytical import SAMPLE_DSTS

        print(f"# rounds with many destinations: latency and bottleneck from the messages to "
              f"{SAMPLE_DSTS} sampled hosts and evenly spaced messages (exact when they hold "
              f"the slowest kind of message, as on the builders' fabrics in fabric order; a "
              f"lower bound otherwise; collectives/analytical.py), per-host load exact")
    if args.csv:
        def write_csv(tmp):
            with open(tmp, "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["bytes", "time_us", "algbw_GBps", "busbw_GBps", "algorithm",
                            "protocol", "engine"])
                for r in rows:
                    w.writerow([r["bytes"], f"{r['time_us']:.6g}", f"{r['algbw_GBps']:.6g}",
                                f"{r['busbw_GBps']:.6g}", r["algorithm"], r["protocol"],
                                r["engine"]])

        outpaths.write_file(args.csv, f"--csv {args.csv!r}", write_csv)
    if args.plot:
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        ax.semilogx([r["bytes"] for r in rows], [r["busbw_GBps"] for r in rows], "o-", base=2)
        ax.set_xlabel("size (bytes)")
        ax.set_ylabel("busbw (GB/s)")
        ax.set_title(f"{args.op} {'/'.join(algos)} on {args.topo}")
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        try:
            outpaths.write_file(args.plot, f"--plot {args.plot!r}",
                                lambda tmp: fig.savefig(tmp, dpi=120))
        finally:
            plt.close(fig)
    return 0
