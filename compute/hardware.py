"""GPU specs as data: a registry of TOML files in ``compute/specs`` plus user-defined specs.

A spec holds vendor peak figures (dense Tensor Core FLOP/s per precision, HBM bandwidth and
capacity, scale-up bandwidth per GPU per direction) and the efficiency figures the operator
model applies to them (see ``Efficiency`` and docs/compute.md). Every public figure is cited in
its TOML file.
"""
from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from topo.errors import InputError

SPEC_DIR = Path(__file__).with_name("specs")
PRECISIONS = ("fp16", "bf16", "fp8")
# fp4 (Blackwell NVFP4/MXFP4) is priced for inference only (compute/inference.py): training
# configurations keep PRECISIONS
ALL_PRECISIONS = PRECISIONS + ("fp4",)
# largest peak, capacity or bandwidth a spec takes: x 1e12 (TFLOP/s -> FLOP/s) stays finite
MAX_SPEC = 1e290
REQUIRED = ("name", "peak_tflops_fp16", "peak_tflops_bf16", "hbm_gb", "hbm_GBps", "scaleup_GBps")


@dataclass(frozen=True)
class Efficiency:
    """Achievable fractions of the vendor peaks, one set for every GPU unless a spec overrides it.

    ``gemm_max``: best GEMM efficiency (large, square-ish shapes); ``gemm_knee``: the dimension at
    which one factor of the shape penalty x/(x+knee) halves it; ``memory``: achieved fraction of
    HBM bandwidth for streaming kernels; ``launch_us``: fixed per-kernel cost; ``scaleup``: bus
    bandwidth fraction NCCL reaches inside the scale-up domain; ``scaleup_latency_us``: per ring
    step; ``attention``: efficiency of fused (FlashAttention-style) attention relative to gemm_max;
    ``prefill_host_us``: serving only (compute/inference.py), a further fixed cost per kernel of
    an iteration that runs prompt tokens (the context phase), added to its time (not hidden
    behind GPU work). Calibration: docs/compute.md, docs/inference.md ("Validation").
    """
    gemm_max: float = 0.80
    gemm_knee: float = 96.0
    memory: float = 0.75
    launch_us: float = 5.0
    scaleup: float = 0.78
    scaleup_latency_us: float = 2.0
    attention: float = 0.85
    # Anchor: TensorRT-LLM's published first-token latency of GPT-J 6B on one H100, FP8, batch 1,
    # 128-token prompt: 7 ms (docs/source/performance.md at commit 138f96d, "Low Latency",
    # data from v0.5; https://github.com/NVIDIA/TensorRT-LLM/blob/
    # 138f96d45f90b9667426f7c47297d8c06bafac73/docs/source/performance.md). The serving model
    # prices that context pass at 4.09 ms (gemm_max 0.6395 and memory 0.859 as calibrated in
    # validation/inference_published.py, launch_us 5); the other 2.91 ms over its 337 kernels
    # is 8.6 us per kernel (docs/inference.md, "Validation": the derivation, the other rows it
    # was checked on, and why it is added to the GPU time, not overlapped with it).
    prefill_host_us: float = 8.6


@dataclass(frozen=True)
class GPUSpec:
    name: str
    peak_tflops_fp16: float
    peak_tflops_bf16: float
    hbm_gb: float
    hbm_GBps: float
    scaleup_GBps: float
    peak_tflops_fp8: float = 0.0
    peak_tflops_fp4: float = 0.0
    scaleup_domain: int = 8
    vendor: str = ""
    sources: tuple = ()
    efficiency: Efficiency = field(default_factory=Efficiency)

    def peak_flops(self, precision: str) -> float:
        """Dense peak in FLOP/s for ``precision`` (fp16 | bf16 | fp8 | fp4)."""
        if precision not in ALL_PRECISIONS:
            raise InputError(f"precision = {precision!r}: expected one of "
                             f"{', '.join(ALL_PRECISIONS)}")
        v = getattr(self, f"peak_tflops_{precision}")
        if not v > 0:
            raise InputError(f"precision = {precision!r}: GPU {self.name} has no {precision} "
                             f"Tensor Core peak (peak_tflops_{precision} = {v})")
        return v * 1e12

    @property
    def hbm_bytes(self) -> float:
        return self.hbm_gb * 1e9

    @property
    def hbm_Bps(self) -> float:
        return self.hbm_GBps * 1e9

    @property
    def scaleup_Bps(self) -> float:
        return self.scaleup_GBps * 1e9

    def with_efficiency(self, **kw) -> "GPUSpec":
        return replace(self, efficiency=replace(self.efficiency, **kw))


