"""Transformer configuration and its analytical parameter and FLOP counts.

Mixture-of-experts models: ``experts`` routed experts of width ``expert_ffn`` (0: ``ffn``),
``top_k`` of them per token, plus ``shared_experts`` always-active experts of the same width;
the first ``dense_layers`` layers have a dense MLP of width ``ffn`` instead (DeepSeek-V3).
``expert_imbalance`` skews the routing (``expert_shares``). Multi-head latent attention
(``kv_lora_rank`` > 0, DeepSeek-V2/V3) is priced as its GEMMs: the query and key-value
down-projections to the latents (``q_lora_rank``, ``kv_lora_rank`` plus the shared rotary key
of ``rope_head_dim``), their up-projections to ``heads`` heads of ``head_size`` (+
``rope_head_dim`` for queries and keys), and the output projection.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from topo.errors import InputError


def capped_shares(p, top_k: int) -> np.ndarray:
    """Expert shares ``p`` (any positive weights) normalised, with none above 1/top_k: a token
    picks top_k different experts, so an expert receives at most that share of the
    assignments; the excess is spread over the others in proportion to their shares."""
    p = np.asarray(p, dtype=float)
    p = p / p.sum()
    cap = 1.0 / top_k
    for _ in range(len(p)):
        over = p > cap * (1 + 1e-12)
        if not over.any():
            break
        excess = (p[over] - cap).sum()
        p[over] = cap
        free = ~over & (p < cap)
        p[free] += excess * p[free] / p[free].sum() if p[free].sum() > 0 else \
            excess / max(free.sum(), 1)
    return p / p.sum()


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
    # per-head dimension of queries, keys and values; 0: hidden / heads
    head_size: int = 0
    # mixture of experts: expert width (0: ffn), always-active shared experts, dense first layers
    expert_ffn: int = 0
    shared_experts: int = 0
    dense_layers: int = 0
    # multi-head latent attention (kv_lora_rank > 0): latent widths and the decoupled RoPE width
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    rope_head_dim: int = 0
    # routing skew: None (balanced), {zipf = s[, seed = n]}, {shares = [...]} or a list of shares
    expert_imbalance: object = None
    # the longest context (input + output tokens) the released model serves: its position
    # limit, the bound on a serving scenario's workload.context; 0: not known, no bound (a
    # custom table). Not ``seq``, which is a training sequence length. Serving only.
    max_context: int = 0

    def __post_init__(self):
        for k in ("layers", "hidden", "heads", "seq", "vocab", "vocab_multiple"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(f"model.{k} = {v!r}: expected a positive integer")
        for k in ("kv_heads", "ffn", "experts", "top_k", "head_size", "expert_ffn",
                  "shared_experts", "dense_layers", "q_lora_rank", "kv_lora_rank",
                  "rope_head_dim", "max_context"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise InputError(f"model.{k} = {v!r}: expected an integer >= 0")
        if not self.head_size and self.hidden % self.heads:
            raise InputError(f"model.heads = {self.heads}: does not divide hidden = {self.hidden} "
                             f"(or give model.head_size)")
        for k in ("expert_ffn", "shared_experts", "dense_layers"):
            if getattr(self, k) and not self.experts:
                raise InputError(f"model.{k} = {getattr(self, k)}: only for a mixture of experts "
                                 f"(model.experts = 0)")
        if self.dense_layers >= self.layers and self.experts:
            raise InputError(f"model.dense_layers = {self.dense_layers}: leaves no expert layer "
                             f"(model.layers = {self.layers})")
        if not self.kv_lora_rank:
            for k in ("q_lora_rank", "rope_head_dim"):
                if getattr(self, k):
                    raise InputError(f"model.{k} = {getattr(self, k)}: only with multi-head latent "
                                     f"attention (model.kv_lora_rank > 0)")
        elif self.kv_heads and self.kv_heads != self.heads:
            raise InputError(f"model.kv_heads = {self.kv_heads}: latent attention (kv_lora_rank > 0) "
                             f"has one key and value per head (kv_heads = heads or 0)")
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
        object.__setattr__(self, "expert_imbalance", _imbalance(self.expert_imbalance,
                                                                self.experts))

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
        return self.head_size or self.hidden // self.heads

    @property
    def mla(self) -> bool:
        """Multi-head latent attention (DeepSeek-V2/V3)."""
        return self.kv_lora_rank > 0

    @property
    def q_dim(self) -> int:
        """Width of all query heads (hidden for the classic shapes)."""
        return self.heads * self.head_dim

    @property
    def qk_head_dim(self) -> int:
        """Per-head width of queries and keys (with MLA's decoupled rotary part)."""
        return self.head_dim + self.rope_head_dim

    @property
    def attn_head_dim(self) -> float:
        """Mean of the query-key and the value head widths: attention FLOPs and FlashAttention
        bytes are those of heads of this width (exact; = head_dim without MLA)."""
        return (self.qk_head_dim + self.head_dim) / 2

    @property
    def f(self) -> int:
        return self.ffn or 4 * self.hidden

    @property
    def mlp_mats(self) -> int:
        return 3 if self.gated_mlp else 2

    @property
    def qkv_out(self) -> int:
        return self.q_dim + 2 * self.g * self.head_dim

    def attn_gemms(self) -> list[tuple[str, int, int, bool]]:
        """The attention GEMMs of a layer as (name, in, out, split over TP): the input is
        ``in`` wide, the output ``out``; ``split``: column- (or, for the output projection,
        row-) parallel over TP; MLA's down-projections run whole on every TP rank."""
        h = self.hidden
        if not self.mla:
            return [("qkv", h, self.qkv_out, True), ("attn_proj", self.q_dim, h, True)]
        heads, qk, d = self.heads, self.qk_head_dim, self.head_dim
        out = []
        if self.q_lora_rank:
            out += [("q_down", h, self.q_lora_rank, False),
                    ("q_up", self.q_lora_rank, heads * qk, True)]
        else:
            out.append(("q_proj", h, heads * qk, True))
        out += [("kv_down", h, self.kv_lora_rank + self.rope_head_dim, False),
                ("kv_up", self.kv_lora_rank, heads * 2 * d, True),
                ("attn_proj", heads * d, h, True)]
        return out

    @property
    def attn_gemm_params(self) -> int:
        return sum(a * b for _, a, b, _ in self.attn_gemms())

    @property
    def attn_params(self) -> int:
        # weights + two layer-norm scales/biases (+ MLA's two latent RMSNorm scales)
        return self.attn_gemm_params + 4 * self.hidden + self.q_lora_rank + self.kv_lora_rank

    @property
    def mlp_params(self) -> int:
        """The dense MLP's weights (one expert's when the experts have the dense width)."""
        return self.mlp_mats * self.hidden * self.f

    @property
    def expert_f(self) -> int:
        """Width of one expert (routed or shared)."""
        return self.expert_ffn or self.f

    @property
    def expert_params(self) -> int:
        """One expert's MLP weights."""
        return self.mlp_mats * self.hidden * self.expert_f

    def is_moe_layer(self, i: int) -> bool:
        """Whether transformer layer i (0-based) has experts (the first dense_layers do not)."""
        return bool(self.experts) and i >= self.dense_layers

    def layer_params_of(self, moe: bool, ep: int = 1) -> float:
        """Parameters of one layer held by one GPU of an expert-parallel group of ``ep``
        (all of them for ep = 1): attention, the dense MLP or the experts (routed / ep, shared,
        router)."""
        if not moe:
            return self.attn_params + self.mlp_params
        return (self.attn_params + (self.experts / ep + self.shared_experts) * self.expert_params
                + self.hidden * self.experts)

    @property
    def layer_params(self) -> int:
        """Parameters of one expert layer (of one layer for a dense model)."""
        return int(self.layer_params_of(bool(self.experts)))

    def layers_params(self, lo: int, hi: int, ep: int = 1) -> float:
        """Parameters of layers lo..hi-1 on one GPU of an expert-parallel group of ``ep``."""
        lo, hi = int(lo), int(hi)
        n_dense = max(0, min(hi, self.dense_layers if self.experts else hi) - lo)
        return float(n_dense * self.layer_params_of(False, ep)
                + (hi - lo - n_dense) * self.layer_params_of(True, ep))

    @property
    def active_params(self) -> float:
        """Parameters a token passes through (top_k routed + shared experts), embeddings
        included."""
        n_moe = self.layers - self.dense_layers if self.experts else 0
        moe = (self.attn_params + (self.top_k + self.shared_experts) * self.expert_params
               + self.hidden * self.experts)
        return (n_moe * moe + (self.layers - n_moe) * self.layer_params_of(False)
                + self.embedding_params + self.output_params)

    def expert_shares(self) -> np.ndarray:
        """Share of the routed token-expert assignments each expert receives (sums to 1): equal
        without ``expert_imbalance``; Zipf (share of the r-th most popular expert ~ r^-s,
        expert 0 the most popular, or the popularity ranks shuffled with ``seed``) or the given
        shares. A token picks top_k different experts, so no expert can receive more than 1/top_k
        of the assignments: larger shares are capped there and the excess spread over the
        others in proportion to their shares."""
        E = self.experts
        if not E:
            return np.zeros(0)
        imb = self.expert_imbalance
        if imb is None:
            return np.full(E, 1.0 / E)
        if imb[0] == "zipf":
            p = np.arange(1, E + 1, dtype=float) ** -imb[1]
            if imb[2] is not None:
                p = p[np.random.default_rng(imb[2]).permutation(E)]
        else:
            p = np.asarray(imb[1], dtype=float)
        return capped_shares(p, self.top_k)

    @property
    def n_moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.experts else 0

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
        return int(round(self.layers_params(0, self.layers))) + self.embedding_params \
            + self.output_params

    def padded_vocab(self, tp: int) -> int:
        """Vocabulary rows actually allocated and multiplied with ``tp``-way vocabulary
        parallelism: the vocabulary rounded up to a multiple of vocab_multiple x tp (Megatron-LM
        pads the same way, with ``make_vocab_size_divisible_by`` = 128 by default)."""
        q = self.vocab_multiple * tp
        return -(-self.vocab // q) * q

    # ------------------------------------------------------------------ FLOPs (per sequence)
    def attn_core_flops(self) -> float:
        """QK^T and AV of one layer, forward, one sequence (full square, Megatron convention)."""
        return 4.0 * self.seq * self.seq * self.heads * self.attn_head_dim

    def layer_fwd_flops(self, moe: bool | None = None) -> float:
        """Forward FLOPs of one layer for one sequence: an expert layer (``moe`` None or true,
        for a mixture of experts) or a dense one."""
        s, h = self.seq, self.hidden
        moe = bool(self.experts) if moe is None else moe and bool(self.experts)
        gemms = 2.0 * s * self.attn_gemm_params
        if moe:
            gemms += (2.0 * s * (self.top_k + self.shared_experts) * self.expert_params
                      + 2.0 * s * h * self.experts)
        else:
            gemms += 2.0 * s * self.mlp_params
        return gemms + self.attn_core_flops()

    def layers_fwd_flops(self) -> float:
        """Forward FLOPs of all transformer layers for one sequence."""
        n_moe = self.n_moe_layers
        return (n_moe * self.layer_fwd_flops(True)
                + (self.layers - n_moe) * self.layer_fwd_flops(False))

    def logits_fwd_flops(self) -> float:
        return 2.0 * self.seq * self.hidden * self.vocab

    def model_flops_per_sequence(self) -> float:
        """Forward + backward (3x forward) of one sequence, no recomputation."""
        return 3.0 * (self.layers_fwd_flops() + self.logits_fwd_flops())

    def recompute_flops_per_sequence(self, recompute: str) -> float:
        if recompute == "full":
            return self.layers_fwd_flops()
        if recompute == "selective":
            return self.layers * self.attn_core_flops()
        return 0.0


def _imbalance(v, experts: int):
    """``expert_imbalance`` in canonical (hashable) form: None, ("zipf", s, seed or None) or
    ("shares", (share, ...)). Accepts {zipf = s[, seed = n]}, {shares = [...]} or a list."""
    where = "model.expert_imbalance"
    if v is None or v == {} or v == "none":
        return None
    if isinstance(v, tuple) and v and v[0] in ("zipf", "shares"):  # already canonical
        return v
    if isinstance(v, list):
        v = {"shares": v}
    if not isinstance(v, dict):
        raise InputError(f"{where} = {v!r}: expected {{zipf = s}}, {{shares = [...]}} or a list "
                         f"of per-expert token shares")
    if not experts:
        raise InputError(f"{where}: only for a mixture of experts (model.experts = 0)")
    for k in v:
        if k not in ("zipf", "seed", "shares"):
            raise InputError(f"{where}.{k}: unknown key (allowed: zipf, seed, shares)")
    if ("zipf" in v) == ("shares" in v):
        raise InputError(f"{where}: give exactly one of zipf and shares")
    if "zipf" in v:
        z = v["zipf"]
        if isinstance(z, bool) or not isinstance(z, (int, float)) or not math.isfinite(z) or z < 0:
            raise InputError(f"{where}.zipf = {z!r}: expected a number >= 0 (0: balanced)")
        seed = v.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise InputError(f"{where}.seed = {seed!r}: expected an integer >= 0")
        return ("zipf", float(z), seed)
    if "seed" in v:
        raise InputError(f"{where}.seed: only with zipf")
    sh = v["shares"]
    if not isinstance(sh, (list, tuple)) or len(sh) != experts:
        raise InputError(f"{where}.shares: expected {experts} numbers (one per expert), got "
                         f"{len(sh) if isinstance(sh, (list, tuple)) else sh!r}")
    for i, x in enumerate(sh):
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
            raise InputError(f"{where}.shares[{i}] = {x!r}: expected a number >= 0")
    if not sum(sh) > 0:
        raise InputError(f"{where}.shares: all zero")
    return ("shares", tuple(float(x) for x in sh))


PRESETS = {
    # Korthikanti et al. 2022, Table 3 / Table 5 models (vocab 51200, sequence 2048).
    # max_context: GPT-3 175B's context window n_ctx = 2048 (Brown et al. 2020,
    # arXiv:2005.14165, section 2.1); MT-NLG 530B was trained on sequences of 2048 (Smith et
    # al. 2022, arXiv:2201.11990). 22B and 1T are the paper's sizing points, no released
    # model: no known maximum (0).
    "22b": dict(layers=48, hidden=6144, heads=64),
    "gpt3-175b": dict(layers=96, hidden=12288, heads=96, max_context=2048),
    "mt-nlg-530b": dict(layers=105, hidden=20480, heads=128, max_context=2048),
    "1t": dict(layers=128, hidden=25600, heads=160),
    # Llama 3 (Llama Team, AI @ Meta, "The Llama 3 Herd of Models", arXiv:2407.21783, Table 3):
    # grouped-query attention with 8 key/value heads, SwiGLU MLP, untied input and output
    # embeddings, 8K pre-training context. Table 3 gives a vocabulary of 128,000 for all three;
    # the released configurations (Hugging Face config.json, "vocab_size") have 128,256 (256
    # reserved special tokens). The 405B preset keeps the paper's 128,000 (Meta's config:
    # 128,256), the 8B and 70B presets the released 128,256. vocab_multiple = 128 pads like
    # Megatron-LM: 128,256 -> 129,024 rows at TP 8 (128,000 needs no padding up to TP 8).
    # Parameters: 8.03e9, 70.56e9, 405.85e9 (tests/test_compute_llama.py).
    # max_context 131,072: these presets are the models of that paper, i.e. the Llama 3.1
    # release (the 405B exists only there; section 3.4.2, long-context pre-training to 128K;
    # Llama-3.1-8B/70B/405B config.json max_position_embeddings 131072), which Llama 3.3 70B
    # shares; seq stays the 8K pre-training length. The first Llama 3 8B/70B (April 2024) have
    # the same dimensions but an 8,192-token limit: {preset = "llama3-70b", max_context = 8192}.
    "llama3-8b": dict(layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=128256,
                      seq=8192, gated_mlp=True, tied_embeddings=False, vocab_multiple=128,
                      max_context=131072),
    "llama3-70b": dict(layers=80, hidden=8192, heads=64, kv_heads=8, ffn=28672, vocab=128256,
                       seq=8192, gated_mlp=True, tied_embeddings=False, vocab_multiple=128,
                       max_context=131072),
    "llama3-405b": dict(layers=126, hidden=16384, heads=128, kv_heads=8, ffn=53248,
                        vocab=128000, seq=8192, gated_mlp=True, tied_embeddings=False,
                        vocab_multiple=128, max_context=131072),
    # Mixtral 8x7B (Jiang et al., "Mixtral of Experts", arXiv:2401.04088, Table 1): dim 4096,
    # 32 layers, 32 heads of 128, 8 KV heads, SwiGLU experts of 14,336, 8 experts top-2,
    # vocabulary 32,000, context 32,768 (the released config.json has the same values, untied
    # embeddings). Paper: 46.7B parameters, 13B (12.9B) active; here 46.70e9 / 12.88e9.
    "mixtral-8x7b": dict(layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=32000,
                         seq=32768, experts=8, top_k=2, gated_mlp=True, tied_embeddings=False,
                         vocab_multiple=128, max_context=32768),
    # Mixtral 8x22B (Mistral AI, "Cheaper, Better, Faster, Stronger", 17 April 2024: 141B
    # parameters, 39B active, 64K context; dimensions from the released config.json of
    # Mixtral-8x22B-v0.1: hidden 6144, 56 layers, 48 heads, 8 KV heads, experts of 16,384,
    # 8 experts top-2, vocabulary 32,000, max_position_embeddings 65,536, untied embeddings).
    # Here 140.62e9 / 39.16e9. max_context: the 64K context, 65,536.
    "mixtral-8x22b": dict(layers=56, hidden=6144, heads=48, kv_heads=8, ffn=16384, vocab=32000,
                          seq=65536, experts=8, top_k=2, gated_mlp=True, tied_embeddings=False,
                          vocab_multiple=128, max_context=65536),
    # DeepSeek-V3 (DeepSeek-AI, "DeepSeek-V3 Technical Report", arXiv:2412.19437, sections 2.1
    # and 4.2): 61 layers, hidden 7168; MLA with 128 heads of 128, KV compression d_c = 512,
    # query compression d_c' = 1536, decoupled RoPE head dimension 64; all FFNs but the first
    # three are MoE: 1 shared + 256 routed experts of intermediate size 2048, 8 routed experts per
    # token; the first three layers dense (intermediate 18,432 in the released config.json,
    # "intermediate_size"); vocabulary 128K (config.json: 129,280), untied output layer;
    # pre-training sequence 4K. 671B total, 37B activated per token (without the 14B
    # multi-token-prediction module, which is not modelled); here 671.0e9 / 37.5e9 (the
    # paper's 37B excludes the input embedding: 36.6e9 here). max_context: the report's 128K
    # after its long-context extension (section 4.3, YaRN: 4K -> 32K -> 128K), 131,072 (the
    # released config.json's max_position_embeddings is 163,840, YaRN's 40 x 4K; 128K is what
    # the report evaluates and states).
    "deepseek-v3": dict(layers=61, hidden=7168, heads=128, head_size=128, ffn=18432,
                        vocab=129280, seq=4096, experts=256, top_k=8, shared_experts=1,
                        expert_ffn=2048, dense_layers=3, q_lora_rank=1536, kv_lora_rank=512,
                        rope_head_dim=64, gated_mlp=True, tied_embeddings=False,
                        vocab_multiple=128, max_context=131072),
    # A GPT-4-class 1.8T MoE, as the FullFlat co-design study assumes it (Tithi et al.,
    # "Scaling Intelligence: Designing Data Centers for Next-Gen Language Models",
    # arXiv:2506.15006: "GPT-4 with 1.8 trillion parameters", a mixture of experts). OpenAI
    # published no architecture; the figures behind the 1.8T are SemiAnalysis' (D. Patel and
    # G. Wong, "GPT-4 Architecture, Infrastructure, Training Dataset, Costs, Vision, MoE",
    # July 2023): ~1.8T parameters over 120 layers, 16 experts of ~111B MLP parameters each,
    # 2 routed per token, ~55B shared attention parameters, 8K pre-training context. Our
    # assumption: a GPT-3-style layer (GeLU MLP of 4h, multi-head attention) with h = 10,752,
    # which gives exactly those shares (8 h^2 x 120 = 111.0B per expert, 4 h^2 x 120 = 55.5B of
    # attention), 96 heads of 112, and the cl100k_base tokenizer's 100,256-token vocabulary
    # (tiktoken), tied embeddings. Here 1.832e12 / 0.279e12 active (the rumour: ~280B).
    # No max_context: the architecture is an assumption (OpenAI served 8K and 32K versions).
    "gpt4-1.8t-moe": dict(layers=120, hidden=10752, heads=96, vocab=100256, seq=8192,
                          experts=16, top_k=2, vocab_multiple=128),
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
