"""``[workload] kind = "training"``: a scenario's training step, built by compute.training.

Keys (besides ``kind``): ``model`` (preset name or table), ``gpu`` (name or spec table),
``parallel`` (table, compute.parallel.ParallelConfig fields), ``placement`` (packed | spread |
list of hosts), ``tp_comm`` (auto | local | network), ``symmetry`` (auto | none; use none when
the fabric or its faults are not symmetric), ``granularity`` (op | segment | coarse),
``algorithm`` (network collective algorithm: one name, or a table per op such as
``{all_reduce = "ring", all_to_all = "pairwise"}``), ``check_memory`` (default true: a configuration
that does not fit in GPU memory is refused with the numbers; ``MemoryInfeasible`` lets sweeps
skip it), ``gpu_faults`` (slowed GPUs: ``[[workload.gpu_faults]]`` with ``gpus`` (host ids),
``kind`` (slow | hbm_degrade), ``factor``, ``at_us``; compute.training.parse_gpu_faults).
"""
from __future__ import annotations

import numpy as np

from compute import comm
from compute.memory import memory_per_gpu
from compute.model import get_model
from compute.parallel import ParallelConfig, validate
from compute.report import summarize
from compute.training import build_step, fault_args, parse_gpu_faults
from netcore.schedule import TRANSFER
from netcosim.units import records_with_times
from topo.errors import InputError, OverBudget

KEYS = ("model", "gpu", "parallel", "placement", "tp_comm", "symmetry", "granularity",
        "algorithm", "check_memory", "network_detail", "plan", "gpu_faults")


class MemoryInfeasible(InputError):
    """The configuration does not fit in GPU memory; the message has the numbers."""

    def __init__(self, msg: str, report: dict):
        super().__init__(msg)
        self.report = report


def _parallel(spec: dict, where: str) -> ParallelConfig:
    par = spec.get("parallel", {})
    if par == "best":  # a layout search (netcosim/plan.py): netcosim plan and sweeps resolve it
        raise InputError(f'{where}.parallel = "best": a layout search; run it with netcosim '
                         f'plan SCENARIO (or in a sweep), or give a [{where}.parallel] table')
    if not isinstance(par, dict):
        raise InputError(f"{where}.parallel: expected a table")
    try:
        return ParallelConfig.from_dict(par)
    except InputError as e:
        raise InputError(f"{where}.{e}") from None
    except TypeError as e:
        raise InputError(f"{where}.parallel: {e}") from None


def check_memory(model, par: ParallelConfig, gpu, n_gpus: int, where: str = "workload"):
    m = get_model(model)
    par = validate(m, par, n_gpus)
    rep = memory_per_gpu(m, par, gpu)
    if not rep.fits:
        raise MemoryInfeasible(f"{where}: {rep.message()}", rep.as_dict())
    return rep


def check_options(spec: dict, where: str = "workload") -> None:
    """The options every layout shares, checked up front (netcosim plan too, before its
    search: a bad one would fail every simulated layout)."""
    from compute.training import GRANULARITIES
    from netcosim.workloads import network_detail

    check = spec.get("check_memory", True)
    if not isinstance(check, bool):  # "no" must not mean yes
        raise InputError(f"{where}.check_memory = {check!r}: expected true or false")
    try:
        comm.algorithms(spec.get("algorithm"))  # up front, before memory and the build
    except InputError as e:
        raise InputError(f"{where}.{e}") from None
    for k, default, ok in (("granularity", "segment", GRANULARITIES),
                           ("tp_comm", "auto", ("auto", "local", "network")),
                           ("symmetry", "auto", ("auto", "none"))):
        v = spec.get(k, default)
        if not isinstance(v, str) or v not in ok:
            raise InputError(f"{where}.{k} = {v!r}: expected one of {', '.join(ok)}")
    network_detail(spec, where)


# A step's schedule grows by the same nodes with every micro-batch (each adds its forward and
# backward work on every stage), so its size is a + b x micro-batches. From PROBE_UNITS probe
# units of micro-batches on, a step of one unit is built first: its size times the units is an
# upper bound (a >= 0); only when that bound does not fit is a step of two units built too,
# which gives a and b exactly. 10,000 micro-batches of Mixtral 8x7B on 64 GPUs (about 90 GB of
# schedule), or DeepSeek-V3 with EP 64 on 16,384 GPUs and 16 micro-batches (every expert
# group's all-to-alls on the fabric), were killed for memory mid-build instead of refused.
PROBE_UNITS = 4