def spec_from_dict(d: dict, where: str = "gpu") -> GPUSpec:
    """Build a spec from a mapping (a TOML file or a scenario's inline ``[gpu]`` table)."""
    if not isinstance(d, dict):
        raise InputError(f"{where}: expected a table, got {type(d).__name__}")
    known = {f.name for f in fields(GPUSpec)}
    for k in d:
        if k not in known:
            raise InputError(f"{where}.{k}: unknown field (known: {', '.join(sorted(known))})")
    for k in REQUIRED:
        if k not in d:
            raise InputError(f"{where}.{k}: missing field")
    kw = dict(d)
    for k in ("peak_tflops_fp16", "peak_tflops_bf16", "peak_tflops_fp8", "peak_tflops_fp4",
              "hbm_gb", "hbm_GBps", "scaleup_GBps"):
        if k in kw:
            v = kw[k]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                    or v < 0 or (k not in ("peak_tflops_fp8", "peak_tflops_fp4") and v == 0) \
                    or v > MAX_SPEC:
                raise InputError(f"{where}.{k} = {v!r}: expected a positive number (at most "
                                 f"{MAX_SPEC:g})")
            kw[k] = float(v)
    dom = kw.get("scaleup_domain", 8)
    if isinstance(dom, bool) or not isinstance(dom, int) or dom < 1:
        raise InputError(f"{where}.scaleup_domain = {dom!r}: expected a positive integer")
    for k in ("name", "vendor"):
        if k in kw and not isinstance(kw[k], str):
            raise InputError(f"{where}.{k} = {kw[k]!r}: expected a string")
    if not kw["name"].strip():
        raise InputError(f"{where}.name = {kw['name']!r}: expected a non-empty string")
    src = kw.get("sources", ())
    if not isinstance(src, (list, tuple)) or not all(isinstance(x, str) for x in src):
        raise InputError(f"{where}.sources = {src!r}: expected a list of strings (citations)")
    kw["sources"] = tuple(src)
    eff = kw.pop("efficiency", {})
    if not isinstance(eff, dict):
        raise InputError(f"{where}.efficiency: expected a table")
    ekn = {f.name for f in fields(Efficiency)}
    for k, v in eff.items():
        if k not in ekn:
            raise InputError(f"{where}.efficiency.{k}: unknown field (known: {', '.join(sorted(ekn))})")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise InputError(f"{where}.efficiency.{k} = {v!r}: expected a finite number >= 0")
    for k in ("gemm_max", "memory", "scaleup", "attention"):
        if k in eff and not 0 < eff[k] <= 1:
            raise InputError(f"{where}.efficiency.{k} = {eff[k]!r}: expected 0 < x <= 1")
    return GPUSpec(efficiency=Efficiency(**{k: float(v) for k, v in eff.items()}), **kw)


