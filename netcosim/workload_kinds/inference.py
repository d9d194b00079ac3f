"""``[workload] kind = "inference"``: LLM serving priced on the roofline and the fabric.

Keys (besides ``kind``): ``model`` (preset or table), ``gpu`` (name or spec table),
``parallel`` (``{tp, pp, ep, dp}``: a replica is tp x pp GPUs, ep = 1 or tp, dp replicas),
``precision`` (bf16 | fp16 | fp8 | fp4), ``placement`` (packed | host list), ``requests``
(the stream: netcosim/inference/requests.py), ``slo`` (``{ttft_ms, tpot_ms, e2e_ms}`` for
goodput), ``max_batch_tokens`` (token budget per iteration, default 8192), ``max_seqs``
(requests in a batch, default 256), ``memory_utilization`` (share of HBM for weights,
activations and KV cache, default 0.9), ``context`` (longest request, default the model's
``seq``; at most the model's ``max_context`` when it has one), ``algorithm``
(``{all_reduce = "ring", all_to_all = "direct", protocol = "auto"}``: the collectives'
algorithms and NCCL protocol, "none" for bare transfers), ``disaggregated``
(``{prefill = {tp, pp, ep, dp}, decode = {tp, pp, ep, dp}}`` instead of ``parallel``: separate
prefill and decode pools with KV-cache transfers over the fabric, netcosim/inference/disagg.py),
``decode_attention`` (``grouped``, the default: a decode step reads each cached KV head once;
``per_query_head``: once per query head sharing it, as kernels without a GQA path do).

A serving run is not one DAG: the builder measures the communication cost curves on the
fabric (netcosim/inference/fabric.py), runs the serving loop of every replica
(netcosim/inference/loop.py) and returns a Schedule of one delay node as long as the served
span, carrying the figures in ``meta``; ``report`` hands them to summary.json. docs/inference.md.
"""
from __future__ import annotations

import math

import numpy as np

from netcore.schedule import ScheduleBuilder
from topo.errors import InputError

KEYS = ("model", "gpu", "parallel", "precision", "placement", "requests", "slo",
        "max_batch_tokens", "max_seqs", "memory_utilization", "context", "algorithm",
        "disaggregated", "decode_attention")
SLO_KEYS = ("ttft_ms", "tpot_ms", "e2e_ms")
DEFAULT_ALGO = {"all_reduce": "ring", "all_to_all": "direct", "protocol": "auto"}


def _int(spec, k, default, where, lo=1):
    v = spec.get(k, default)
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise InputError(f"{where}.{k} = {v!r}: expected an integer >= {lo}")
    return v


def _layout(spec, where):
    return layout_table(spec.get("parallel", {}), f"{where}.parallel")


def layout_table(par, field):
    """A ``{tp, pp, ep, dp}`` table as a ServingLayout (each an integer >= 1)."""
    from compute.inference import ServingLayout
    from netcosim.scenario import check_keys

    if not isinstance(par, dict):
        raise InputError(f"{field}: expected a table with tp, pp, ep, dp")
    check_keys(par, ("tp", "pp", "ep", "dp"), field)
    for k, v in par.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise InputError(f"{field}.{k} = {v!r}: expected an integer >= 1")
    return ServingLayout(**par)


def _algorithms(spec, where):
    import collectives

    a = spec.get("algorithm", {})
    if not isinstance(a, dict):
        raise InputError(f"{where}.algorithm: expected a table such as "
                         f"{{all_reduce = \"ring\"}}")
    from collectives import protocols

    out = dict(DEFAULT_ALGO)
    for op, name in a.items():
        if op not in DEFAULT_ALGO:
            raise InputError(f"{where}.algorithm.{op}: expected all_reduce, all_to_all or "
                             f"protocol")
        if op == "protocol":
            # NCCL's protocol costs (per-step and launch latencies, wire overhead): "auto"
            # (NCCL's tuner: the least estimate per size), one protocol, or "none" (bare
            # transfers, no protocol cost)
            out[op] = None if name == "none" else protocols.resolve(
                name, f"{where}.algorithm.protocol")
            continue
        try:
            out[op] = collectives.resolve(op, name)[1]
        except InputError:
            raise InputError(f"{where}.algorithm.{op} = {name!r}: {op} supports "
                             f"{', '.join(collectives.ALGORITHMS[op])}") from None
    return out


def _slo(spec, where):
    s = spec.get("slo", {})
    if not isinstance(s, dict):
        raise InputError(f"{where}.slo: expected a table ({', '.join(SLO_KEYS)})")
    for k, v in s.items():
        if k not in SLO_KEYS:
            raise InputError(f"{where}.slo.{k}: unknown (known: {', '.join(SLO_KEYS)})")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                or v <= 0:
            raise InputError(f"{where}.slo.{k} = {v!r}: expected a positive number")
    return {k: float(v) for k, v in s.items()}