def _check_step_size(build_as, par: ParallelConfig, routed: bool, topology, where: str,
                     what: str) -> None:
    """Refuse (netcosim/memory_guard.py) a step whose schedule, extrapolated from small builds
    in micro-batches, cannot fit in memory. ``par`` is validated (dp resolved)."""
    from dataclasses import replace

    from netcosim.memory_guard import check_schedule, routed_members

    n_micro = par.micro_batches
    unit = par.pp if par.vp > 1 else 1  # interleaving needs a multiple of pp micro-batches
    if n_micro < PROBE_UNITS * unit:
        return  # the probe would cost a large share of the build; the guard after it runs

    def size(k):
        s = build_as("auto", replace(par, global_batch=k * par.micro_batch * par.dp))
        return (s.n, int(s.members_per_node()[s.kind == TRANSFER].sum())) + routed_members(s)

    hint = ("use a smaller parallel.global_batch (a step's time grows by the same amount with "
            "every micro-batch once the pipeline is full: simulate fewer and scale), fewer "
            "GPUs, or a machine with more memory")
    what = f"{what} with {n_micro:,} micro-batches"
    units = n_micro / unit
    one = size(unit)
    try:
        # every count times the units bounds the step's (its distinct members too)
        check_schedule(one[0] * units, one[1] * units, routed, where, what, hint,
                       tuple(x * units for x in one[2:]), topology)
        return
    except InputError:
        pass  # the bound does not fit: the exact size decides
    two = size(2 * unit)
    grow = [a1 + max(a2 - a1, 0) * (units - 1) for a1, a2 in zip(one, two)]
    check_schedule(grow[0], grow[1], routed, where, what, hint, tuple(grow[2:]), topology)


def build(topology, spec: dict, where: str = "workload", seed: int = 0):
    for k in ("model", "gpu"):
        if k not in spec:
            raise InputError(f"{where}.{k}: missing field")
    par = _parallel(spec, where)
    check_options(spec, where)
    check = spec.get("check_memory", True)
    from netcosim.collective_remedies import full_detail_for
    from netcosim.workloads import network_detail, scenario_engine, scenario_faults

    detail = network_detail(spec, where)
    gpu_faults = parse_gpu_faults(records_with_times(spec.get("gpu_faults"), "at_us",
                                                     f"{where}.gpu_faults"),
                                  f"{where}.gpu_faults")
    located = fault_args(topology, scenario_faults())
    n_gpus = par.n_gpus if par.dp else topology.n_hosts
    try:
        m = get_model(spec["model"])
        mem = None
        if check:
            mem = check_memory(m, par, spec["gpu"], n_gpus, where)
        def build_as(how, p=par):
            return build_step(m, p, spec["gpu"], topology,
                              placement=spec.get("placement", "packed"),
                              tp_comm=spec.get("tp_comm", "auto"),
                              symmetry=spec.get("symmetry", "auto"),
                              granularity=spec.get("granularity", "segment"),
                              algorithm=spec.get("algorithm"), network_detail=how,
                              gpu_faults=gpu_faults, **located)

        routed = detail != "full" and scenario_engine() in (None, "flow")
        _check_step_size(build_as, validate(m, par, n_gpus), routed, topology, where,
                         f"the training step on {n_gpus:,} GPUs")
        sched = build_as("auto")
        if routed:
            # the flow engine's state and routes can outgrow memory on their own (4.28 M nodes
            # of the 1.8T MoE on 32,768 FullFlat GPUs add 1.9 GB of node state)
            from netcosim.memory_guard import check_member_routes, routed_members

            members = int(sched.members_per_node()[sched.kind == TRANSFER].sum())
            check_member_routes(sched.n, members, routed_members(sched), topology, where,
                                f"the training step on {n_gpus:,} GPUs",
                                "use fewer GPUs, fewer pipeline stages or micro-batches, or a "
                                "machine with more memory")
        if detail == "full":
            # the scalable form counts the transfers of the full one: refuse before building
            # what cannot fit (netcosim/memory_guard.py)
            from netcosim.memory_guard import check_transfers

            # a consumer of every transfer (Chakra export, ns-3) has no scalable form to
            # offer: it was told network_detail = "auto", which it cannot use
            needs = full_detail_for()
            hint = ("use fewer GPUs" + (f" ({needs} needs every transfer)" if needs else
                                        "" if spec.get("network_detail") == "full" and
                                        scenario_engine() in (None, "flow") else
                                        " (the packet engine runs every transfer)")
                    + (", or network_detail = \"auto\" with the flow engine"
                       if spec.get("network_detail") == "full" and not needs else ""))
            check_transfers(sched.n_member_transfers, where,
                            f"the full training step on {n_gpus:,} GPUs", hint)
            sched = build_as("full")
    except (MemoryInfeasible, OverBudget):
        raise  # their messages name the workload already; sweeps tell them apart by type
    except InputError as e:
        msg = str(e)
        raise InputError(msg if msg.startswith(where) else f"{where}.{msg}") from None
    if mem is None:
        mem = memory_per_gpu(m, validate(m, par, n_gpus), spec["gpu"])
    sched.meta["memory"] = mem.as_dict()
    return sched


