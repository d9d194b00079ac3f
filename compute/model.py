"""Transformer configuration and its analytical parameter and FLOP counts."""
from __future__ import annotations

from dataclasses import dataclass, fields

from topo.errors import InputError


@dataclass(frozen=True)
class TransformerConfig:
    layers: int
    hidden: int
    heads: int
    seq: int = 2048
    vocab: int = 51200
    kv_heads: int = 0  # 0: same as heads (multi-head attention); fewer: grouped-query attention
    ffn: int = 0  # 0: 4 * hidden
    experts: int = 0  # 0: dense MLP; >0: mixture of experts with ``top_k`` routing
    top_k: int = 1
    gated_mlp: bool = False  # SwiGLU-style MLP with three matrices
    tied_embeddings: bool = True  # false: a separate output-layer matrix (Llama 3)
    # the vocabulary is padded to a multiple of vocab_multiple x TP for the vocabulary-parallel
    # embedding and logits (Megatron-LM's --make-vocab-size-divisible-by, default 128 there;
    # 1 here: pad only to a multiple of TP, so a vocabulary TP divides is used as given)
    vocab_multiple: int = 1
    name: str = ""

    def __post_init__(self):
        for k in ("layers", "hidden", "heads", "seq", "vocab", "vocab_multiple"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(f"model.{k} = {v!r}: expected a positive integer")
        for k in ("kv_heads", "ffn", "experts", "top_k"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise InputError(f"model.{k} = {v!r}: expected an integer >= 0")
        if self.hidden % self.heads:
            raise InputError(f"model.heads = {self.heads}: does not divide hidden = {self.hidden}")
        if self.kv_heads and self.heads % self.kv_heads:
            raise InputError(f"model.kv_heads = {self.kv_heads}: does not divide heads = {self.heads}")
        if self.experts and not 1 <= self.top_k <= self.experts:
            raise InputError(f"model.top_k = {self.top_k}: expected 1..experts ({self.experts})")
        # a string such as "no" must not silently turn the gated MLP on
        for k in ("gated_mlp", "tied_embeddings"):
            if not isinstance(getattr(self, k), bool):
                raise InputError(f"model.{k} = {getattr(self, k)!r}: expected true or false")
        if not isinstance(self.name, str):
            raise InputError(f"model.name = {self.name!r}: expected a string")

    @classmethod
    def from_dict(cls, d: dict) -> "TransformerConfig":
        known = {f.name for f in fields(cls)}
        for k in d:
            if k not in known:
                raise InputError(f"model.{k}: unknown field (known: {', '.join(sorted(known))})")
        for k in ("layers", "hidden", "heads"):
            if k not in d:
                raise InputError(f"model.{k}: missing field")
        return cls(**d)

    # ------------------------------------------------------------------ derived sizes
    @property
    def g(self) -> int:
        return self.kv_heads or self.heads

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def f(self) -> int:
        return self.ffn or 4 * self.hidden

    @property
    def mlp_mats(self) -> int:
        return 3 if self.gated_mlp else 2

    @property
    def qkv_out(self) -> int:
        return self.hidden + 2 * self.g * self.head_dim

    @property
    def attn_params(self) -> int:
        h = self.hidden
        return h * self.qkv_out + h * h + 4 * h  # weights + two layer-norm scales/biases

    @property
    def mlp_params(self) -> int:
        """One expert's (or the dense) MLP weights."""
        return self.mlp_mats * self.hidden * self.f

    @property
    def layer_params(self) -> int:
        n_mlp = max(self.experts, 1)
        router = self.hidden * self.experts
        return self.attn_params + n_mlp * self.mlp_params + router

    @property
    def embedding_params(self) -> int:
        """The input embedding (vocab x hidden; the real vocabulary, no padding)."""
        return self.vocab * self.hidden

    @property
    def output_params(self) -> int:
        """The output layer's own matrix: 0 when it shares the input embedding."""
        return 0 if self.tied_embeddings else self.vocab * self.hidden

    @property
    def params(self) -> int:
        return self.layers * self.layer_params + self.embedding_params + self.output_params

    def padded_vocab(self, tp: int) -> int:
        """Vocabulary rows actually allocated and multiplied with ``tp``-way vocabulary
        parallelism: the vocabulary rounded up to a multiple of vocab_multiple x tp (Megatron-LM
        pads the same way, with ``make_vocab_size_divisible_by`` = 128 by default)."""
        q = self.vocab_multiple * tp
        return -(-self.vocab // q) * q

    # ------------------------------------------------------------------ FLOPs (per sequence)
    def attn_core_flops(self) -> float:
        """QK^T and AV of one layer, forward, one sequence (full square, Megatron convention)."""
        return 4.0 * self.seq * self.seq * self.heads * self.head_dim

    def layer_fwd_flops(self) -> float:
        s, h = self.seq, self.hidden
        gemms = 2.0 * s * h * self.qkv_out + 2.0 * s * h * h
        k = self.top_k if self.experts else 1
        gemms += 2.0 * s * h * self.f * self.mlp_mats * k + 2.0 * s * h * self.experts
        return gemms + self.attn_core_flops()

    def logits_fwd_flops(self) -> float:
        return 2.0 * self.seq * self.hidden * self.vocab

    def model_flops_per_sequence(self) -> float:
        """Forward + backward (3x forward) of one sequence, no recomputation."""
        return 3.0 * (self.layers * self.layer_fwd_flops() + self.logits_fwd_flops())

    def recompute_flops_per_sequence(self, recompute: str) -> float:
        if recompute == "full":
            return self.layers * self.layer_fwd_flops()
        if recompute == "selective":
            return self.layers * self.attn_core_flops()
        return 0.0


PRESETS = {
    # Korthikanti et al. 2022, Table 3 / Table 5 models (vocab 51200, sequence 2048)
    "22b": dict(layers=48, hidden=6144, heads=64),
    "gpt3-175b": dict(layers=96, hidden=12288, heads=96),
    "mt-nlg-530b": dict(layers=105, hidden=20480, heads=128),
    "1t": dict(layers=128, hidden=25600, heads=160),
    # Llama 3 (Llama Team, AI @ Meta, "The Llama 3 Herd of Models", arXiv:2407.21783, Table 3):
    # grouped-query attention with 8 key/value heads, SwiGLU MLP, untied input and output
    # embeddings, 8K pre-training context. Table 3 gives a vocabulary of 128,000 for all three;
    # the released configurations (Hugging Face config.json, "vocab_size") have 128,256 (256
    # reserved special tokens). The 405B preset keeps the paper's 128,000 (Meta's config:
    # 128,256), the 8B and 70B presets the released 128,256. vocab_multiple = 128 pads like
    # Megatron-LM: 128,256 -> 129,024 rows at TP 8 (128,000 needs no padding up to TP 8).
    # Parameters: 8.03e9, 70.56e9, 405.85e9 (tests/test_compute_llama.py).
    "llama3-8b": dict(layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=128256,
                      seq=8192, gated_mlp=True, tied_embeddings=False, vocab_multiple=128),
    "llama3-70b": dict(layers=80, hidden=8192, heads=64, kv_heads=8, ffn=28672, vocab=128256,
                       seq=8192, gated_mlp=True, tied_embeddings=False, vocab_multiple=128),
    "llama3-405b": dict(layers=126, hidden=16384, heads=128, kv_heads=8, ffn=53248,
                        vocab=128000, seq=8192, gated_mlp=True, tied_embeddings=False,
                        vocab_multiple=128),
}


def get_model(m) -> TransformerConfig:
    if isinstance(m, TransformerConfig):
        return m
    if isinstance(m, str):
        if m.lower() not in PRESETS:
            raise InputError(f"model = {m!r}: unknown preset (known: {', '.join(PRESETS)})")
        return TransformerConfig(name=m, **PRESETS[m.lower()])
    if isinstance(m, dict):
        d = dict(m)
        preset = d.pop("preset", None)
        if preset is not None:
            if not isinstance(preset, str):
                raise InputError(f"model.preset = {preset!r}: expected a preset name "
                                 f"(one of {', '.join(PRESETS)})")
            if preset.lower() not in PRESETS:
                raise InputError(f"model.preset = {preset!r}: unknown (known: {', '.join(PRESETS)})")
            d = {**PRESETS[preset.lower()], "name": preset, **d}
        return TransformerConfig.from_dict(d)
    raise InputError(f"model = {m!r}: expected a preset name or a table")
