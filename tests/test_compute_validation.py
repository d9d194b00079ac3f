"""The training workload refuses every malformed field with an InputError naming it (never a
traceback, never a silent truth value), validates its collective algorithm up front, and never
hands out a shared collective template."""
import copy

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compute import comm
from compute.parallel import ParallelConfig
from netcosim.workload_kinds.training import build
from topo.builders import build as build_topo
from topo.errors import InputError

TOPO = build_topo("two_tier", {"nodes": 2, "gpus_per_node": 4, "nic_gbps": 200})
MODEL = {"layers": 4, "hidden": 256, "heads": 4, "seq": 128, "vocab": 512}
GPU_TABLE = {"name": "x", "peak_tflops_fp16": 900, "peak_tflops_bf16": 900, "hbm_gb": 80,
             "hbm_GBps": 3000, "scaleup_GBps": 400}
SPEC = {"kind": "training", "gpu": "H100-SXM", "model": MODEL,
        "parallel": {"tp": 4, "pp": 2, "global_batch": 4}}


def spec_with(path, value):
    s = copy.deepcopy(SPEC)
    x = s
    for p in path[:-1]:
        x = x[p]
    x[path[-1]] = value
    return s


@pytest.mark.parametrize("path,value,field", [
    (["model"], {"preset": 5}, "workload.model.preset = 5"),
    (["model", "name"], 5, "workload.model.name = 5"),
    (["model", "gated_mlp"], "yes", "workload.model.gated_mlp = 'yes'"),
    (["gpu"], {**GPU_TABLE, "sources": 5}, "workload.gpu.sources = 5"),
    (["gpu"], {**GPU_TABLE, "name": 5}, "workload.gpu.name = 5"),
    (["gpu"], {**GPU_TABLE, "hbm_GBps": float("nan")}, "workload.gpu.hbm_GBps = nan"),
    (["parallel", "bucket_mb"], "x", "workload.parallel.bucket_mb = 'x'"),
    (["parallel", "bucket_mb"], [1], "workload.parallel.bucket_mb = [1]"),
    (["parallel", "bucket_mb"], True, "workload.parallel.bucket_mb = True"),
    (["parallel", "bucket_mb"], float("inf"), "workload.parallel.bucket_mb = inf"),
    (["parallel", "sp"], "no", "workload.parallel.sp = 'no'"),
    (["parallel", "dist_opt"], "no", "workload.parallel.dist_opt = 'no'"),
    (["parallel", "flash_attention"], 0, "workload.parallel.flash_attention = 0"),
    (["parallel", "overlap_grad_reduce"], 2, "workload.parallel.overlap_grad_reduce = 2"),
    (["parallel", "dp"], {}, "workload.parallel.dp = {}"),
    (["parallel", "precision"], ["fp8"], "workload.parallel.precision = ['fp8']"),
    (["check_memory"], "no", "workload.check_memory = 'no'"),
    (["placement"], ["a"] * 8, "workload.placement[0] = 'a'"),
    (["placement"], [0.5, 1, 2, 3, 4, 5, 6, 7], "workload.placement[0] = 0.5"),
    (["placement"], [0, 1], "workload.placement: 2 hosts given for 8 ranks"),
    (["placement"], [0, 1, 2, 3, 4, 5, 6, 99], "workload.placement[7] = 99"),
    (["placement"], "scatter", "workload.placement = 'scatter'"),
    (["algorithm"], "zigzag", "workload.algorithm = 'zigzag'"),
    (["algorithm"], 3, "workload.algorithm = 3"),
    (["algorithm"], {"all_reduce": "pairwise"}, "workload.algorithm.all_reduce = 'pairwise'"),
    (["algorithm"], {"broadcast": "ring"}, "workload.algorithm.broadcast"),
    (["algorithm"], "hierarchical", "workload.algorithm = 'hierarchical'"),
    (["gpu"], "A100-80GB", None),  # with fp8, below
])
def test_bad_fields_name_the_field(path, value, field):
    s = spec_with(path, value)
    if field is None:  # a precision the GPU lacks is a parallel.precision problem
        s["parallel"]["precision"] = "fp8"
        field = "workload.parallel.precision = 'fp8'"
    with pytest.raises(InputError) as e:
        build(TOPO, s)
    assert str(e.value).startswith(field), str(e.value)


def test_booleans_are_honoured_not_truth_tested():
    # sp = true changes the schedule; the refused "no" above would have meant the same
    on = build(TOPO, spec_with(["parallel", "sp"], True))
    off = build(TOPO, spec_with(["parallel", "sp"], False))
    assert on.meta["sp"] is True and off.meta["sp"] is False
    assert on.n != off.n


def test_algorithm_per_op_and_single_name():
    s = spec_with(["algorithm"], {"all_reduce": "tree", "all_gather": "direct"})
    a = build(TOPO, s).meta["algorithms"]
    assert a == {"all_reduce": "double_binary_tree", "reduce_scatter": "ring",
                 "all_gather": "direct", "all_to_all": "direct"}
    # one name goes to every op that has it; all_to_all has no ring and keeps direct
    assert comm.algorithms("ring") == {"all_reduce": "ring", "reduce_scatter": "ring",
                                       "all_gather": "ring"}
    assert comm.algorithms("pairwise") == {"all_to_all": "pairwise"}
    # the choice reaches the data-parallel all-reduce on the network
    dp4 = {"tp": 1, "pp": 2, "global_batch": 4}  # 4 data-parallel replicas
    ring = build(TOPO, {**spec_with(["algorithm"], "ring"), "parallel": dp4})
    dbt = build(TOPO, {**spec_with(["algorithm"], {"all_reduce": "double_binary_tree"}),
                       "parallel": dp4})
    lab = lambda sc, name: sc.labels.index(name) if name in sc.labels else -1  # noqa: E731
    assert lab(ring, "comm:dp:all_reduce") >= 0
    assert not np.array_equal(ring.size[ring.label == lab(ring, "comm:dp:all_reduce")],
                              dbt.size[dbt.label == lab(dbt, "comm:dp:all_reduce")])


