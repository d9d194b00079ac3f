"""Operator cost model: roofline with an efficiency curve, plus a fixed launch cost per kernel.

time = max(flops / (peak * eff_compute), bytes / (hbm_bw * eff_memory)) + launch

GEMM efficiency falls for small or skinny shapes: eff(m, n, k) = gemm_max * prod_x x / (x + knee)
over the three dimensions (a tile-quantisation / wave-occupancy penalty that is ~1 for dimensions
far above the knee and halves a factor at the knee). The parameters and the data they were fitted
to are documented in docs/compute.md.
"""
from __future__ import annotations

from dataclasses import dataclass

from compute.hardware import GPUSpec


@dataclass(frozen=True)
class OpCost:
    name: str
    flops: float  # floating-point operations
    bytes: float  # HBM bytes moved
    seconds: float

    def scaled(self, factor: float, name: str | None = None) -> "OpCost":
        """The same operator ``factor`` times heavier (e.g. a backward pass ~ 2x forward)."""
        return OpCost(name or self.name, self.flops * factor, self.bytes * factor,
                      self.seconds * factor)


def gemm_efficiency(m: float, n: float, k: float, spec: GPUSpec) -> float:
    e = spec.efficiency
    f = e.gemm_max
    for x in (m, n, k):
        f *= x / (x + e.gemm_knee)
    return f


def roofline(name: str, flops: float, nbytes: float, spec: GPUSpec, precision: str,
             compute_eff: float = 1.0, kernels: int = 1) -> OpCost:
    e = spec.efficiency
    t_c = flops / (spec.peak_flops(precision) * compute_eff) if flops else 0.0
    t_m = nbytes / (spec.hbm_Bps * e.memory) if nbytes else 0.0
    return OpCost(name, float(flops), float(nbytes), max(t_c, t_m) + kernels * e.launch_us * 1e-6)


def gemm(name: str, m: int, n: int, k: int, spec: GPUSpec, precision: str, batch: int = 1,
         dtype_bytes: int = 2) -> OpCost:
    """(batch x) an m x k by k x n matrix product: 2mnk FLOPs, reads A and B, writes C."""
    flops = 2.0 * batch * m * n * k
    nbytes = float(batch) * (m * k + k * n + m * n) * dtype_bytes
    return roofline(name, flops, nbytes, spec, precision, gemm_efficiency(m, n, k, spec))


def memory_op(name: str, nbytes: float, spec: GPUSpec, precision: str = "bf16",
              kernels: int = 1) -> OpCost:
    """Bandwidth-bound kernel (layer norm, activation, softmax, dropout, residual, optimizer)."""
    return roofline(name, 0.0, nbytes, spec, precision, kernels=kernels)


def attention_core(b: int, s: int, s_kv: int, heads: int, kv_heads: int, head_dim: int,
                   spec: GPUSpec, precision: str, flash: bool = True, dtype_bytes: int = 2,
                   causal: bool = False) -> list[OpCost]:
    """Scores, softmax and the weighted sum for ``heads`` local heads (forward pass).

    FLOPs are 4 * b * heads * s * s_kv * head_dim (QK^T and AV), halved with ``causal`` (a
    FlashAttention kernel skips masked tiles; the model-FLOPs convention of Megatron counts the
    full square, so the step generator keeps causal=False unless asked).
    ``flash``: one fused kernel that never writes the s x s_kv scores to HBM (FlashAttention);
    otherwise two batched GEMMs plus scale-mask-softmax and dropout passes over the scores in HBM
    (the Megatron-LM 2022 kernels).
    """
    dt = dtype_bytes
    frac = 0.5 if causal else 1.0
    flops = 4.0 * b * heads * s * s_kv * head_dim * frac
    if flash:
        nbytes = b * (s * heads * head_dim * 2 + s_kv * kv_heads * head_dim * 2) * dt
        e = spec.efficiency
        eff = e.gemm_max * e.attention * (s / (s + e.gemm_knee)) * (s_kv / (s_kv + e.gemm_knee))
        return [roofline("flash_attention", flops, nbytes, spec, precision, eff)]
    bh = b * heads
    scores = float(bh) * s * s_kv
    qk = gemm("attn_scores", s, s_kv, head_dim, spec, precision, batch=bh, dtype_bytes=dt)
    av = gemm("attn_values", s, head_dim, s_kv, spec, precision, batch=bh, dtype_bytes=dt)
    if causal:
        qk, av = qk.scaled(0.5), av.scaled(0.5)
    # fused scale+mask+softmax reads and writes the scores; dropout reads them, writes them and a
    # one-byte mask
    softmax = memory_op("softmax", 2 * scores * dt, spec, precision)
    dropout = memory_op("attn_dropout", scores * (2 * dt + 1), spec, precision)
    return [qk, softmax, dropout, av]
