"""Disaggregated serving: a prefill pool, KV-cache transfers over the fabric, a decode pool.

``[workload.disaggregated] prefill = {tp, pp, ep, dp}, decode = {tp, pp, ep, dp}`` replaces
``parallel``. The run, with no Python per request or per iteration:

1. the prefill pool's replicas run the batching loop with one output token per request (a
   request leaves its prefill replica when its prompt is done); request i goes to prefill
   replica i mod dp_prefill;
2. request i goes to decode replica i mod dp_decode (round-robin in arrival order); its prompt's
   KV cache (``kv_transfer_bytes_per_token`` x input tokens) moves from the prefill replica's
   GPUs to the decode replica's, priced by a cost curve measured on the fabric
   (netcosim/inference/kv_transfer.py);
3. the decode pool's replicas run the loop with requests arriving at prefill end + transfer,
   their KV already cached (``prefilled``): each decodes from its first iteration there, which
   samples its first token.

TTFT is the arrival-to-first-token time a client streaming from the decode pool sees: prefill
queue + prefill + KV transfer + decode queue + one decode iteration (vLLM's disaggregated
prefill and NVIDIA Dynamo stream every token, the first one included, from the decode
instance). DistServe and Splitwise count the first token at the end of prefill instead (the
prefill instance returns it; the transfer lands in the second token's latency): that figure is
``ttft_prefill_*``.

Placement: the prefill replicas on the first hosts (packed as docs/inference.md), the decode
replicas on the hosts after them; a ``placement`` list gives the prefill pool's hosts then the
decode pool's.
"""
from __future__ import annotations

import numpy as np

from netcosim.inference.fabric import placed_hosts
from topo.errors import InputError

POOLS = ("prefill", "decode")


def pools(spec, where):
    """(prefill layout, decode layout) from ``workload.disaggregated``."""
    from netcosim.scenario import check_keys
    from netcosim.workload_kinds.inference import layout_table

    d = spec["disaggregated"]
    field = f"{where}.disaggregated"
    if not isinstance(d, dict):
        raise InputError(f"{field}: expected a table with prefill = {{tp, dp}} and "
                         f"decode = {{tp, dp}}")
    check_keys(d, POOLS, field)
    for k in POOLS:
        if k not in d:
            raise InputError(f"{field}.{k}: missing (a table {{tp, pp, ep, dp}})")
    return tuple(layout_table(d[k], f"{field}.{k}") for k in POOLS)


def placement(n_hosts: int, lay_p, lay_d, place, where):
    """(dp, pp, tp) host arrays of the prefill and decode pools."""
    n_p, n_d = lay_p.n_gpus, lay_d.n_gpus
    hosts = placed_hosts(n_hosts, n_p + n_d, place, where,
                         f"{where}.disaggregated: prefill {lay_p.tp} x {lay_p.pp} x {lay_p.dp} "
                         f"+ decode {lay_d.tp} x {lay_d.pp} x {lay_d.dp} (tp x pp x dp)",
                         "the prefill pool's, then the decode pool's")
    return (hosts[:n_p].reshape(lay_p.dp, lay_p.pp, lay_p.tp),
            hosts[n_p:].reshape(lay_d.dp, lay_d.pp, lay_d.tp))