def spec_with_overrides(d: dict, where: str = "gpu") -> GPUSpec:
    """A what-if GPU: ``base`` (a built-in name or a .toml path) with some fields replaced,
    e.g. ``{base = "h100_sxm", hbm_GBps = 8000, peak_tflops_bf16 = 2000, hbm_gb = 192}``.
    ``efficiency`` merges into the base's; ``name`` defaults to the base's name followed by the
    changed fields. Every field is checked as in a full spec (unknown fields and non-positive
    figures are refused, named ``gpu.<field>``)."""
    base = d["base"]
    if not isinstance(base, str):
        raise InputError(f"{where}.base = {base!r}: expected a GPU name or a .toml file")
    try:
        b = get_gpu(base)
    except InputError as e:
        msg = str(e)
        raise InputError(f"{where}.base{msg[3:] if msg.startswith('gpu') else ': ' + msg}") \
            from None
    known = {f.name for f in fields(GPUSpec)}
    over = {k: v for k, v in d.items() if k != "base"}
    for k in over:
        if k not in known:
            raise InputError(f"{where}.{k}: unknown field (known: base, "
                             f"{', '.join(sorted(known))})")
    merged = {f.name: getattr(b, f.name) for f in fields(GPUSpec) if f.name != "efficiency"}
    merged["sources"] = list(b.sources)
    eff = {f.name: getattr(b.efficiency, f.name) for f in fields(Efficiency)}
    oe = over.pop("efficiency", {})
    if not isinstance(oe, dict):
        raise InputError(f"{where}.efficiency: expected a table")
    eff.update(oe)
    merged.update(over)
    merged["efficiency"] = eff
    if "name" not in over:
        changes = [f"{k}={v:g}" if isinstance(v, (int, float)) and not isinstance(v, bool)
                   else f"{k}={v}" for k, v in over.items()]
        changes += [f"efficiency.{k}={v:g}" if isinstance(v, (int, float)) else f"efficiency.{k}"
                    for k, v in oe.items()]
        if changes:
            merged["name"] = f"{b.name} ({', '.join(changes)})"
    return spec_from_dict(merged, where)


def _registry() -> dict:
    out = {}
    for p in sorted(SPEC_DIR.glob("*.toml")):
        with open(p, "rb") as f:
            spec = spec_from_dict(tomllib.load(f), where=p.name)
        out[spec.name.lower()] = spec
        out[p.stem.lower()] = spec
    return out


_REG: dict | None = None


def names() -> list[str]:
    """Canonical names of the built-in GPUs."""
    global _REG
    _REG = _REG or _registry()
    return sorted({s.name for s in _REG.values()})


def get_gpu(gpu) -> GPUSpec:
    """A GPUSpec from a name (case-insensitive, e.g. "A100-80GB" or "a100_80gb"), a mapping
    (user-defined spec, or ``base`` plus the fields to change: ``spec_with_overrides``) or a
    path to a TOML file."""
    global _REG
    if isinstance(gpu, GPUSpec):
        return gpu
    if isinstance(gpu, dict):
        if "base" in gpu:
            return spec_with_overrides(gpu)
        return spec_from_dict(gpu)
    if not isinstance(gpu, str):
        raise InputError(f"gpu = {gpu!r}: expected a GPU name or a spec table")
    if gpu.endswith(".toml"):
        p = Path(gpu)
        if not p.exists():
            raise InputError(f"gpu = {gpu!r}: file not found")
        try:
            data = tomllib.loads(p.read_bytes().decode("utf-8"))
        except IsADirectoryError:
            raise InputError(f"gpu = {gpu!r}: is a directory, expected a TOML file") from None
        except OSError as e:
            raise InputError(f"gpu = {gpu!r}: cannot be read ({e.strerror})") from None
        except UnicodeDecodeError as e:
            raise InputError(f"gpu = {gpu!r}: not UTF-8 text (byte {e.start})") from None
        except tomllib.TOMLDecodeError as e:
            raise InputError(f"gpu = {gpu!r}: malformed TOML: {e}") from None
        except RecursionError:
            raise InputError(f"gpu = {gpu!r}: nested too deeply") from None
        return spec_from_dict(data, where=p.name)
    _REG = _REG or _registry()
    key = gpu.lower()
    if key not in _REG:
        raise InputError(f"gpu = {gpu!r}: unknown GPU (known: {', '.join(names())})")
    return _REG[key]
