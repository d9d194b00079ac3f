"""Per-iteration cost of LLM serving on one model replica (docs/inference.md).

A serving iteration runs one forward pass over a batch that mixes prefill chunks (a slice of a
prompt, attending to what is cached plus itself) and decode steps (one token per running
request, attending to its whole context). Its compute cost on one GPU of the replica is the sum
of roofline kernels (compute/operators.py conventions):

* every linear layer as a GEMM of m = the batch's tokens against the GPU's shard of the weights
  (time = max(FLOPs / (peak x gemm efficiency(m, n, k)), bytes / (HBM x memory)));
* expert GEMMs: each local expert gets top_k x tokens / experts tokens; only the experts some
  token reaches read their weights (expected count 1 - (1 - top_k/E)^tokens of them);
* the output layer for the rows that sample a token;
* attention: one fused kernel for the prefill chunks (causal over the chunk, full over the
  cached prefix) and one for the decode steps (reads every cached key and value);
* bandwidth-bound passes (norms, activation, residual) and a launch cost per kernel;
* in an iteration that runs prompt tokens, a further fixed host cost per kernel
  (``prefill_host_us``: the context phase's host-side work that the GPU waits for).

The cost is a closed form of six batch figures, evaluated by ``iteration_compute`` (numba), so
the serving loop never calls Python per iteration. Communication (TP all-reduces, EP
all-to-alls, pipeline sends) is priced by the caller from cost curves measured on the fabric.
"""
from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from compute.hardware import ALL_PRECISIONS, GPUSpec, get_gpu
from compute.model import TransformerConfig, get_model
from topo.errors import InputError

# bytes per weight element; KV cache and activations stay 16-bit unless the precision is fp8/fp4
# (an fp8 KV cache, as vLLM's kv_cache_dtype = "fp8")
WEIGHT_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "fp4": 0.5}
KV_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "fp4": 1.0}
ACT_BYTES = 2.0
# bandwidth-bound kernels per layer (2 norms, activation, 2 residual adds, rotary) and the
# elements each moves per token, in units of hidden (norms, residuals) and local FFN width
MEMOPS_PER_LAYER = 6


@dataclass(frozen=True)
class ServingLayout:
    """One replica is tp x pp GPUs; ep (1 or tp) splits experts across the TP group;
    dp replicas serve disjoint request streams."""
    tp: int = 1
    pp: int = 1
    ep: int = 1
    dp: int = 1

    @property
    def replica_gpus(self) -> int:
        return self.tp * self.pp

    @property
    def n_gpus(self) -> int:
        return self.tp * self.pp * self.dp