def test_parallel_config_types_checked_at_construction():
    with pytest.raises(InputError, match="parallel.sp = 'no'"):
        ParallelConfig(sp="no")
    with pytest.raises(InputError, match="parallel.bucket_mb"):
        ParallelConfig(bucket_mb=float("nan"))


def test_templates_are_not_shared():
    a = comm.template("all_reduce", 4, 1 << 20)
    b = comm.template("all_reduce", 4, 1 << 20)
    assert a is not b and a.size is not b.size
    keep = b.size.copy()
    a.size[:] = 0
    a.meta["op"] = "poisoned"
    a.labels.append("x")
    c = comm.template("all_reduce", 4, 1 << 20)
    assert np.array_equal(c.size, keep) and c.meta.get("op") != "poisoned"
    assert "x" not in c.labels


# ---------------------------------------------------------------------------- fuzzing
ANY = st.one_of(st.none(), st.booleans(), st.integers(-3, 40),
                st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=4),
                st.sampled_from(["ring", "direct", "packed", "spread", "bf16", "fp8", "full",
                                 "auto", "none", "op", "coarse", "22b", "H100-SXM"]),
                st.lists(st.integers(-2, 9), max_size=9),
                st.dictionaries(st.sampled_from(["all_reduce", "tp", "x"]),
                                st.sampled_from(["ring", 1, "direct"]), max_size=2))
FIELDS = ([["model"], ["gpu"], ["parallel"], ["placement"], ["tp_comm"], ["symmetry"],
           ["granularity"], ["algorithm"], ["check_memory"]]
          + [["model", k] for k in ("layers", "hidden", "heads", "seq", "vocab", "kv_heads",
                                    "ffn", "experts", "top_k", "gated_mlp", "name", "preset",
                                    "tied_embeddings", "vocab_multiple")]
          + [["parallel", k] for k in ("tp", "pp", "dp", "cp", "ep", "vp", "sp", "micro_batch",
                                       "global_batch", "recompute", "dist_opt", "precision",
                                       "flash_attention", "grad_bytes", "bucket_mb",
                                       "overlap_grad_reduce", "stage_layers")]
          + [["gpu", k] for k in GPU_TABLE] + [["gpu", "sources"], ["gpu", "efficiency"]])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(FIELDS), ANY), min_size=1, max_size=3),
       st.booleans())
def test_fuzz_training_spec_only_input_errors(changes, gpu_table):
    s = copy.deepcopy(SPEC)
    if gpu_table:
        s["gpu"] = dict(GPU_TABLE)
    for path, value in changes:
        x = s
        for p in path[:-1]:
            if not isinstance(x.get(p), dict):
                break
            x = x[p]
        else:
            x[path[-1]] = value
    try:
        sched = build(TOPO, s)
    except InputError:
        return
    sched.validate(TOPO.n_hosts)


# ---------------------------------------------------------------------------- scale-up units
def test_local_tp_pricing_agrees_with_the_fabric_scaleup_links():
    """A spec's scaleup_GBps and two_tier's scaleup_gbps are both per direction: with
    scaleup_gbps = 8 x scaleup_GBps, no NCCL efficiency and the two link latencies per step,
    the analytic ring equals the flow engine's ring on the node's scale-up links."""
    import collectives as co
    from compute.hardware import get_gpu
    from compute.layers import ring_seconds
    from netcore.api import simulate
    from topo.builders import two_tier

    h100 = get_gpu("H100-SXM")
    lat_us = 0.25
    topo = two_tier(nodes=1, gpus_per_node=4, scaleup_gbps=8 * h100.scaleup_GBps,
                    scaleup_latency_us=lat_us)
    spec = h100.with_efficiency(scaleup=1.0, scaleup_latency_us=2 * lat_us)
    S = 64 << 20
    for op, build in (("all_reduce", co.ring_all_reduce), ("all_gather", co.ring_all_gather)):
        flow = simulate(topo, build(4, S), routing="shortest", engine="flow").makespan
        assert ring_seconds(op, 4, S, spec) == pytest.approx(flow, rel=1e-6)


def test_two_tier_default_is_nvlink5_and_training_reports_both_rates():
    from compute.hardware import get_gpu
    from topo.builders import two_tier

    t = two_tier(nodes=1)
    su = t.link_bw[t.link_layer == t.layer_names.index("scaleup")]
    assert np.all(su == get_gpu("B200").scaleup_Bps)  # 900 GB/s per direction
    meta = build(TOPO, SPEC).meta  # H100 on an NVLink-5 fabric: priced at the GPU's ports
    assert meta["tp_scaleup_GBps"] == get_gpu("H100-SXM").scaleup_GBps == 450.0
    assert meta["fabric_scaleup_GBps"] == 900.0
