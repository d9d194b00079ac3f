"""Parallel configuration, its validation, and rank placement.

Global rank order follows Megatron-LM's default (tensor fastest, then context, then data, then
pipeline): rank = tp + TP * (cp + CP * (dp + DP * pp)). Expert parallelism is carved out of the
data-parallel dimension (EP consecutive DP ranks form an expert group). Placement maps ranks to
hosts; the default packs consecutive ranks into the same scale-up domain (``host_group``), so
tensor-parallel groups sit inside one domain when it is large enough.

Pipeline layer split (``layer_split``): pipeline position c * pp + s (model chunk c of stage s)
holds ``stage_layers[c * pp + s]`` transformer layers. Given explicitly, the list has pp x vp
entries summing to model.layers, each >= 1, except the first and the last position, which may
hold 0 (they still run the embedding and the output layer, like Megatron-LM's layouts with an
embedding-only or loss-only stage). Not given: an even split when pp x vp divides the layers;
otherwise every position gets floor(L / (pp vp)) and the L mod (pp vp) remaining layers go one
each to the middle positions 1, 2, ..., then to the first, then to the last, so the first and the
last position, which also run the embedding and the output layer, hold the fewest. Llama 3 405B
(126 layers) on 16 stages: 7, 8 x 14, 7, the layout of the Llama 3 paper (section 3.3.2: one
layer fewer on the first and on the last stage); on 16 x 8 virtual stages: 0, 1 x 126, 0 (the
first chunk only the embedding, the last only the output layer and loss).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

import numpy as np

from compute.model import TransformerConfig
from topo.errors import InputError
from topo.arrays import unique

RECOMPUTE = ("none", "selective", "full")
PRECISIONS = ("bf16", "fp16", "fp8")
INT_FIELDS = ("tp", "pp", "dp", "cp", "ep", "vp", "micro_batch", "global_batch", "grad_bytes")
BOOL_FIELDS = ("sp", "dist_opt", "flash_attention", "overlap_grad_reduce")
# sequences per step: far beyond any published run; the 1F1B orders walk one entry per
# micro-batch, and 2**63 - 1 stopped with a numpy "array is too big" (exit 1)
MAX_GLOBAL_BATCH = 10**6


@dataclass(frozen=True)
class ParallelConfig:
    tp: int = 1
    pp: int = 1
    dp: int = 0  # 0: derived from the GPU count
    cp: int = 1
    ep: int = 1
    vp: int = 1  # virtual pipeline stages (model chunks) per pipeline rank: interleaved 1F1B
    sp: bool = False  # sequence parallelism with TP (reduce-scatter/all-gather instead of all-reduce)
    micro_batch: int = 1
    global_batch: int = 1
    recompute: str = "none"
    dist_opt: bool = False  # sharded optimizer (ZeRO-1 / Megatron distributed optimizer)
    precision: str = "bf16"
    flash_attention: bool = True
    grad_bytes: int = 4  # gradient element size in the data-parallel reduction (fp32 main grads)
    bucket_mb: float = 40.0  # data-parallel gradient bucket, MB of gradient
    overlap_grad_reduce: bool = True
    # layers per pipeline position (model chunk c of stage s is position c * pp + s); empty:
    # derived by ``layer_split`` (even, or Megatron-style lighter first and last positions)
    stage_layers: tuple = ()

    def __post_init__(self):
        # Types first, so nothing downstream (n_gpus, memory, placement) ever computes with a
        # string or a list; relations between the degrees are checked by ``validate``.
        for k in INT_FIELDS:
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < (0 if k == "dp" else 1):
                raise InputError(f"parallel.{k} = {v!r}: expected a positive integer"
                                 + (" (or 0: derive)" if k == "dp" else ""))
        if self.global_batch > MAX_GLOBAL_BATCH:
            raise InputError(f"parallel.global_batch = {self.global_batch}: at most "
                             f"{MAX_GLOBAL_BATCH:,} sequences per step")
        for k in BOOL_FIELDS:  # "no" or 0 must not be read as a truth value
            v = getattr(self, k)
            if not isinstance(v, bool):
                raise InputError(f"parallel.{k} = {v!r}: expected true or false")
        for k, allowed in (("recompute", RECOMPUTE), ("precision", PRECISIONS)):
            v = getattr(self, k)
            if not isinstance(v, str) or v not in allowed:
                raise InputError(f"parallel.{k} = {v!r}: expected one of {', '.join(allowed)}")
        b = self.bucket_mb
        if isinstance(b, bool) or not isinstance(b, (int, float)) or not math.isfinite(b) \
                or b <= 0:
            raise InputError(f"parallel.bucket_mb = {b!r}: expected a finite number > 0")
        sl = self.stage_layers
        if not isinstance(sl, (list, tuple)):
            raise InputError(f"parallel.stage_layers = {sl!r}: expected a list of layer counts, "
                             f"one per pipeline position")
        for i, n in enumerate(sl):
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise InputError(f"parallel.stage_layers[{i}] = {n!r}: expected an integer >= 0")
        if not isinstance(sl, tuple):  # hashable, and a caller's list cannot change it later
            object.__setattr__(self, "stage_layers", tuple(sl))

    @classmethod
    def from_dict(cls, d: dict) -> "ParallelConfig":
        known = {f.name for f in fields(cls)}
        for k in d:
            if k not in known:
                raise InputError(f"parallel.{k}: unknown field (known: {', '.join(sorted(known))})")
        return cls(**d)

    @property
    def micro_batches(self) -> int:
        """Micro-batches per pipeline per step."""
        return self.global_batch // (self.micro_batch * self.dp)

    @property
    def n_gpus(self) -> int:
        return self.tp * self.cp * self.dp * self.pp


def validate(model: TransformerConfig, par: ParallelConfig, n_gpus: int | None = None) -> ParallelConfig:
    """Check every degree; return the config with ``dp`` filled in. InputError names the field."""
    ParallelConfig.__post_init__(par)  # types (a config may have been built with replace())
    mp = par.tp * par.cp * par.pp
    dp = par.dp
    if n_gpus is not None:
        if n_gpus % mp:
            raise InputError(f"parallel: tp x cp x pp = {par.tp} x {par.cp} x {par.pp} = {mp} does not "
                             f"divide the GPU count {n_gpus}")
        if dp and dp * mp != n_gpus:
            raise InputError(f"parallel.dp = {dp}: tp x cp x pp x dp = {dp * mp} but there are "
                             f"{n_gpus} GPUs")
        dp = n_gpus // mp
    elif not dp:
        dp = 1
    if model.heads % par.tp:
        raise InputError(f"parallel.tp = {par.tp}: does not divide model.heads = {model.heads}")
    if model.g % par.tp and par.tp % model.g:
        raise InputError(f"parallel.tp = {par.tp}: incompatible with model.kv_heads = {model.g}")
    if model.f % par.tp:
        raise InputError(f"parallel.tp = {par.tp}: does not divide the FFN size {model.f}")
    if model.experts and model.expert_f % par.tp:
        raise InputError(f"parallel.tp = {par.tp}: does not divide the expert FFN size "
                         f"{model.expert_f}")
    # the vocabulary needs no check: it is padded to a multiple of TP (model.padded_vocab)
    layer_split(model, par)
    if model.seq % par.cp:
        raise InputError(f"parallel.cp = {par.cp}: does not divide model.seq = {model.seq}")
    if par.sp and model.seq % (par.tp * par.cp):
        raise InputError(f"parallel.sp: tp x cp = {par.tp * par.cp} does not divide model.seq = {model.seq}")
    if par.ep > 1:
        if not model.experts:
            raise InputError(f"parallel.ep = {par.ep}: the model has no experts (model.experts = 0)")
        if model.experts % par.ep:
            raise InputError(f"parallel.ep = {par.ep}: does not divide model.experts = {model.experts}")
        if dp % par.ep:
            raise InputError(f"parallel.ep = {par.ep}: does not divide the data-parallel degree {dp}")
    if par.global_batch % (par.micro_batch * dp):
        raise InputError(f"parallel.global_batch = {par.global_batch}: not divisible by micro_batch x "
                         f"dp = {par.micro_batch} x {dp}")
    m = par.global_batch // (par.micro_batch * dp)
    if par.vp > 1:
        if par.pp == 1:
            raise InputError(f"parallel.vp = {par.vp}: interleaving needs pp > 1")
        if m % par.pp:
            raise InputError(f"parallel.vp = {par.vp}: interleaved 1F1B needs the micro-batch count "
                             f"({m}) to be a multiple of pp = {par.pp}")
    return replace(par, dp=dp)


def too_few_layers(layers: int, positions: int) -> bool:
    """Whether ``layers`` transformer layers cannot give one to every pipeline position but
    the first and the last (which may hold only the embedding or the output layer)."""
    return layers < positions - 2


def layer_split(model: TransformerConfig, par: ParallelConfig) -> tuple[int, ...]:
    """Transformer layers of every pipeline position (pp x vp entries, position c * pp + s);
    ``parallel.stage_layers`` when given, else the default split (module docstring)."""
    npos, L = par.pp * par.vp, model.layers
    where = f"pp x vp = {par.pp} x {par.vp} = {npos} pipeline positions"
    sl = par.stage_layers
    if sl:
        if len(sl) != npos:
            raise InputError(f"parallel.stage_layers: {len(sl)} entries, but {where} need one each")
        for i, n in enumerate(sl):
            if n < 1 and not (npos > 1 and i in (0, npos - 1)):
                raise InputError(f"parallel.stage_layers[{i}] = {n}: expected >= 1 (only the first "
                                 f"and the last position may hold no layer)")
        if sum(sl) != L:
            raise InputError(f"parallel.stage_layers: the entries sum to {sum(sl)}, but "
                             f"model.layers = {L}")
        return tuple(int(n) for n in sl)
    if too_few_layers(L, npos):
        raise InputError(f"parallel: {where}, but model.layers = {L}: too few layers for one on "
                         f"every position but the first and the last")
    base, extra = divmod(L, npos)
    split = [base] * npos
    for i in (list(range(1, npos - 1)) + [0, npos - 1])[:extra]:
        split[i] += 1
    return tuple(split)


def stage_layer_counts(model: TransformerConfig, par: ParallelConfig) -> list[int]:
    """Transformer layers held by every pipeline stage (all its model chunks)."""
    lay = layer_split(model, par)
    return [sum(lay[c * par.pp + s] for c in range(par.vp)) for s in range(par.pp)]


def rank_grid(par: ParallelConfig) -> np.ndarray:
    """int array (pp, dp, cp, tp) of global ranks (Megatron order: tp fastest)."""
    n = par.tp * par.cp * par.dp * par.pp
    return np.arange(n, dtype=np.int64).reshape(par.pp, par.dp, par.cp, par.tp)


def place(par: ParallelConfig, n_hosts: int, host_group: np.ndarray | None = None,
          placement="packed") -> np.ndarray:
    """host id of every global rank.

    ``packed``: ranks fill hosts in order of (scale-up domain, host id), so consecutive ranks (a
    TP group first) share a domain. ``spread``: round-robin over domains (a TP group is split
    across domains, the worst case). A list gives the host of each rank explicitly.
    """
    n = par.n_gpus
    if n > n_hosts:
        raise InputError(f"parallel: {n} GPUs needed but the topology has {n_hosts} hosts")
    grp = np.zeros(n_hosts, dtype=np.int64) if host_group is None else np.asarray(host_group)
    order = np.lexsort((np.arange(n_hosts), grp))  # domain-major
    if isinstance(placement, (list, tuple, np.ndarray)):
        for i, h in enumerate(placement):  # host ids: integers only (0.5 must not truncate)
            if isinstance(h, (bool, np.bool_)) or not isinstance(h, (int, np.integer)):
                raise InputError(f"placement[{i}] = {h!r}: expected a host id (an integer)")
        p = np.asarray(placement, dtype=np.int64).reshape(-1)
        if p.shape != (n,):
            raise InputError(f"placement: {len(p)} hosts given for {n} ranks")
        bad = np.flatnonzero((p < 0) | (p >= n_hosts))
        if bad.size:
            raise InputError(f"placement[{bad[0]}] = {p[bad[0]]}: host does not exist "
                             f"(hosts are 0..{n_hosts - 1})")
        if len(unique(p)) != n:
            raise InputError("placement: hosts must be distinct (one rank per host)")
        return p
    if placement == "packed":
        return order[:n].astype(np.int64)
    if placement == "spread":
        groups = [order[grp[order] == gid] for gid in unique(grp)]
        seq = []
        depth = max(len(g) for g in groups)
        for i in range(depth):
            seq.extend(int(g[i]) for g in groups if i < len(g))
        return np.asarray(seq[:n], dtype=np.int64)
    raise InputError(f"placement = {placement!r}: expected packed, spread or a list of hosts")
