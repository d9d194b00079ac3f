"""network_detail = "auto" against "full" where the full schedule fits: the table of
docs/scale.md ("Accuracy").

For each case both representations run on the flow engine; the table gives the step time (or
makespan), the relative difference, the largest relative difference of bytes on any directed
link that carries traffic, the engine flows of each and the wall time of build + simulate.

    python -m validation.scale_accuracy            # every case (about 10 minutes)
    python -m validation.scale_accuracy --quick    # the small ones
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import collectives
import topo.builders as tb
from collectives.streams import ring_stream, stream_schedule
from compute.report import summarize
from compute.training import build_step, fault_args
from netcore.api import simulate
from topo.faults import LinkFaults

GPT3 = dict(tp=8, pp=8, vp=12, sp=True, recompute="selective", dist_opt=True)
# a Mixtral-8x7B-like MoE (32 layers, 8 experts, top-2, grouped-query attention)
MOE = dict(layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, gated_mlp=True,
           experts=8, top_k=2, seq=4096, vocab=32000, name="moe-8x7b-like")


def _fabric(kind, gpus):
    if kind == "two_tier":
        return tb.two_tier(nodes=gpus // 8, gpus_per_node=8, nic_gbps=400, scaleup_gbps=7200)
    return tb.fullflat(gpus, planes=8, switch_radix=64, gpu_gbps=7200)


def _training(name, model, par, fab, faults=None):
    out = {}
    for detail in ("full", "auto"):
        t0 = time.perf_counter()
        s = build_step(model, par, "h100_sxm", fab, granularity="coarse",
                       network_detail=detail, **fault_args(fab, faults))
        r = simulate(fab, s, "ecmp", faults=faults, engine="flow")
        out[detail] = (summarize(s, r.start, r.end)["step_time_s"], r.link_bytes,
                       s.n_transfers, time.perf_counter() - t0)
    return name, out


def _collective(name, op, k, policy, nbytes=1 << 30):
    fab = tb.fat_tree(k, link_gbps=400, latency_us=0.5)
    ranks = list(range(fab.n_hosts))
    out = {}
    t0 = time.perf_counter()
    full = collectives.build(op, "ring", ranks, nbytes).with_connections()
    r = simulate(fab, full, policy, engine="flow")
    out["full"] = (r.makespan, r.link_bytes, full.n_transfers, time.perf_counter() - t0)
    t0 = time.perf_counter()
    st = stream_schedule(ranks, ring_stream(op, "ring", len(ranks), nbytes), op)
    r = simulate(fab, st, policy, engine="flow")
    out["auto"] = (r.makespan, r.link_bytes, st.n_transfers, time.perf_counter() - t0)
    return name, out


def _composed(name, algo, fab, policy, protocol, nbytes=1 << 30, **opts):
    """A hierarchical or torus all-reduce, full against its phases of ring streams."""
    from collectives import protocols
    from collectives.streams import composed_phases, phased_schedule

    ranks = list(range(fab.n_hosts))
    out = {}
    t0 = time.perf_counter()
    full = collectives.build("all_reduce", algo, ranks, nbytes, protocol=protocol, fabric=fab,
                             **opts).with_connections()
    r = simulate(fab, full, policy, engine="flow")
    out["full"] = (r.makespan, r.link_bytes, full.n_transfers, time.perf_counter() - t0)
    t0 = time.perf_counter()
    costs = protocols.costs(protocol, None, fab, algo)
    st = phased_schedule(ranks, composed_phases(algo, ranks, nbytes, costs,
                                                opts.get("group_size"), opts.get("dims")),
                         "all_reduce")
    r = simulate(fab, st, policy, engine="flow")
    out["auto"] = (r.makespan, r.link_bytes, st.n_transfers, time.perf_counter() - t0)
    return name, out


def cases(quick: bool):
    sizes = (512,) if quick else (512, 1024, 2048)
    for fabric in ("two_tier", "fullflat"):
        # fullflat's full form on 2,048 GPUs (striped over its 8 planes: about 25 M flows)
        # no longer fits the 24 GB machine; it was killed for memory
        for g in (sizes if fabric == "two_tier" else sizes[:2]):
            par = dict(GPT3, global_batch=max(g // 4, 8 * (g // 64)))
            yield lambda g=g, fabric=fabric, par=par: _training(
                f"GPT-3 175B, {g} GPUs, {fabric}", "gpt3-175b", par, _fabric(fabric, g))
    g = 256
    yield lambda: _training(f"MoE 8x7B-like, EP 8, {g} GPUs, two_tier", MOE,
                            dict(tp=2, pp=4, ep=8, sp=True, recompute="selective",
                                 global_batch=64), _fabric("two_tier", g))
    fab = _fabric("two_tier", 512 if not quick else 128)
    edge = fab.layer_names.index("edge")
    nic = np.flatnonzero((fab.link_layer == edge) & ((fab.link_u == 9) | (fab.link_v == 9)))[0]
    # the spine link that carries the most bytes in a fault-free step goes down mid-step
    par0 = dict(GPT3, global_batch=max(fab.n_hosts // 4, 8 * (fab.n_hosts // 64)))
    s0 = build_step("gpt3-175b", par0, "h100_sxm", fab, granularity="coarse",
                    network_detail="auto")
    busy = simulate(fab, s0, "ecmp", engine="flow").link_bytes
    on_spine = np.flatnonzero(fab.link_layer == fab.layer_names.index("spine"))
    spine = on_spine[np.argmax(busy[2 * on_spine] + busy[2 * on_spine + 1])]
    par = dict(GPT3, global_batch=max(fab.n_hosts // 4, 8 * (fab.n_hosts // 64)))
    deg = LinkFaults.from_records(fab, [{"link": [int(fab.link_u[nic]), int(fab.link_v[nic])],
                                         "kind": "degrade", "factor": 0.25, "at_us": 0.0}])
    down = LinkFaults.from_records(fab, [{"link": [int(fab.link_u[spine]),
                                                   int(fab.link_v[spine])],
                                          "kind": "down", "at_us": 600_000.0}])
    yield lambda: _training(f"GPT-3 175B, {fab.n_hosts} GPUs, NIC link at 25%", "gpt3-175b",
                            par, fab, deg)
    yield lambda: _training(f"GPT-3 175B, {fab.n_hosts} GPUs, busiest spine link down at 0.6 s",
                            "gpt3-175b", par, fab, down)
    for g in ((128,) if quick else (128, 1024)):
        yield lambda g=g: _composed(f"hierarchical all_reduce 1 GiB, {g} GPUs, two_tier, "
                                    f"LL128, ecmp", "hierarchical", _fabric("two_tier", g),
                                    "ecmp", "ll128", group_size=8)
    for dims in (((4, 4, 4),) if quick else ((4, 4, 4), (8, 8, 8))):
        yield lambda dims=dims: _composed(
            f"torus all_reduce 1 GiB, torus {'x'.join(map(str, dims))}, Simple, dor", "torus",
            tb.build("torus", {"dims": list(dims), "link_gbps": 400, "latency_us": 0.5}),
            "dor", "simple", dims=dims)
    for k in ((8,) if quick else (8, 16)):
        for policy in ("ecmp", "dmodk"):
            for op in ("all_reduce", "reduce_scatter", "all_gather"):
                yield lambda k=k, policy=policy, op=op: _collective(
                    f"ring {op} 1 GiB, fat_tree k={k}, {policy}", op, k, policy)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    print("| case | full | auto | difference | worst link bytes | flows full / auto | "
          "wall full / auto |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    worst = worst_b = 0.0
    for make in cases(a.quick):
        name, out = make()
        (tf, bf, nf, wf), (ta, ba, na, wa) = out["full"], out["auto"]
        d = ta / tf - 1
        used = bf > 0
        db = float(np.max(np.abs(ba[used] / bf[used] - 1))) if used.any() else 0.0
        extra = float(ba[~used].sum())
        worst, worst_b = max(worst, abs(d)), max(worst_b, db)
        unit = "s" if tf > 1e-3 else "us"
        f = (lambda x: f"{x:.6f} s") if unit == "s" else (lambda x: f"{x * 1e6:.1f} us")
        print(f"| {name} | {f(tf)} | {f(ta)} | {100 * d:+.4f}% | {100 * db:.4f}%"
              f"{' (+bytes on unused links)' if extra else ''} | {nf:,} / {na:,} | "
              f"{wf:.1f} / {wa:.2f} s |", flush=True)
    print(f"\nworst step/makespan difference {100 * worst:.4f}%, worst per-link bytes "
          f"{100 * worst_b:.4f}%")


if __name__ == "__main__":
    main()
