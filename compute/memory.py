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

Every pipeline stage is priced and the busiest one is reported. A stage holds the weights of its
layers (``parallel.layer_split``), the input embedding on the first stage and the output layer
on the last (one shared matrix on a single stage with tied embeddings; the padded vocabulary),
and at its peak the activations of the units in flight: walking the stage's 1F1B order
(``pipeline.order``), a forward adds its layers' activations and a backward frees them. With an
even split this is the classical count: the first stage holds p micro-batches of L/p layers
(the whole model's L layers), interleaving (1 + (p-1)/(p v)) times that. With an uneven split
the busiest stage need not be the first: Llama 3 405B's 7, 8 x 14, 7 on 16 stages peaks on the
second stage (8 layers x 15 micro-batches against 7 x 16 on the first).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compute import pipeline
from compute.hardware import GPUSpec, get_gpu
from compute.model import TransformerConfig, get_model
from compute.parallel import ParallelConfig, layer_split, validate


@dataclass(frozen=True)
class MemoryReport:
    weights_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    capacity_bytes: float
    stage: int = 0  # the pipeline stage these figures are for (the busiest)

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
                "capacity_GB": gb(self.capacity_bytes), "fits": self.fits,
                "stage": self.stage}

    def message(self) -> str:
        d = self.as_dict()
        verdict = "fits" if self.fits else "does NOT fit"
        return (f"memory per GPU {d['total_GB']} GB of {d['capacity_GB']} GB ({verdict}; busiest "
                f"pipeline stage {self.stage}): weights {d['weights_GB']}, grads {d['grads_GB']}, "
                f"optimizer {d['optimizer_GB']}, activations {d['activations_GB']} GB")


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


def params_per_stage(m: TransformerConfig, par: ParallelConfig) -> list[float]:
    """Parameters held by one GPU of every pipeline stage (its layers, the input embedding on
    the first stage, the output layer on the last; vocabulary padded as the model runs it)."""
    lay = layer_split(m, par)
    off = np.concatenate([[0], np.cumsum(lay)])
    vocab_mat = m.padded_vocab(par.tp) * m.hidden
    out = []
    for s in range(par.pp):
        # the stage's layers (its own experts with EP; DeepSeek-V3's dense first layers)
        n = sum(m.layers_params(off[c * par.pp + s], off[c * par.pp + s + 1], par.ep)
                for c in range(par.vp))
        if s == 0:
            n += vocab_mat
        if s == par.pp - 1 and (par.pp > 1 or not m.tied_embeddings):
            n += vocab_mat
        out.append(n / par.tp)
    return out


def params_on_busiest_stage(m: TransformerConfig, par: ParallelConfig) -> float:
    """Parameters held by one GPU of the stage holding the most."""
    return max(params_per_stage(m, par))


def activations_per_stage(m: TransformerConfig, par: ParallelConfig) -> list[float]:
    """Activation bytes of one GPU of every pipeline stage at its peak: walking the stage's 1F1B
    order, a forward unit adds its layers' activations (and, on position 0, the embedding
    output), the matching backward frees them."""
    p, v = par.pp, par.vp
    lay = layer_split(m, par)
    per_layer = activation_bytes_per_layer(m, par)
    # embedding output (dropout mask and value) of a micro-batch
    emb = m.seq / par.cp * par.micro_batch * m.hidden * 3 / (par.tp if par.sp else 1)
    out = []
    for s in range(p):
        ph, ch, _ = pipeline.order(p, max(par.micro_batches, 1), v, s)
        unit = np.array([lay[c * p + s] * per_layer + (emb if c == 0 and s == 0 else 0.0)
                         for c in range(v)])
        live = np.cumsum(np.where(ph == pipeline.FWD, 1.0, -1.0) * unit[ch])
        out.append(float(live.max()))
    return out


def memory_per_gpu(model, parallel, gpu) -> MemoryReport:
    """The busiest pipeline stage's memory (the stage with the largest total)."""
    m = get_model(model)
    par = parallel if isinstance(parallel, ParallelConfig) else ParallelConfig.from_dict(dict(parallel))
    par = validate(m, par) if not par.dp else par
    spec: GPUSpec = get_gpu(gpu)
    best = None
    for s, (n, act) in enumerate(zip(params_per_stage(m, par), activations_per_stage(m, par))):
        rep = MemoryReport(2.0 * n, par.grad_bytes * n, 12.0 * n / (par.dp if par.dist_opt else 1),
                           act, spec.hbm_bytes, s)
        if best is None or rep.total_bytes > best.total_bytes:
            best = rep
    return best
