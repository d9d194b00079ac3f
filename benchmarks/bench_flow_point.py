"""Per sweep point cost of the flow engine (issue 8): a 64 MiB ring all-reduce over the three
128-host fabrics of benchmarks/bench_sweep.py, set-up and event loop (`advance`) timed with
time.process_time() (the machine is shared; CPU time is steadier than wall time).
    python benchmarks/bench_flow_point.py [reps]     # default 5; prints the minimum and median
"""
import sys, time
import numpy as np
from netcosim.scenario import Scenario
from netcosim.runner import prepare
from netcore.flow import _kernels as K
from netcore.flow import engine as E
from netcore.flow.state import FlowState
from netcore.schedule import TRANSFER
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
E.warm()
for topo in ({"kind": "fat_tree", "k": 8, "latency_us": 0.5}, {"kind": "two_tier", "nodes": 16, "gpus_per_node": 8}, {"kind": "fullflat", "n_gpus": 128, "planes": 8, "switch_radix": 64}):
    d = {"name": "p", "seed": 1, "topology": topo, "routing": {"policy": "ecmp"}, "engine": {"kind": "flow"},
         "workload": {"kind": "collective", "op": "all_reduce", "algorithm": "ring", "bytes": "64MiB"}}
    p = prepare(Scenario.from_dict(d))
    best = []; tot = []
    for _ in range(reps):
        t0 = time.process_time()
        st = FlowState(p.topology, p.schedule, None, False)
        tr = np.flatnonzero(p.schedule.kind == TRANSFER).astype(np.int64)
        st.assign(tr, E._route(p.routing, st, tr, None)); st.fit_slots()
        t1 = time.process_time()
        st.start_roots(0.0); st.advance(np.inf)
        t2 = time.process_time()
        best.append(t2 - t1); tot.append(t2 - t0)
    print(f"{topo['kind']:9s} advance min {min(best)*1e3:6.1f} ms med {np.median(best)*1e3:6.1f} ms  setup+advance min {min(tot)*1e3:6.1f} ms  steps {st.isc[K.STEPS]}", flush=True)