def report(spec: dict, schedule, result) -> dict:
    out = summarize(schedule, result.start, result.end)
    out["memory"] = schedule.meta.get("memory")
    out["folded_replicas"] = int(schedule.meta.get("folded_replicas", 0))
    out["symmetry_uneven_sends"] = uneven_folded_sends(schedule, result)
    return out


def uneven_folded_sends(schedule, result) -> int:
    """Pipeline sends that stand for several folded replicas and that routing left uneven.

    Folded, one pipeline send carries that send of every replica, and the representative's
    chain waits for its slowest member at every micro-batch; simulated each on its own, a
    replica waits only for its own sends, and the slow members differ from send to send
    (ECMP collisions on spine links). The step time then differs from the unfolded one:
    GPT-3 175B on 2,048 GPUs of two_tier with nodes_per_leaf = 16, ECMP, read 1.333 s folded
    against 1.293 s with symmetry = "none" (+3.1%); a 32-GPU full-form step -1.2%
    (docs/compute.md, "Symmetry"). 0 when nothing was folded."""
    from compute.layers import CKIND

    ck = schedule.extra.get("ckind")
    if not schedule.meta.get("folded_replicas") or ck is None:
        return 0
    pp = (schedule.kind == TRANSFER) & (np.asarray(ck) == CKIND["pp"])
    flag = result.node_extra.get("uneven_set")
    sets = 0 if flag is None else int(np.count_nonzero(np.asarray(flag, bool) & pp))
    # the full form: the copies of one send (one per folded replica) wait for the same
    # chain node of the representative; count the sends whose copies end apart
    ptr = np.asarray(schedule.dep_ptr)
    t = np.flatnonzero(pp & (np.asarray(schedule.mset) < 0) & np.isfinite(result.end) &
                       (np.diff(ptr) > 0))
    if t.size < 2:
        return sets
    producer = np.asarray(schedule.dep_idx)[ptr[t]]
    end = np.asarray(result.end)[t]
    order = np.argsort(producer, kind="stable")
    producer, end = producer[order], end[order]
    cut = np.flatnonzero(np.r_[True, producer[1:] != producer[:-1]])
    hi = np.maximum.reduceat(end, cut)
    return sets + int(np.count_nonzero(hi - np.minimum.reduceat(end, cut) > 1e-12 * hi))


def symmetry_warning(n: int) -> str:
    """What `netcosim run` and `netcosim faults` say of ``n`` uneven folded sends."""
    return (f"symmetry: {n} pipeline sends stand for several folded replicas and routing "
            f"leaves them uneven (ECMP collisions on shared links); the representative "
            f"replica waits for the slowest of them at every micro-batch, where each replica "
            f"would wait only for its own, so step_time_s can be off by a few percent (GPT-3 "
            f"175B on two_tier with several leaves per rail: +3.9% at 2,048 GPUs, +5.2% at "
            f"16,384); "
            f"workload.symmetry = \"none\" simulates every replica (docs/compute.md, "
            f"\"Symmetry\")")


def register(register_workload) -> None:
    register_workload("training", build, KEYS, report)
