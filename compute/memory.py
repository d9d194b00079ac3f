"""Per-GPU memory feasibility: weights, gradients, optimizer state and activations.

Bytes per parameter (mixed precision with Adam, as Megatron-LM keeps them): 16-bit weights (2),
gradients of ``grad_bytes`` (4: fp32 main gradients), and 12 bytes of optimizer state (fp32
master weights, two fp32 moments), divided by DP with a sharded optimizer.

Activations per layer and micro-batch follow Korthikanti et al. 2022 (section 4 and Table 2),
with s = sequence / CP, b = micro-batch, h = hidden, a = heads, t = TP:
  no recompute, no SP:       s b h (10 + 24/t + 5 a s / (h t))
  no recompute, SP:          s b h / t (34 + 5 a s / h)
  selective (+SP if on):     s b h (10 + 24/t) or s b h / t * 34
  full:                      2 s b h (the layer input only; /t with SP)
(the 5as/h attention-score term disappears with FlashAttention, which keeps no s x s tensor.)
The first pipeline stage holds the most micro-batches in flight: p in 1F1B, which multiplies the
per-stage activation by p, i.e. the whole model's L layers; interleaving adds (1 + (p-1)/(p v)).
"""
from __future__ import annotations

from dataclasses import dataclass

from compute.hardware import GPUSpec, get_gpu
from compute.model import TransformerConfig, get_model
from compute.parallel import ParallelConfig, validate


@dataclass(frozen=True)
class MemoryReport:
    weights_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    capacity_bytes: float

    @property
    def total_bytes(self) -> float:
        return self.weights_bytes + self.grads_bytes + self.optimizer_bytes + self.activations_bytes

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes

    def as_dict(self) -> dict:
        gb = lambda x: round(x / 1e9, 3)  # noqa: E731
        return {"weights_GB": gb(self.weights_bytes), "grads_GB": gb(self.grads_bytes),
                "optimizer_GB": gb(self.optimizer_bytes),
                "activations_GB": gb(self.activations_bytes), "total_GB": gb(self.total_bytes),
                "capacity_GB": gb(self.capacity_bytes), "fits": self.fits}

    def message(self) -> str:
        d = self.as_dict()
        verdict = "fits" if self.fits else "does NOT fit"
        return (f"memory per GPU {d['total_GB']} GB of {d['capacity_GB']} GB ({verdict}): weights "
                f"{d['weights_GB']}, grads {d['grads_GB']}, optimizer {d['optimizer_GB']}, "
                f"activations {d['activations_GB']} GB")


def activation_bytes_per_layer(m: TransformerConfig, par: ParallelConfig) -> float:
    s, b, h, a, t = m.seq / par.cp, par.micro_batch, m.hidden, m.heads, par.tp
    score = 0.0 if par.flash_attention else 5.0 * a * s / h
    if par.recompute == "full":
        return 2.0 * s * b * h / (t if par.sp else 1)
    if par.recompute == "selective":
        score = 0.0
    if par.sp:
        return s * b * h / t * (34.0 + score * 1.0)
    return s * b * h * (10.0 + 24.0 / t + score / t)


def params_on_busiest_stage(m: TransformerConfig, par: ParallelConfig) -> float:
    """Parameters held by one GPU of the first pipeline stage (it also holds the embedding)."""
    per_layer = m.attn_params + m.mlp_params * max(m.experts, 1) / par.ep + m.hidden * m.experts
    n = per_layer * m.layers / par.pp + m.embedding_params
    return n / par.tp


def memory_per_gpu(model, parallel, gpu) -> MemoryReport:
    m = get_model(model)
    par = parallel if isinstance(parallel, ParallelConfig) else ParallelConfig.from_dict(dict(parallel))
    par = validate(m, par) if not par.dp else par
    spec: GPUSpec = get_gpu(gpu)
    n = params_on_busiest_stage(m, par)
    weights = 2.0 * n
    grads = par.grad_bytes * n
    opt = 12.0 * n / (par.dp if par.dist_opt else 1)
    p, v = par.pp, par.vp
    inflight_layers = m.layers  # L/p layers x p micro-batches in flight on the first stage
    if v > 1:
        inflight_layers *= 1 + (p - 1) / (p * v)
    elif par.micro_batches < p and par.micro_batches:
        inflight_layers = m.layers / p * par.micro_batches
    act = activation_bytes_per_layer(m, par) * inflight_layers
    # embedding output (dropout mask and value) on the first stage
    act += m.seq / par.cp * par.micro_batch * m.hidden * 3 / (par.tp if par.sp else 1) * p
    return MemoryReport(weights, grads, opt, act, spec.hbm_bytes)