def pool_model(model, gpu, lay, precision, budget, max_seqs, mu, need, where, field, rw,
               decode_attention="grouped"):
    """Cost model and KV capacity (tokens) of one replica of ``lay``; refused (naming
    ``field``) when the weights do not fit or the cache cannot hold a request of ``need``
    tokens."""
    from compute.inference import P_VOCAB, check_layout, cost_model

    check_layout(model, lay, field)
    try:
        cm = cost_model(model, gpu, lay, precision, where, decode_attention)
    except InputError as e:
        msg = str(e)
        raise InputError(msg if msg.startswith(where) else f"{where}.{msg}") from None
    # KV capacity: HBM x utilization - weights - an activation reserve (the batch's hidden
    # states, a few buffers of them, and the logits of max_seqs rows in fp32)
    reserve = budget * 16 * model.hidden * 2 + max_seqs * cm.params[P_VOCAB] * 4
    if cm.spec.hbm_bytes * mu <= cm.weight_bytes + reserve:
        raise InputError(f"{field}: weights of {cm.weight_bytes / 1e9:.1f} GB per GPU "
                         f"plus {reserve / 1e9:.1f} GB of activations exceed "
                         f"{mu:g} x {cm.spec.hbm_gb:g} GB of {cm.spec.name} HBM (more tp or pp)")
    kv_cap = cm.kv_capacity_tokens(mu, reserve)
    if need > kv_cap:
        raise InputError(f"{rw}: the KV cache of one replica holds {kv_cap} tokens "
                         f"({cm.kv_bytes_per_token / 1e3:.1f} kB per token per GPU); a request "
                         f"of {need} tokens (input + output) cannot fit (more tp or pp, "
                         f"shorter requests, or {where}.memory_utilization)")
    return cm, kv_cap


def pool_curves(topology, routing, faults, engine, seed, model, lay, hosts, budget, algos,
                where):
    """Communication cost curves of a pool (every replica at once) and its comm vector."""
    from netcosim.inference import fabric

    h = model.hidden
    act_hi = budget * h * 2.0
    sizes = {"all_reduce": (h * 2, act_hi) if lay.tp > 1 else None,
             "all_to_all": (h * 2 * model.top_k / lay.ep, act_hi * model.top_k / lay.ep)
             if lay.ep > 1 else None,
             "send": (h * 2, act_hi) if lay.pp > 1 else None}
    log_s, log_t, curves = fabric.measure(topology, routing, faults, engine, seed, hosts,
                                          sizes, algos, where)
    comm = np.array([model.layers, model.layers - model.n_moe_layers, model.n_moe_layers,
                     lay.tp, lay.ep, lay.pp, h, model.top_k], dtype=np.float64)
    return log_s, log_t, curves, comm


