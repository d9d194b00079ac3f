import json

import pytest

from compute.memory import activation_bytes_per_layer, memory_per_gpu
from compute.model import get_model
from compute.parallel import ParallelConfig


def test_activation_formulas_follow_korthikanti_table2():
    m = get_model("gpt3-175b")
    s, b, h, a, t = 2048, 1, 12288, 96, 8
    base = dict(tp=t, global_batch=1, flash_attention=False)
    none = activation_bytes_per_layer(m, ParallelConfig(**base))
    assert none == pytest.approx(s * b * h * (10 + 24 / t + 5 * a * s / (h * t)))
    spn = activation_bytes_per_layer(m, ParallelConfig(**base, sp=True))
    assert spn == pytest.approx(s * b * h / t * (34 + 5 * a * s / h))
    sel = activation_bytes_per_layer(m, ParallelConfig(**base, sp=True, recompute="selective"))
    assert sel == pytest.approx(s * b * h / t * 34)
    full = activation_bytes_per_layer(m, ParallelConfig(**base, recompute="full"))
    assert full == pytest.approx(2 * s * b * h)
    assert full < sel < spn < none


def test_gpt3_needs_recompute_on_a100_80gb_and_fits_with_sp_selective():
    # Korthikanti et al. 2022 (Figure 1 / section 6): without recomputation GPT-3 on TP 8 x PP 8
    # exceeds 80 GB; sequence parallelism + selective recomputation fits
    base = dict(tp=8, pp=8, global_batch=64, flash_attention=False)
    no = memory_per_gpu("gpt3-175b", dict(base), "A100-80GB")
    yes = memory_per_gpu("gpt3-175b", dict(base, sp=True, recompute="selective"), "A100-80GB")
    assert not no.fits and yes.fits
    assert "does NOT fit" in no.message() and "fits" in yes.message()
    d = no.as_dict()
    assert d["total_GB"] > d["capacity_GB"] == 80.0


def test_sharded_optimizer_divides_optimizer_state_by_dp():
    base = dict(tp=8, pp=8, dp=16, global_batch=1536)
    a = memory_per_gpu("gpt3-175b", dict(base), "H100-SXM")
    b = memory_per_gpu("gpt3-175b", dict(base, dist_opt=True), "H100-SXM")
    assert b.optimizer_bytes == pytest.approx(a.optimizer_bytes / 16)
    assert a.weights_bytes == b.weights_bytes
    # 2 bytes of weights per parameter on the busiest stage
    m = get_model("gpt3-175b")
    n = (m.layer_params * m.layers / 8 + m.embedding_params) / 8
    assert a.weights_bytes == pytest.approx(2 * n)
    assert a.optimizer_bytes == pytest.approx(12 * n)


def test_training_workload_refuses_what_does_not_fit(tmp_path):
    from netcosim.workload_kinds.training import MemoryInfeasible
    from netcosim.scenario import load_scenario

    sc = {
        "name": "big", "topology": {"kind": "two_tier", "nodes": 8, "gpus_per_node": 8},
        "workload": {"kind": "training", "gpu": "A100-40GB", "model": "gpt3-175b",
                     "parallel": {"tp": 8, "pp": 8, "global_batch": 8}},
    }
    p = tmp_path / "s.json"
    p.write_text(json.dumps(sc))
    with pytest.raises(MemoryInfeasible, match="does NOT fit") as e:
        load_scenario(p).prepare(check_engine=False)
    assert e.value.report["fits"] is False
