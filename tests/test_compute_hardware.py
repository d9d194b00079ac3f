import pytest
from hypothesis import given, settings, strategies as st

from compute import operators as ops
from compute.hardware import get_gpu, names, spec_from_dict
from topo.errors import InputError

BASE = {"name": "X", "peak_tflops_fp16": 100, "peak_tflops_bf16": 100, "hbm_gb": 80,
        "hbm_GBps": 2000, "scaleup_GBps": 300}


def test_registry_has_the_issue_gpus_with_datasheet_figures():
    assert {"A100-40GB", "A100-80GB", "H100-SXM", "H200", "B200", "MI300X"} <= set(names())
    a = get_gpu("a100_80gb")
    assert a.peak_flops("bf16") == 312e12 and a.hbm_Bps == 2039e9 and a.hbm_gb == 80
    assert get_gpu("A100-40GB").hbm_GBps == 1555
    assert get_gpu("H100-SXM").peak_flops("fp8") == 1979e12
    for n in names():
        s = get_gpu(n)
        assert s.sources, n  # every built-in spec cites its public source
        assert s.peak_flops("bf16") > 0 and s.hbm_bytes > 0 and s.scaleup_Bps > 0


def test_bad_specs_name_the_field():
    with pytest.raises(InputError, match="gpu = 'V200'"):
        get_gpu("V200")
    for k in ("hbm_GBps", "peak_tflops_bf16", "name"):
        d = {kk: v for kk, v in BASE.items() if kk != k}
        with pytest.raises(InputError, match=rf"gpu\.{k}: missing field"):
            get_gpu(d)
    with pytest.raises(InputError, match="gpu.hbm_gb = -1"):
        spec_from_dict({**BASE, "hbm_gb": -1})
    with pytest.raises(InputError, match="gpu.colour"):
        spec_from_dict({**BASE, "colour": 1})
    with pytest.raises(InputError, match="efficiency.gemm_max = 1.5"):
        spec_from_dict({**BASE, "efficiency": {"gemm_max": 1.5}})
    with pytest.raises(InputError, match="precision = 'fp8'"):
        get_gpu("A100-80GB").peak_flops("fp8")


def test_user_spec_overrides_efficiency():
    s = get_gpu({**BASE, "efficiency": {"launch_us": 0.0, "gemm_max": 0.5}})
    assert s.efficiency.gemm_max == 0.5 and s.efficiency.launch_us == 0.0
    assert s.peak_flops("fp16") == 100e12


dims = st.integers(min_value=1, max_value=1 << 16)


@settings(max_examples=200, deadline=None)
@given(dims, dims, dims, st.sampled_from(["A100-80GB", "H100-SXM", "MI300X", "B200"]))
def test_gemm_obeys_roofline_bounds(m, n, k, gpu):
    s = get_gpu(gpu)
    c = ops.gemm("g", m, n, k, s, "bf16")
    assert c.flops == 2.0 * m * n * k
    launch = s.efficiency.launch_us * 1e-6
    # never faster than the compute roof or the memory roof, and never slower than the worse
    # of the two at the efficiencies the model claims
    assert c.seconds >= c.flops / s.peak_flops("bf16") + launch - 1e-15
    assert c.seconds >= c.bytes / s.hbm_Bps + launch - 1e-15
    eff = ops.gemm_efficiency(m, n, k, s)
    bound = max(c.flops / (s.peak_flops("bf16") * eff), c.bytes / (s.hbm_Bps * s.efficiency.memory))
    assert c.seconds == pytest.approx(bound + launch, rel=1e-12)


@settings(max_examples=100, deadline=None)
@given(dims, dims, dims)
def test_gemm_efficiency_grows_with_each_dimension_and_is_capped(m, n, k):
    s = get_gpu("A100-80GB")
    e = ops.gemm_efficiency(m, n, k, s)
    assert 0 < e < s.efficiency.gemm_max
    assert ops.gemm_efficiency(2 * m, n, k, s) > e
    assert ops.gemm_efficiency(m, n, 2 * k, s) > e


def test_attention_flops_and_memory_ops():
    s = get_gpu("H100-SXM")
    b, q, kv, h, g, d = 2, 1024, 1024, 8, 2, 128
    flash = ops.attention_core(b, q, kv, h, g, d, s, "bf16", flash=True)
    plain = ops.attention_core(b, q, kv, h, g, d, s, "bf16", flash=False)
    want = 4.0 * b * h * q * kv * d
    assert sum(c.flops for c in flash) == want == sum(c.flops for c in plain)
    # the unfused path writes the scores to HBM: far more bytes than the fused kernel
    assert sum(c.bytes for c in plain) > 10 * sum(c.bytes for c in flash)
    causal = ops.attention_core(b, q, kv, h, g, d, s, "bf16", flash=True, causal=True)
    assert causal[0].flops == want / 2
    mo = ops.memory_op("ln", 1e9, s)
    assert mo.flops == 0
    assert mo.seconds == pytest.approx(1e9 / (s.hbm_Bps * s.efficiency.memory) +
                                       s.efficiency.launch_us * 1e-6)
