"""``[workload] kind = "chakra"``: run a Chakra execution trace.

```toml
[workload]
kind = "chakra"
path = "chakra/ring_allreduce_8"   # a trace directory (<prefix>.<rank>.et[.gz]) or one file
# optional:
comm_groups = { "0" = [0, 1, 2, 3] }   # pg_name -> ranks; or a JSON file name;
                                        # default: <path>/comm_groups.json when present,
                                        # else the ranks that issue collectives on a pg_name
algorithms = { all_reduce = "ring" }    # op -> collectives algorithm
gpu = "h100_sxm"                        # prices COMP nodes that only carry num_ops/tensor_size
precision = "bf16"
deps = "both"                           # "both" (data + ctrl deps) or "data"
p2p = "eager"                           # send/recv semantics: "eager" or "rendezvous"
rank_hosts = [0, 1, 2, 3]               # host of each rank (default: rank r on host r)
```

Relative paths are relative to the scenario file's folder.
"""
from __future__ import annotations

import json
from pathlib import Path

from topo.errors import InputError

KEYS = ("path", "comm_groups", "algorithms", "gpu", "precision", "deps", "rank_hosts", "p2p")


def scenario_dir() -> Path | None:
    """The folder of the scenario being built (None when called outside a scenario)."""
    from netcosim import workloads

    d = workloads.scenario_dir()
    return None if d is None else Path(d)


def _resolve(p: str, base: Path | None) -> Path:
    q = Path(p).expanduser()
    if q.is_absolute() or base is None:
        return q
    return base / q


def _comm_groups(v, where: str, base: Path | None, trace_path: Path):
    if v is None:
        auto = trace_path / "comm_groups.json" if trace_path.is_dir() else None
        if auto is None or not auto.exists():
            return None
        v, where_key = str(auto), f"{trace_path}/comm_groups.json"
    else:
        where_key = f"{where}.comm_groups"
    if isinstance(v, str):
        f = _resolve(v, base) if v != str(trace_path / "comm_groups.json") else Path(v)
        try:
            data = json.loads(f.read_text())
        except FileNotFoundError:
            raise InputError(f"{where_key} = {v!r}: file not found") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise InputError(f"{where_key} = {v!r}: not valid JSON ({e})") from None
        except RecursionError:
            raise InputError(f"{where_key} = {v!r}: nested too deeply") from None
        except OSError as e:
            raise InputError(f"{where_key} = {v!r}: cannot be read ({e.strerror})") from None
        v = data
    if not isinstance(v, dict):
        raise InputError(f"{where_key}: expected a table pg_name -> list of ranks")
    return {str(k): val for k, val in v.items()}


def build(topology, spec: dict, where: str, seed: int):
    from netcosim.interop.chakra_reader import ChakraTraceError, read_trace
    from netcosim.interop.chakra_to_schedule import check_options, no_gc, to_schedule

    path = spec.get("path")
    if not isinstance(path, str) or not path:
        raise InputError(f"{where}.path = {path!r}: expected the trace directory or file "
                         f"(relative to the scenario file)")
    deps, p2p = spec.get("deps", "both"), spec.get("p2p", "eager")
    check_options(deps, p2p, where)  # before a possibly large trace is read
    base = scenario_dir()
    trace_path = _resolve(path, base)
    if not trace_path.exists():
        raise InputError(f"{where}.path = {path!r}: {str(trace_path)!r} does not exist")
    algorithms = spec.get("algorithms", {})
    if not isinstance(algorithms, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                   for k, v in algorithms.items()):
        raise InputError(f"{where}.algorithms = {algorithms!r}: expected a table op -> "
                         f"algorithm name, e.g. {{ all_reduce = \"ring\" }}")
    precision = spec.get("precision", "bf16")
    rank_hosts = spec.get("rank_hosts")
    if rank_hosts is not None and (not isinstance(rank_hosts, list) or not all(
            isinstance(h, int) and not isinstance(h, bool) for h in rank_hosts)):
        raise InputError(f"{where}.rank_hosts = {rank_hosts!r}: expected a list of host ids")
    gpu = spec.get("gpu")
    if isinstance(gpu, str) and gpu.endswith(".toml"):
        gpu = str(_resolve(gpu, base))
    groups = _comm_groups(spec.get("comm_groups"), where, base, trace_path)
    try:
        traces = read_trace(trace_path)
    except ChakraTraceError as e:
        # the reader names the file and record ("x.toml: record 1 at byte 92: ..."), not the
        # field that led to it
        raise InputError(f"{where}.path = {path!r}: {e}") from None
    with no_gc():  # see chakra_to_schedule.no_gc
        sched = to_schedule(traces, topology.n_hosts, comm_groups=groups,
                            algorithms=algorithms, gpu=gpu, precision=precision,
                            deps=deps, rank_hosts=rank_hosts, p2p=p2p, where=where)
    if sched.n == 0:
        raise InputError(f"{where}.path = {path!r}: the trace has no nodes")
    return sched  # keyed by connection, as collectives are (chakra_to_schedule._build)


def report(spec: dict, schedule, result) -> dict:
    """A trace is usually one training step: its makespan is the step time (none when some
    node never ended: a fault left a transfer no path)."""
    return {"step_time_s": float(result.makespan) if result.finished.all() else float("nan"),
            "ranks": int(schedule.meta.get("n_ranks", 0))}


def register(register_workload) -> None:
    register_workload("chakra", build, KEYS, report)
