"""``[workload] kind = "inference"``: LLM serving priced on the roofline and the fabric.

Keys (besides ``kind``): ``model`` (preset or table), ``gpu`` (name or spec table),
``parallel`` (``{tp, pp, ep, dp}``: a replica is tp x pp GPUs, ep = 1 or tp, dp replicas),
``precision`` (bf16 | fp16 | fp8 | fp4), ``placement`` (packed | host list), ``requests``
(the stream: netcosim/inference/requests.py), ``slo`` (``{ttft_ms, tpot_ms, e2e_ms}`` for
goodput), ``max_batch_tokens`` (token budget per iteration, default 8192), ``max_seqs``
(requests in a batch, default 256), ``memory_utilization`` (share of HBM for weights,
activations and KV cache, default 0.9), ``context`` (longest request, default the model's
``seq``), ``algorithm`` (``{all_reduce = "ring", all_to_all = "direct"}``).

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
        "max_batch_tokens", "max_seqs", "memory_utilization", "context", "algorithm")
SLO_KEYS = ("ttft_ms", "tpot_ms", "e2e_ms")
DEFAULT_ALGO = {"all_reduce": "ring", "all_to_all": "direct"}


def _int(spec, k, default, where, lo=1):
    v = spec.get(k, default)
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise InputError(f"{where}.{k} = {v!r}: expected an integer >= {lo}")
    return v


def _layout(spec, where):
    from compute.inference import ServingLayout
    from netcosim.scenario import check_keys

    par = spec.get("parallel", {})
    if not isinstance(par, dict):
        raise InputError(f"{where}.parallel: expected a table with tp, pp, ep, dp")
    check_keys(par, ("tp", "pp", "ep", "dp"), f"{where}.parallel")
    for k, v in par.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise InputError(f"{where}.parallel.{k} = {v!r}: expected an integer >= 1")
    return ServingLayout(**par)


def _algorithms(spec, where):
    import collectives

    a = spec.get("algorithm", {})
    if not isinstance(a, dict):
        raise InputError(f"{where}.algorithm: expected a table such as "
                         f"{{all_reduce = \"ring\"}}")
    out = dict(DEFAULT_ALGO)
    for op, name in a.items():
        if op not in DEFAULT_ALGO:
            raise InputError(f"{where}.algorithm.{op}: expected all_reduce or all_to_all")
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


def build(topology, spec: dict, where: str = "workload", seed: int = 0):
    from compute.inference import P_VOCAB, cost_model
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
    lay = _layout(spec, where)
    precision = spec.get("precision", "bf16")
    if not isinstance(precision, str):
        raise InputError(f"{where}.precision = {precision!r}: expected a string")
    try:
        cm = cost_model(model, spec["gpu"], lay, precision, where)
    except InputError as e:
        msg = str(e)
        raise InputError(msg if msg.startswith(where) else f"{where}.{msg}") from None
    budget = _int(spec, "max_batch_tokens", 8192, where)
    max_seqs = _int(spec, "max_seqs", 256, where)
    if max_seqs > budget:
        raise InputError(f"{where}.max_seqs = {max_seqs}: above max_batch_tokens = {budget} "
                         f"(every running request decodes one token per iteration)")
    context = _int(spec, "context", model.seq, where)
    mu = spec.get("memory_utilization", 0.9)
    if isinstance(mu, bool) or not isinstance(mu, (int, float)) or not 0 < mu <= 1:
        raise InputError(f"{where}.memory_utilization = {mu!r}: expected 0 < x <= 1")
    slo = _slo(spec, where)
    algos = _algorithms(spec, where)
    rw = f"{where}.requests"
    arrival, inp, out, conc = requests.sample(spec["requests"], seed, rw, scenario_dir())
    longest = int((inp + out).max())
    if longest > context:
        i = int(np.argmax(inp + out))
        field = f"{rw}.trace" if isinstance(spec["requests"], dict) and \
            spec["requests"].get("arrival") == "trace" else f"{rw}.input_tokens"
        raise InputError(f"{field}: a request of {int(inp[i])} + {int(out[i])} tokens "
                         f"(input + output) exceeds the context of {context} tokens "
                         f"({where}.context, default the model's seq)")
    # KV capacity: HBM x utilization - weights - an activation reserve (the batch's hidden
    # states, a few buffers of them, and the logits of max_seqs rows in fp32)
    reserve = budget * 16 * model.hidden * 2 + max_seqs * cm.params[P_VOCAB] * 4
    if cm.spec.hbm_bytes * mu <= cm.weight_bytes + reserve:
        raise InputError(f"{where}.parallel: weights of {cm.weight_bytes / 1e9:.1f} GB per GPU "
                         f"plus {reserve / 1e9:.1f} GB of activations exceed "
                         f"{mu:g} x {cm.spec.hbm_gb:g} GB of {cm.spec.name} HBM (more tp or pp)")
    kv_cap = cm.kv_capacity_tokens(mu, reserve)
    if longest > kv_cap:
        raise InputError(f"{rw}: the KV cache of one replica holds {kv_cap} tokens "
                         f"({cm.kv_bytes_per_token / 1e3:.1f} kB per token per GPU); a request "
                         f"of {longest} tokens (input + output) cannot fit (more tp or pp, "
                         f"shorter requests, or {where}.memory_utilization)")
    if conc and conc < lay.dp:
        raise InputError(f"{rw}.concurrency = {conc}: fewer clients than the {lay.dp} "
                         f"replicas ({where}.parallel.dp)")
    hosts = fabric.replica_hosts(topology.n_hosts, lay, spec.get("placement", "packed"), where)
    h = model.hidden
    act_hi = budget * h * 2.0
    sizes = {"all_reduce": (h * 2, act_hi) if lay.tp > 1 else None,
             "all_to_all": (h * 2 * model.top_k / lay.ep, act_hi * model.top_k / lay.ep)
             if lay.ep > 1 else None,
             "send": (h * 2, act_hi) if lay.pp > 1 else None}
    routing = scenario_routing()
    if routing is None:
        from topo.routing import Routing

        routing = Routing(topology, "ecmp", seed=seed)
    log_s, log_t, curves = fabric.measure(topology, routing, scenario_faults(),
                                          scenario_engine() or "flow", seed, hosts, sizes,
                                          algos, where)
    comm = np.array([model.layers, model.layers - model.n_moe_layers, model.n_moe_layers,
                     lay.tp, lay.ep, lay.pp, h, model.top_k], dtype=np.float64)
    n = len(arrival)
    first = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    arrival = arrival.copy()
    iterations = []
    for r in range(lay.dp):
        idx = np.arange(r, n, lay.dp)
        c_r = (conc // lay.dp + (r < conc % lay.dp)) if conc else 0
        cap = 4 * len(idx) + 1024
        while True:
            a = arrival[idx].copy()
            f_r, e_r = np.full(len(idx), np.nan), np.full(len(idx), np.nan)
            its = np.zeros((cap, loop.IT_COLS))
            k = loop.serve(a, inp[idx], out[idx], c_r, cm.params, cm.gemm_n, cm.gemm_k,
                           cm.gemm_c, log_s, log_t[:, r], comm, budget, max_seqs, kv_cap,
                           f_r, e_r, its)
            if k >= 0:
                break
            cap *= 2
        arrival[idx], first[idx], finish[idx] = a, f_r, e_r
        iterations.append(its[:k])
    figs = metrics.summarize(arrival, inp, out, first, finish, iterations, lay.n_gpus, slo)
    figs.update({"model": model.name, "gpu": cm.spec.name, "precision": precision,
                 "tp": lay.tp, "pp": lay.pp, "ep": lay.ep, "dp": lay.dp, "gpus": lay.n_gpus,
                 "kv_capacity_tokens": kv_cap, "weights_GB_per_gpu": cm.weight_bytes / 1e9,
                 "kv_bytes_per_token_per_gpu": cm.kv_bytes_per_token,
                 "comm_curves": curves})
    b = ScheduleBuilder()
    b.add_delay([int(hosts[0, 0, 0])], [max(figs["serving_span_s"], 0.0)], label="serving")
    sched = b.build()
    sched.meta.update({"workload": "inference", "inference": figs,
                       "inference_iterations": iterations})
    return sched


def report(spec: dict, schedule, result) -> dict:
    return dict(schedule.meta.get("inference", {}))


def register(register_workload) -> None:
    register_workload("inference", build, KEYS, report)