def build(topology, spec, where, seed, model, precision, budget, max_seqs, mu, slo, algos,
          arrival, inp, out, conc, routing, engine):
    from compute.inference import kv_transfer_bytes_per_token
    from netcosim.inference import kv_transfer, loop, metrics
    from netcosim.workload_kinds.inference import pool_curves, pool_model, schedule
    from netcosim.workloads import scenario_faults

    rw = f"{where}.requests"
    if conc:
        raise InputError(f"{rw}.arrival = 'concurrency': not modelled with "
                         f"{where}.disaggregated (the pools run one after the other, so a "
                         f"finished request cannot release the next prompt; use poisson or "
                         f"trace)")
    lay_p, lay_d = pools(spec, where)
    p_hosts, d_hosts = placement(topology.n_hosts, lay_p, lay_d,
                                 spec.get("placement", "packed"), where)
    pw, dw = f"{where}.disaggregated.prefill", f"{where}.disaggregated.decode"
    cm_p, cap_p = pool_model(model, spec["gpu"], lay_p, precision, budget, max_seqs, mu,
                             int(inp.max()) + 1, where, pw, rw,
                             spec.get("decode_attention", "grouped"))
    cm_d, cap_d = pool_model(model, spec["gpu"], lay_d, precision, budget, max_seqs, mu,
                             int((inp + out).max()), where, dw, rw,
                             spec.get("decode_attention", "grouped"))
    faults = scenario_faults()
    ls_p, lt_p, curves_p, comm_p = pool_curves(topology, routing, faults, engine, seed, model,
                                               lay_p, p_hosts, budget, algos, pw)
    ls_d, lt_d, curves_d, comm_d = pool_curves(topology, routing, faults, engine, seed, model,
                                               lay_d, d_hosts, budget, algos, dw)
    n = len(arrival)
    req = np.arange(n)
    # 1. prefill: one output token each; a request leaves when its prompt is done
    groups_p = [req[r::lay_p.dp] for r in range(lay_p.dp)]
    _, _, done_p, its_p = loop.serve_pool(groups_p, arrival, inp, np.ones(n, np.int64), 0,
                                          cm_p, comm_p, ls_p, lt_p, budget, max_seqs, cap_p)
    # 2. KV transfers, TP-sharded over GPU pairs
    bpt = kv_transfer_bytes_per_token(model, precision)
    kv_bytes = inp * bpt
    n_pairs = len(kv_transfer.gpu_pairs(p_hosts[0], d_hosts[0])[0])
    per_pair = kv_bytes / n_pairs
    p_rep, d_rep = req % lay_p.dp, req % lay_d.dp
    kv = kv_transfer.measure(topology, routing, faults, engine, seed, p_hosts, d_hosts,
                             per_pair.min(), per_pair.max(),
                             rounds=kv_transfer.rounds_used(p_rep, d_rep, lay_d.dp))
    xfer = kv_transfer.transfer_times(p_rep, d_rep, per_pair, kv.log_s, kv.log_t, kv.row0)
    ready = done_p + xfer
    # 3. decode: requests arrive with their KV cached, in the order they become ready
    groups_d = []
    for r in range(lay_d.dp):
        idx = req[r::lay_d.dp]
        groups_d.append(idx[np.argsort(ready[idx], kind="stable")])
    _, first, finish, its_d = loop.serve_pool(groups_d, ready, inp, out, 0, cm_d, comm_d, ls_d,
                                              lt_d, budget, max_seqs, cap_d, prefilled=True)
    n_gpus = lay_p.n_gpus + lay_d.n_gpus
    figs = metrics.summarize(arrival, inp, out, first, finish, its_p + its_d, n_gpus, slo)
    metrics.stats("ttft_prefill", done_p - arrival, figs)
    metrics.stats("kv_transfer", xfer, figs)
    metrics.stats("decode_first_token", first - ready, figs)
    figs.update({"kv_transfer_bytes_mean": float(kv_bytes.mean()),
                 "kv_transfer_bytes_total": float(kv_bytes.sum()),
                 "kv_transfer_bytes_per_token": bpt,
                 "kv_transfer_gpu_pairs": n_pairs})
    metrics.pool_figures("prefill", its_p, figs)
    metrics.pool_figures("decode", its_d, figs)
    figs.update({"model": model.name, "gpu": cm_p.spec.name, "precision": precision,
                 "disaggregated": True, "gpus": n_gpus,
                 "prefill_tp": lay_p.tp, "prefill_pp": lay_p.pp, "prefill_ep": lay_p.ep,
                 "prefill_dp": lay_p.dp, "prefill_gpus": lay_p.n_gpus,
                 "decode_tp": lay_d.tp, "decode_pp": lay_d.pp, "decode_ep": lay_d.ep,
                 "decode_dp": lay_d.dp, "decode_gpus": lay_d.n_gpus,
                 "prefill_kv_capacity_tokens": cap_p, "kv_capacity_tokens": cap_d,
                 "weights_GB_per_gpu": cm_d.weight_bytes / 1e9,
                 "kv_bytes_per_token_per_gpu": cm_d.kv_bytes_per_token,
                 "comm_curves": {"prefill": curves_p, "decode": curves_d,
                                 "kv_transfer": kv.report}})
    return schedule(figs, int(p_hosts[0, 0, 0]), its_p + its_d)