def check_layout(m: TransformerConfig, lay: ServingLayout, where: str = "parallel") -> None:
    """A layout that does not divide the model is an InputError naming the field."""
    for k in ("tp", "pp", "ep", "dp"):
        v = getattr(lay, k)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise InputError(f"{where}.{k} = {v!r}: expected an integer >= 1")
    if m.heads % lay.tp:
        raise InputError(f"{where}.tp = {lay.tp}: does not divide the model's {m.heads} "
                         f"attention heads")
    if m.g % lay.tp and lay.tp % m.g:
        raise InputError(f"{where}.tp = {lay.tp}: neither divides nor is a multiple of the "
                         f"model's {m.g} KV heads")
    if m.layers % lay.pp:
        raise InputError(f"{where}.pp = {lay.pp}: does not divide the model's {m.layers} layers")
    if lay.ep > 1:
        if not m.experts:
            raise InputError(f"{where}.ep = {lay.ep}: the model {m.name or ''} has no experts")
        if lay.ep != lay.tp:
            raise InputError(f"{where}.ep = {lay.ep}: expert parallelism runs over the TP group "
                             f"(ep = 1 or ep = tp = {lay.tp})")
        if m.experts % lay.ep:
            raise InputError(f"{where}.ep = {lay.ep}: does not divide the model's "
                             f"{m.experts} experts")
    f = m.expert_f if m.experts else m.f
    if (f // (lay.ep if lay.ep > 1 else 1)) % (lay.tp // (lay.ep if lay.ep > 1 else 1)):
        raise InputError(f"{where}.tp = {lay.tp}: does not divide the model's FFN width {f}")


@dataclass(frozen=True)
class CostModel:
    """Per-GPU figures of one replica; ``params`` is the float64 vector iteration_compute reads."""
    model: TransformerConfig
    spec: GPUSpec
    layout: ServingLayout
    precision: str
    weight_bytes: float        # weights held by one GPU
    weight_read_bytes: float   # weights a GPU reads for a dense forward (no embedding table)
    kv_bytes_per_token: float  # KV cache bytes one token of context costs one GPU
    gemm_n: np.ndarray         # dense GEMMs on one GPU, all its layers: n, k, count
    gemm_k: np.ndarray
    gemm_c: np.ndarray
    params: np.ndarray

    def kv_capacity_tokens(self, memory_utilization: float, reserve_bytes: float) -> int:
        """Tokens of context the replica can cache: what is left of HBM x utilization after
        the weights and an activation reserve, over the per-token KV bytes of one GPU."""
        free = self.spec.hbm_bytes * memory_utilization - self.weight_bytes - reserve_bytes
        # at most 2**62: the serving loop holds it in int64 (hbm_gb = 1e15 overflowed it), and
        # no stream of requests (at most 1e7 of 2e12 tokens) fills that many
        return min(max(0, int(free // self.kv_bytes_per_token)), 2**62)


# indices into CostModel.params
(P_PEAK, P_HBM, P_GMAX, P_KNEE, P_MEM, P_LAUNCH, P_ATT, P_WB, P_AB, P_KVB, P_LAYERS,
 P_HEADS, P_KVH, P_HD, P_VOCAB, P_H, P_MOE_LAYERS, P_E_LOCAL, P_TOPK, P_EXPERTS, P_EXP_N,
 P_EXP_K, P_EXP_MATS, P_SHARED, P_MEMOP_BYTES, P_KERNELS, P_KV_READS, P_PF_HOST,
 P_NP) = range(29)

# how a decode step's attention kernel reads a KV head shared by a group of query heads (GQA):
# "grouped" reads it once for the whole group (FlashInfer, FlashAttention, TensorRT-LLM's XQA
# since v0.7, vLLM's paged attention v2); "per_query_head" reads it once per query head of the
# group (one thread block per sequence and query head, as TensorRT-LLM's masked multi-head
# attention kernel before XQA): the group's KV bytes are read hq / hkv times (docs/inference.md)
DECODE_ATTENTION = ("grouped", "per_query_head")


def cost_model(model, gpu, layout: ServingLayout, precision: str = "bf16",
               where: str = "workload", decode_attention: str = "grouped") -> CostModel:
    m = get_model(model)
    if decode_attention not in DECODE_ATTENTION:
        raise InputError(f"{where}.decode_attention = {decode_attention!r}: expected one of "
                         f"{', '.join(DECODE_ATTENTION)}")
    spec = get_gpu(gpu)
    if precision not in ALL_PRECISIONS:
        raise InputError(f"{where}.precision = {precision!r}: expected one of "
                         f"{', '.join(ALL_PRECISIONS)}")
    try:
        peak = spec.peak_flops(precision)
    except InputError as e:
        raise InputError(f"{where}.{e}") from None
    check_layout(m, layout, f"{where}.parallel")
    tp, pp, ep = layout.tp, layout.pp, layout.ep
    wb, kvb = WEIGHT_BYTES[precision], KV_BYTES[precision]
    h = m.hidden
    n_moe = m.n_moe_layers
    n_dense = m.layers - n_moe
    # dense GEMMs per GPU over all layers (pipeline stages run one after the other for a batch,
    # so an iteration passes every layer; each GPU holds 1/pp of them but the replica's time is
    # the sum over stages: priced as all layers on one GPU's TP shard)
    gn, gk, gc = [], [], []
    for _, din, dout, split in m.attn_gemms():
        if split:
            # column-parallel: the output is split; the output projection is row-parallel
            if dout == h and din != h:
                gn.append(h), gk.append(din // tp)
            else:
                gn.append(dout // tp), gk.append(din)
        else:
            gn.append(dout), gk.append(din)
        gc.append(m.layers)
    mats = m.mlp_mats
    if n_dense:
        gn += [(mats - 1) * m.f // tp, h]
        gk += [h, m.f // tp]
        gc += [n_dense, n_dense]
    # experts: with ep = tp each GPU holds experts/ep whole experts; with ep = 1 a 1/tp slice of
    # every expert
    e_local = m.experts // ep if m.experts else 0
    exp_n = m.expert_f // (tp // ep) if m.experts else 0
    if m.experts and m.shared_experts:
        gn += [(mats - 1) * m.shared_experts * m.expert_f // tp, h]
        gk += [h, m.shared_experts * m.expert_f // tp]
        gc += [n_moe, n_moe]
    if m.experts:  # router
        gn.append(m.experts), gk.append(h), gc.append(n_moe)
    gn, gk, gc = (np.asarray(x, dtype=np.float64) for x in (gn, gk, gc))
    vocab_local = m.padded_vocab(tp) / tp
    dense_w = float((gn * gk * gc).sum())
    expert_w = float(n_moe * e_local * mats * h * exp_n)
    lm_w = vocab_local * h
    # weights held: the layer GEMMs, the output layer (and the input embedding, both
    # vocab-parallel); norms are negligible
    emb = (0 if m.tied_embeddings else vocab_local * h) + vocab_local * h
    weight_bytes = (dense_w + expert_w) * wb / pp + emb * wb / pp
    weight_read = (dense_w + expert_w + lm_w) * wb
    kv_local = m.g / tp if m.g >= tp else 1.0
    hd = m.attn_head_dim
    if m.mla:  # the cached latent plus the shared rotary key, whole on every TP rank
        kv_tok = (m.layers / pp) * (m.kv_lora_rank + m.rope_head_dim) * kvb
    else:
        kv_tok = (m.layers / pp) * 2 * kv_local * m.head_dim * kvb
    e = spec.efficiency
    p = np.zeros(P_NP)
    p[P_PEAK], p[P_HBM] = peak, spec.hbm_Bps
    p[P_GMAX], p[P_KNEE], p[P_MEM] = e.gemm_max, e.gemm_knee, e.memory
    p[P_LAUNCH], p[P_ATT] = e.launch_us * 1e-6, e.attention
    p[P_PF_HOST] = e.prefill_host_us * 1e-6
    p[P_WB], p[P_AB], p[P_KVB] = wb, ACT_BYTES, kvb
    p[P_LAYERS], p[P_HEADS], p[P_KVH], p[P_HD] = m.layers, m.heads / tp, kv_local, hd
    if m.mla:  # attention reads the latent (one shared "head" of kv_lora_rank + rope)
        p[P_KVH], p[P_HD] = 0.5 * (m.kv_lora_rank + m.rope_head_dim) / hd, hd
    p[P_VOCAB], p[P_H] = vocab_local, h
    p[P_MOE_LAYERS], p[P_E_LOCAL], p[P_TOPK], p[P_EXPERTS] = n_moe, e_local, m.top_k, m.experts
    p[P_EXP_N], p[P_EXP_K], p[P_EXP_MATS], p[P_SHARED] = exp_n, h, mats, m.shared_experts
    # per token per layer: 2 norms (read + write h), residual adds (2 x 3h), activation over the
    # local FFN width (read (mats-1) f/tp, write f/tp)
    f_local = (m.expert_f * m.top_k / max(ep, 1) if m.experts else m.f) / (tp // ep)
    p[P_MEMOP_BYTES] = m.layers * ((4 + 6) * h + mats * f_local) * ACT_BYTES
    p[P_KERNELS] = m.layers * (len(m.attn_gemms()) + 4 + MEMOPS_PER_LAYER) + 1
    # times a decode step reads each cached KV head: once, or once per query head sharing it
    # (MLA's latent is one head shared by all: a per-query-head kernel does not apply to it)
    p[P_KV_READS] = 1.0
    if decode_attention == "per_query_head" and not m.mla:
        p[P_KV_READS] = max(p[P_HEADS] / p[P_KVH], 1.0)
    return CostModel(m, spec, layout, precision, weight_bytes, weight_read, kv_tok, gn, gk, gc, p)


@numba.njit(cache=True, inline="always")
def _gemm(m, n, k, count, wb, ab, p):
    """``count`` GEMMs of m x k by k x n, weights (k x n) in wb bytes per element."""
    if m <= 0 or count <= 0:
        return 0.0
    kn = p[P_KNEE]
    eff = p[P_GMAX] * (m / (m + kn)) * (n / (n + kn)) * (k / (k + kn))
    t_c = 2.0 * m * n * k / (p[P_PEAK] * eff)
    t_m = (k * n * wb + (m * k + m * n) * ab) / (p[P_HBM] * p[P_MEM])
    return count * max(t_c, t_m)


@numba.njit(cache=True)
def iteration_compute(p, gn, gk, gc, tokens, logits, n_pf, pf_ctx, pf_kv, n_dec, dec_ctx):
    """Compute seconds of one iteration on one GPU of the replica.

    ``tokens``: tokens in the batch (prefill chunk tokens + one per decode); ``logits``: rows
    that sample a token; ``n_pf``: prefill chunks; ``pf_ctx``: sum over chunks of
    chunk x (cached prefix + chunk / 2) (causal attention work); ``pf_kv``: sum over chunks of
    cached prefix + chunk (keys and values read); ``n_dec``: decode steps;
    ``dec_ctx``: sum of their context lengths."""
    if tokens <= 0:
        return 0.0
    wb, ab = p[P_WB], p[P_AB]
    bw = p[P_HBM] * p[P_MEM]
    t = 0.0
    for i in range(gn.shape[0]):
        t += _gemm(tokens, gn[i], gk[i], gc[i], wb, ab, p)
    # experts: expected experts reached and tokens per reached expert
    if p[P_MOE_LAYERS] > 0 and p[P_E_LOCAL] > 0:
        q = p[P_TOPK] / p[P_EXPERTS]
        reached = 1.0 - (1.0 - q) ** tokens
        per = tokens * q / reached
        n_exp = p[P_E_LOCAL] * reached
        mats = p[P_EXP_MATS]
        t += _gemm(per, (mats - 1) * p[P_EXP_N], p[P_EXP_K], n_exp * p[P_MOE_LAYERS], wb, ab, p)
        t += _gemm(per, p[P_EXP_K], p[P_EXP_N], n_exp * p[P_MOE_LAYERS], wb, ab, p)
    # output layer on the rows that sample
    t += _gemm(logits, p[P_VOCAB], p[P_H], 1.0, wb, ab, p)
    # attention
    L, hq, hkv, hd, kvb = p[P_LAYERS], p[P_HEADS], p[P_KVH], p[P_HD], p[P_KVB]
    kn = p[P_KNEE]
    att = p[P_GMAX] * p[P_ATT]
    pf_tok = tokens - n_dec
    if n_pf > 0 and pf_tok > 0:
        c = pf_tok / n_pf
        ctx = pf_ctx / pf_tok  # mean attended length per query token
        flops = 4.0 * hq * hd * pf_ctx * L
        nbytes = L * (pf_tok * hq * hd * 2 * ab + 2.0 * pf_kv * hkv * hd * kvb)
        eff = att * (c / (c + kn)) * (ctx / (ctx + kn))
        t += max(flops / (p[P_PEAK] * eff), nbytes / bw)
    if n_dec > 0:
        ctx = dec_ctx / n_dec
        flops = 4.0 * hq * hd * dec_ctx * L
        reads = p[P_KV_READS]
        nbytes = L * (dec_ctx * 2.0 * hkv * hd * kvb * reads + n_dec * hq * hd * 2 * ab)
        # query heads sharing a KV head act as GEMM rows when the kernel reads it once for them
        g = max(hq / max(hkv, 1e-9) / reads, 1.0)
        eff = att * (g / (g + kn)) * (ctx / (ctx + kn))
        t += max(flops / (p[P_PEAK] * eff), nbytes / bw)
    t += tokens * p[P_MEMOP_BYTES] / bw
    t += p[P_KERNELS] * p[P_LAUNCH]
    # an iteration that runs prompt tokens (the context phase) adds prefill_host_us per kernel,
    # not overlapped with the GPU work (docs/inference.md: anchor and evidence)
    if n_pf > 0:
        t += p[P_KERNELS] * p[P_PF_HOST]
    return t


def batch_compute(cm: CostModel, prefill=(), decode=()) -> float:
    """Compute seconds of one iteration from explicit lists (tests, quick estimates):
    ``prefill`` as (cached prefix, chunk) pairs, ``decode`` as context lengths (the cached
    tokens each decode step attends to, itself included)."""
    pf = [(float(a), float(c)) for a, c in prefill]
    dec = [float(x) for x in decode]
    tokens = sum(c for _, c in pf) + len(dec)
    pf_ctx = sum(c * (a + c / 2) for a, c in pf)
    return float(iteration_compute(cm.params, cm.gemm_n, cm.gemm_k, cm.gemm_c, float(tokens),
                                   float(len(pf) + len(dec)), float(len(pf)), pf_ctx,
                                   float(sum(a + c for a, c in pf)),
                                   float(len(dec)), float(sum(dec))))


def decode_bytes(cm: CostModel, contexts) -> float:
    """HBM bytes a decode step of sequences with these context lengths must read on one GPU:
    the weights it multiplies (dense layers and output layer; for MoE the experts reached) plus
    every cached key and value (as many times as the decode attention kernel reads each KV head:
    ``decode_attention``)."""
    return cm.weight_read_bytes + (cm.kv_bytes_per_token * cm.layout.pp * cm.params[P_KV_READS]
                                   * float(sum(contexts)))


def kv_transfer_bytes_per_token(model, precision: str = "bf16") -> float:
    """Bytes of KV cache one prompt token leaves behind in a whole replica, counted once (a KV
    head replicated over TP ranks is sent once): what disaggregated serving moves from the
    prefill to the decode GPUs. layers x 2 x KV heads x head dim x element bytes; with
    multi-head latent attention layers x (kv_lora_rank + rope_head_dim) x element bytes."""
    m = get_model(model)
    kvb = KV_BYTES[precision]
    if m.mla:
        return float(m.layers * (m.kv_lora_rank + m.rope_head_dim) * kvb)
    return float(m.layers * 2 * m.g * m.head_dim * kvb)
