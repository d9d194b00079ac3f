"""Per-layer operator lists (forward and backward) for one tensor-parallel rank.

An item is one operator or one communication point on a rank's stream:
``Item(kind, seconds, flops, label, group, op, nbytes, layer_end, attn)`` where kind is
COMPUTE, COMM_LOCAL (a tensor-parallel collective priced analytically inside the scale-up domain)
or COMM_NET (a collective that goes onto the network as transfers).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from compute import operators as ops
from compute.hardware import GPUSpec
from compute.model import TransformerConfig
from compute.parallel import ParallelConfig

COMPUTE, COMM_LOCAL, COMM_NET = 0, 1, 2
# communication kinds (extra["ckind"] codes and report names)
CKIND = {"compute": 0, "tp": 1, "cp": 2, "ep": 3, "pp": 4, "dp": 5, "dp_ag": 6, "sync": 7}
CKIND_NAMES = {v: k for k, v in CKIND.items()}
BWD_MEM_FACTOR = 1.5
BWD_OP = {"all_gather": "reduce_scatter", "reduce_scatter": "all_gather",
          "all_reduce": "all_reduce", "all_to_all": "all_to_all", "all_to_all_v": "all_to_all_v"}


@dataclass(frozen=True)
class Item:
    kind: int
    seconds: float = 0.0
    flops: float = 0.0
    label: str = "fwd"
    group: str = ""  # tp | cp | ep for communication
    op: str = ""
    nbytes: int = 0
    layer_end: int = -1
    attn: bool = False  # holds the attention core (selective recompute target)
    tp_s: float = 0.0  # seconds of analytic tensor-parallel communication inside this item
    mem: bool = False  # a bandwidth-bound kernel (its backward moves ~1.5x the bytes, not 2x)
    matrix: tuple = ()  # all_to_all_v: bytes local rank i sends to local rank j (tuple of rows)


def transposed(matrix: tuple) -> tuple:
    return tuple(zip(*matrix)) if matrix else matrix


def ep_rank_shares(model: TransformerConfig, ep: int) -> np.ndarray:
    """Share of the routed token-expert assignments that lands on each rank of an expert-
    parallel group of ``ep`` (experts placed contiguously: rank j holds experts
    j E/ep .. (j+1) E/ep - 1, as Megatron-LM places them)."""
    return model.expert_shares().reshape(ep, -1).sum(axis=1)


def ring_seconds(op: str, g: int, nbytes: float, spec: GPUSpec) -> float:
    """Ring collective on a non-blocking scale-up domain: bus bytes over NCCL bus bandwidth plus
    one latency per ring step."""
    if g < 2:
        return 0.0
    e = spec.efficiency
    bw = spec.scaleup_Bps * e.scaleup
    steps = 2 * (g - 1) if op == "all_reduce" else g - 1
    return steps * (nbytes / g) / bw + steps * e.scaleup_latency_us * 1e-6


class LayerModel:
    """Prices one transformer layer on one rank for a model and parallel configuration.

    ``ep_index``: the rank's place in its expert-parallel group; with an expert imbalance its
    experts receive ``ep_load`` times the balanced number of tokens (the all-to-alls then move
    a bytes matrix that follows the shares)."""

    def __init__(self, model: TransformerConfig, par: ParallelConfig, spec: GPUSpec,
                 tp_local: bool, ep_index: int = 0):
        self.m, self.p, self.spec, self.tp_local = model, par, spec, tp_local
        self.ep_index = ep_index
        self.ep_share = None  # per EP rank share of the routed tokens (None: balanced)
        self.ep_load = 1.0
        if model.experts and model.expert_imbalance is not None:
            self.ep_share = ep_rank_shares(model, par.ep)
            self.ep_load = float(self.ep_share[ep_index] * par.ep)
        self.prec = "fp16" if par.precision == "fp16" else ("fp8" if par.precision == "fp8" else "bf16")
        self.dt = 2  # activations in 16-bit (fp8 GEMMs still exchange 16-bit activations)
        t, cp = par.tp, par.cp
        self.T = par.micro_batch * model.seq // cp  # local tokens
        self.Tsp = self.T // t if par.sp else self.T  # tokens on which norms/dropout run

    # ------------------------------------------------------------------ building blocks
    def _c(self, cost: ops.OpCost, label="fwd", attn=False) -> Item:
        return Item(COMPUTE, cost.seconds, cost.flops, label, attn=attn, mem=cost.flops == 0)

    def _tp(self, op: str) -> list[Item]:
        t = self.p.tp
        if t < 2:
            return []
        nbytes = self.T * self.m.hidden * self.dt
        if self.tp_local:
            sec = ring_seconds(op, t, nbytes, self.spec)
            return [Item(COMM_LOCAL, sec, 0.0, "tp", group="tp", op=op, nbytes=nbytes, tp_s=sec)]
        return [Item(COMM_NET, 0.0, 0.0, "tp", group="tp", op=op, nbytes=nbytes)]

    def _mem(self, name: str, nbytes: float) -> ops.OpCost:
        return ops.memory_op(name, nbytes, self.spec, self.prec)

    # ------------------------------------------------------------------ one layer, forward
    def forward(self, moe: bool | None = None) -> list[Item]:
        """One layer's forward items: an expert layer (``moe`` None or true, for a mixture of
        experts) or a dense one (DeepSeek-V3's first layers)."""
        m, p, sp, dt = self.m, self.p, self.spec, self.dt
        moe = bool(m.experts) if moe is None else moe and bool(m.experts)
        t, cp, b = p.tp, p.cp, p.micro_batch
        h, T, Tsp = m.hidden, self.T, self.Tsp
        heads, kvh = m.heads // t, max(m.g // t, 1)
        g = ops.gemm
        items: list[Item] = []
        norm = self._mem("layernorm", 2 * Tsp * h * dt)
        drop_res = self._mem("dropout_residual", Tsp * h * (3 * dt + 1))
        gather_op = "all_gather" if p.sp else None
        reduce_op = "reduce_scatter" if p.sp else "all_reduce"
        items.append(self._c(norm))
        if gather_op:
            items += self._tp(gather_op)
        proj = None
        for name, n_in, n_out, split in m.attn_gemms():
            if name == "attn_proj":  # row-parallel: this rank's heads in, the whole width out
                proj = g(name, T, n_out, n_in // t, sp, self.prec)
            elif split:
                items.append(self._c(g(name, T, n_out // t, n_in, sp, self.prec)))
            else:
                # MLA's down-projections to the latents run whole on every tensor rank; count
                # their useful FLOPs once
                c = g(name, T, n_out, n_in, sp, self.prec)
                items.append(replace(self._c(c), flops=c.flops / t))
                if name == "kv_down" or name == "q_down":  # the latent's RMSNorm
                    items.append(self._c(self._mem("latent_norm", 2 * T * n_out * dt)))
        ad = m.attn_head_dim
        if cp > 1:
            # context parallelism as Llama 3 runs it (arXiv:2407.21783, section 3.3.2): all-gather
            # the keys and values the QKV GEMM produced (this rank's KV heads, the whole
            # sequence), then attend with the local queries; the backward reduce-scatters dK, dV
            kv_bytes = int(b * m.seq * 2 * kvh * ad * dt)
            items.append(Item(COMM_NET, label="cp", group="cp", op="all_gather", nbytes=kv_bytes))
        core = ops.attention_core(b, m.seq // cp, m.seq, heads, kvh, ad, sp, self.prec,
                                  flash=p.flash_attention)
        items += [self._c(c, attn=True) for c in core]
        items.append(self._c(proj))
        items += self._tp(reduce_op)
        items += [self._c(drop_res), self._c(norm)]
        if gather_op:
            items += self._tp(gather_op)
        f = m.f // t
        if moe:
            ep = p.ep
            fe = m.expert_f // t
            # the router runs replicated on every tensor rank; count its useful FLOPs once
            r = g("router", T, m.experts, h, sp, self.prec)
            items.append(replace(self._c(r), flops=r.flops / t))
            if m.shared_experts:
                # always-active experts: a dense MLP of shared x expert width on local tokens
                fs = fe * m.shared_experts
                items += [self._c(g("shared_fc1", T, fs * (m.mlp_mats - 1), h, sp, self.prec)),
                          self._c(self._mem("shared_activation", m.mlp_mats * T * fs * dt)),
                          self._c(g("shared_fc2", T, h, fs, sp, self.prec))]
            a2a = T * m.top_k * h * dt
            dispatch = combine = None
            if ep > 1:
                if self.ep_share is None:
                    dispatch = combine = Item(COMM_NET, label="ep", group="ep", op="all_to_all",
                                              nbytes=a2a)
                else:
                    # every rank sends the tokens routed to rank j's experts to rank j: row i,
                    # column j = a2a x share_j; the combine sends them back (the transpose)
                    row = np.rint(a2a * self.ep_share).astype(np.int64)
                    mat = tuple(tuple(int(x) for x in row) for _ in range(ep))
                    dispatch = Item(COMM_NET, label="ep", group="ep", op="all_to_all_v",
                                    nbytes=a2a, matrix=mat)
                    combine = replace(dispatch, matrix=transposed(mat))
                items.append(dispatch)
            local_e = m.experts // ep
            # tokens per local expert: balanced, or this rank's share of the routed tokens
            tok = max(int(round(T * m.top_k * self.ep_load / local_e)), 1)
            fc1 = g("expert_fc1", tok, fe * (m.mlp_mats - 1), h, sp, self.prec, batch=local_e)
            act = self._mem("activation", (m.mlp_mats) * tok * local_e * fe * dt)
            fc2 = g("expert_fc2", tok, h, fe, sp, self.prec, batch=local_e)
            items += [self._c(fc1), self._c(act), self._c(fc2)]
            if combine is not None:
                items.append(combine)
        else:
            fc1 = g("fc1", T, f * (m.mlp_mats - 1), h, sp, self.prec)
            act = self._mem("activation", m.mlp_mats * T * f * dt)
            fc2 = g("fc2", T, h, f, sp, self.prec)
            items += [self._c(fc1), self._c(act), self._c(fc2)]
        items += self._tp(reduce_op)
        items.append(self._c(drop_res))
        return items

    # ------------------------------------------------------------------ one layer, backward
    def backward(self, fwd: list[Item]) -> list[Item]:
        """Mirror of the forward: compute twice as heavy (data and weight gradients), gathers
        become reduce-scatters and vice versa; recomputation is inserted as configured."""
        out: list[Item] = []
        rec = self.p.recompute
        if rec == "full":  # re-run the whole layer (with its communication) first
            out += [replace(it, label="recompute") if it.kind == COMPUTE else it for it in fwd]
        attn_seen = False
        for it in reversed(fwd):
            if it.kind == COMPUTE:
                if it.attn and rec == "selective" and not attn_seen:
                    # re-run the attention core (softmax, QK^T, AV) just before its backward
                    out += [replace(x, label="recompute", attn=False) for x in fwd if x.attn]
                    attn_seen = True
                # GEMMs: data and weight gradients, 2x the work; bandwidth-bound kernels read the
                # saved input and the incoming gradient and write one gradient (~1.5x the bytes)
                f = BWD_MEM_FACTOR if it.mem else 2.0
                out.append(replace(it, seconds=f * it.seconds, flops=2 * it.flops, label="bwd"))
            else:
                out.append(replace(it, op=BWD_OP[it.op], matrix=transposed(it.matrix)))
        return out

    # ------------------------------------------------------------------ ends of the model
    def embedding(self) -> Item:
        return self._c(self._mem("embedding", 2 * self.Tsp * self.m.hidden * self.dt))

    def head(self) -> list[Item]:
        """Final norm, vocabulary-parallel logits GEMM and cross-entropy (forward)."""
        m, t = self.m, self.p.tp
        v = m.padded_vocab(t) // t  # this rank's vocabulary shard, padding rows included
        norm = self._mem("final_norm", 2 * self.Tsp * m.hidden * self.dt)
        logits = ops.gemm("logits", self.T, v, m.hidden, self.spec, self.prec)
        xent = self._mem("cross_entropy", 3 * self.T * v * 4)
        items = [self._c(norm)]
        if self.p.sp:
            items += self._tp("all_gather")
        # the padding rows take time but are not model FLOPs: count the real vocabulary's share
        lg = self._c(logits)
        if v * t != m.vocab:
            lg = replace(lg, flops=2.0 * self.T * m.hidden * m.vocab / t)
        return items + [lg, self._c(xent)]

    def optimizer_seconds(self, params_local: float) -> float:
        """Adam step: reads grad, master weight, two moments (fp32) and writes them back plus the
        16-bit weight: 30 bytes per local parameter."""
        return self._mem("optimizer", 30.0 * params_local).seconds