def build(topology, spec: dict, where: str = "workload", seed: int = 0):
    from compute.model import get_model
    from netcosim.inference import fabric, loop, metrics, requests
    from netcosim.workloads import scenario_dir, scenario_engine, scenario_faults, \
        scenario_routing

    for k in ("model", "gpu", "requests"):
        if k not in spec:
            raise InputError(f"{where}.{k}: missing field")
    try:
        model = get_model(spec["model"])
    except InputError as e:
        raise InputError(f"{where}.{e}") from None
    disagg = "disaggregated" in spec
    if disagg and "parallel" in spec:
        raise InputError(f"{where}.parallel: not used with {where}.disaggregated (give each "
                         f"pool's layout there: prefill = {{tp, dp}}, decode = {{tp, dp}})")
    lay = None if disagg else _layout(spec, where)
    precision = spec.get("precision", "bf16")
    if not isinstance(precision, str):
        raise InputError(f"{where}.precision = {precision!r}: expected a string")
    budget = _int(spec, "max_batch_tokens", 8192, where)
    max_seqs = _int(spec, "max_seqs", 256, where)
    if max_seqs > budget:
        raise InputError(f"{where}.max_seqs = {max_seqs}: above max_batch_tokens = {budget} "
                         f"(every running request decodes one token per iteration)")
    # the longest request: by default the model's seq (a training length, so capped at the
    # model's maximum context when it is longer); never above that maximum, which a model
    # without a known one (max_context = 0: a custom table) does not have
    cap = model.max_context
    context = _int(spec, "context", min(model.seq, cap) if cap else model.seq, where)
    if cap and context > cap:
        of = f"{model.name}'s" if model.name else "the model's"
        raise InputError(f"{where}.context = {context}: above {of} maximum context of "
                         f"{cap:,} tokens ({where}.model.max_context)")
    mu = spec.get("memory_utilization", 0.9)
    if isinstance(mu, bool) or not isinstance(mu, (int, float)) or not 0 < mu <= 1:
        raise InputError(f"{where}.memory_utilization = {mu!r}: expected 0 < x <= 1")
    slo = _slo(spec, where)
    algos = _algorithms(spec, where)
    rw = f"{where}.requests"
    arrival, inp, out, conc = requests.sample(spec["requests"], seed, rw, scenario_dir())
    if isinstance(spec["requests"], dict) and spec["requests"].get("arrival") == "trace":
        # a trace's time origin is its own (Unix time stamps, say): the clock starts at its
        # first arrival, or float64 seconds far from 0 swallow the iterations (at 1e16 s every
        # figure read 0). The subtraction is exact to the trace's own resolution, and figures
        # are differences from arrivals; a Poisson stream starts at 0 already.
        arrival = arrival - arrival[0]
    longest = int((inp + out).max())
    if longest > context:
        i = int(np.argmax(inp + out))
        field = f"{rw}.trace" if isinstance(spec["requests"], dict) and \
            spec["requests"].get("arrival") == "trace" else f"{rw}.input_tokens"
        raise InputError(f"{field}: a request of {int(inp[i])} + {int(out[i])} tokens "
                         f"(input + output) exceeds the context of {context} tokens "
                         f"({where}.context, default the model's seq, at most its "
                         f"max_context)")
    routing = scenario_routing()
    if routing is None:
        from topo.routing import Routing

        routing = Routing(topology, "ecmp", seed=seed)
    engine = scenario_engine() or "flow"
    if disagg:
        from netcosim.inference import disagg as dis

        return dis.build(topology, spec, where, seed, model, precision, budget, max_seqs, mu,
                         slo, algos, arrival, inp, out, conc, routing, engine)
    cm, kv_cap = pool_model(model, spec["gpu"], lay, precision, budget, max_seqs, mu, longest,
                            where, f"{where}.parallel", rw, spec.get("decode_attention", "grouped"))
    if conc and conc < lay.dp:
        raise InputError(f"{rw}.concurrency = {conc}: fewer clients than the {lay.dp} "
                         f"replicas ({where}.parallel.dp)")
    hosts = fabric.replica_hosts(topology.n_hosts, lay, spec.get("placement", "packed"), where)
    log_s, log_t, curves, comm = pool_curves(topology, routing, scenario_faults(), engine,
                                             seed, model, lay, hosts, budget, algos, where)
    n = len(arrival)
    groups = [np.arange(r, n, lay.dp) for r in range(lay.dp)]
    arrival, first, finish, iterations = loop.serve_pool(
        groups, arrival, inp, out, conc, cm, comm, log_s, log_t, budget, max_seqs, kv_cap)
    figs = metrics.summarize(arrival, inp, out, first, finish, iterations, lay.n_gpus, slo)
    figs.update({"model": model.name, "gpu": cm.spec.name, "precision": precision,
                 "tp": lay.tp, "pp": lay.pp, "ep": lay.ep, "dp": lay.dp, "gpus": lay.n_gpus,
                 "kv_capacity_tokens": kv_cap, "weights_GB_per_gpu": cm.weight_bytes / 1e9,
                 "kv_bytes_per_token_per_gpu": cm.kv_bytes_per_token,
                 "comm_curves": curves})
    return schedule(figs, int(hosts[0, 0, 0]), iterations)


def schedule(figs: dict, host: int, iterations: list):
    """The placeholder Schedule of a serving run: one delay node as long as the served span,
    the figures in its meta."""
    span = figs["serving_span_s"]
    if not math.isfinite(span * 1e6):  # summary.json's makespan_us would be inf (null)
        raise InputError(f"workload: the serving run would last {span:.3g} s, beyond what a "
                         f"run's clock holds (workload.gpu's peaks, bandwidths or efficiency "
                         f"too low)")
    b = ScheduleBuilder()
    b.add_delay([host], [max(span, 0.0)], label="serving")
    sched = b.build()
    sched.meta.update({"workload": "inference", "inference": figs,
                       "inference_iterations": iterations})
    return sched


# summary.json fields that count a schedule's transfers: a serving run prices its communication
# from curves the flow engine measured on the fabric at setup (docs/inference.md), and the
# schedule the runner sees is one placeholder node, so they would read 0 transfers and 0 bytes
# while the fabric carried every all-reduce and KV cache: null instead
NOT_SCHEDULED = ("nodes", "transfers", "transfers_finished", "engine_flows",
                 "stream_shared_links", "transfers_represented", "stranded", "unfinished",
                 "bytes", "events")


def report(spec: dict, schedule, result) -> dict:
    out = dict.fromkeys(NOT_SCHEDULED)
    out.update(schedule.meta.get("inference", {}))
    return out


def register(register_workload) -> None:
    register_workload("inference", build, KEYS, report)
