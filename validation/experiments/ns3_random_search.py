"""Random differential search: the packet engine against ns-3 on small random scenarios.

    python -m validation.experiments.ns3_random_search SEED COUNT [FAULT_FRACTION] [--keep DIR]
                                                      [--dctcp FRACTION]

Draws COUNT scenarios from SEED (fabric, routing, rates, latencies, MTU, buffer, TCP options,
1-30 flows with random sizes, starts and dependencies; with probability FAULT_FRACTION one or
two random link faults) and runs each in ns-3 and in the packet engine
(validation.ns3.compare.run_both). A case is ``ok`` when both end every transfer at the same
time (relative 1e-6), ``DIFF`` otherwise, ``ERR`` when the ns-3 runner refuses it. How the
session-40 search used it, and what it found: docs/ns3.md, mechanism 10 (seeds 1, 2, 3 with
10, 60 and 80 cases, fault fractions 0, 0.3, 0.3). With ``--dctcp FRACTION`` that share of the
cases runs DCTCP instead (random marking threshold below the buffer, gain, initial alpha and
floor on a cut),
drawn from a second generator so that the TCP cases of a seed stay the same. A research tool,
not a test.
"""
import json
import math
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from validation.ns3.compare import run_both

def toml_val(v):
    if isinstance(v, bool): return "true" if v else "false"
    if isinstance(v, str): return json.dumps(v)
    if isinstance(v, (list, tuple)): return "[" + ", ".join(toml_val(x) for x in v) + "]"
    if isinstance(v, dict): return "{ " + ", ".join(f"{k} = {toml_val(x)}" for k, x in v.items()) + " }"
    return repr(v)

def gen(rng):
    kind = rng.choice(["fat_tree", "leaf_spine", "torus", "two_tier", "dragonfly"])
    gb = rng.choice([10, 25, 40, 100, 400])
    lat = rng.choice([0.5, 1.0, 2.0, 5.0])
    if kind == "fat_tree":
        topo = dict(kind=kind, k=4, link_gbps=gb, latency_us=lat); H = 16
        pol = rng.choice(["ecmp", "dmodk", "shortest", "valiant"])
    elif kind == "leaf_spine":
        L, h, S = rng.choice([2, 3, 4]), rng.choice([2, 3, 4]), rng.choice([1, 2, 3])
        topo = dict(kind=kind, leaves=L, hosts_per_leaf=h, spines=S, link_gbps=gb, latency_us=lat,
                    oversubscription=rng.choice([1.0, 2.0, 0.5]))
        H = L * h; pol = rng.choice(["ecmp", "shortest", "dmodk"])
    elif kind == "torus":
        dims = rng.choice([[3, 3], [4, 4], [2, 3], [3, 4], [2, 2, 2]])
        topo = dict(kind=kind, dims=dims, link_gbps=gb, latency_us=lat); H = int(np.prod(dims))
        pol = rng.choice(["dor", "shortest", "ecmp"])
    elif kind == "two_tier":
        n, g = rng.choice([2, 3, 4]), rng.choice([2, 4])
        topo = dict(kind=kind, nodes=n, gpus_per_node=g, nic_gbps=gb, scaleup_gbps=gb * rng.choice([1, 4, 9]),
                    latency_us=lat)
        H = n * g; pol = rng.choice(["ecmp", "shortest"])
    else:
        topo = dict(kind=kind, groups=3, routers_per_group=2, hosts_per_router=2, global_links=1,
                    link_gbps=gb, latency_us=lat); H = 12
        pol = rng.choice(["shortest", "ecmp", "valiant"])
    eng = dict(kind="packet", transport="tcp", mtu=rng.choice([1500, 4000, 9000]),
               buffer_packets=rng.choice([4, 10, 20, 50, 100, 1000]))
    if rng.random() < 0.3: eng["min_rto_s"] = rng.choice([0.2, 0.01, 0.001])
    if rng.random() < 0.2: eng["sack"] = False
    if rng.random() < 0.2: eng["delayed_ack"] = True
    if rng.random() < 0.2: eng["init_cwnd"] = rng.choice([1, 2, 4, 20])
    if rng.random() < 0.15: eng["dupack_threshold"] = rng.choice([2, 5])
    if rng.random() < 0.15: eng["limited_transmit"] = False
    nf = rng.choice([1, 2, 3, 5, 8, 12, 20, 30])
    flows = []
    for i in range(nf):
        s = rng.randrange(H); d = rng.randrange(H - 1); d += d >= s
        f = dict(src=s, dst=d, bytes=int(math.exp(rng.uniform(math.log(1), math.log(4 << 20)))))
        if rng.random() < 0.4: f["start_us"] = round(rng.uniform(0, 300), 3)
        if i and rng.random() < 0.25:
            f["deps"] = sorted(set(rng.sample(range(i), min(i, rng.choice([1, 2])))))
        flows.append(f)
    return topo, pol, eng, flows

def gen_dctcp(rng, eng):
    """DCTCP on a case: a marking threshold below the buffer, TcpDctcp's gain and initial alpha"""
    if eng["buffer_packets"] < 2:
        return
    eng["transport"] = "dctcp"
    eng["ecn_k"] = rng.randrange(1, min(eng["buffer_packets"], 80))
    if rng.random() < 0.3: eng["dctcp_g"] = rng.choice([1 / 4, 1 / 256])
    if rng.random() < 0.3: eng["dctcp_alpha_init"] = rng.choice([0.0, 0.5])
    if rng.random() < 0.5: eng["dctcp_min_ssthresh_segments"] = rng.choice([0, 1, 4])

def write(path, seed, topo, pol, eng, flows, faults):
    lines = ['name = "hunt"', f"seed = {seed}", "[topology]"]
    lines += [f"{k} = {toml_val(v)}" for k, v in topo.items()]
    lines += ["[routing]", f'policy = "{pol}"', "[engine]"]
    lines += [f"{k} = {toml_val(v)}" for k, v in eng.items()]
    for f in faults:
        lines += ["[[faults]]"] + [f"{k} = {toml_val(v)}" for k, v in f.items()]
    lines += ["[workload]", 'kind = "flows"', "flows = ["] + ["  " + toml_val(f) + "," for f in flows] + ["]"]
    Path(path).write_text("\n".join(lines) + "\n")

def gen_faults(rng, path_pre):
    """random faults on links of the built topology"""
    from netcosim.scenario import load_scenario
    sc = load_scenario(path_pre)
    prep = sc.with_full_detail().prepare(check_engine=False)
    t = prep.topology
    out = []
    for _ in range(rng.choice([1, 1, 2])):
        l = rng.randrange(t.n_links)
        u, v = int(t.link_u[l]), int(t.link_v[l])
        k = rng.choice(["down", "degrade", "down_up"])
        at = round(rng.uniform(0, 400), 3)
        if k == "degrade":
            out.append(dict(link=[u, v], kind="degrade", factor=rng.choice([0.5, 0.25, 0.1]), at_us=at))
        else:
            out.append(dict(link=[u, v], kind="down", at_us=at))
            if k == "down_up":
                out.append(dict(link=[u, v], kind="up", at_us=round(at + rng.uniform(10, 3000), 3)))
    return out

def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    keep = None
    if "--keep" in argv:
        i = argv.index("--keep")
        keep = Path(argv[i + 1])
        del argv[i:i + 2]
        keep.mkdir(parents=True, exist_ok=True)
    dctcp_p = 0.0
    if "--dctcp" in argv:
        i = argv.index("--dctcp")
        dctcp_p = float(argv[i + 1])
        del argv[i:i + 2]
    seed0, n = int(argv[0]), int(argv[1])
    faults_p = float(argv[2]) if len(argv) > 2 else 0.0
    folder = keep or Path(tempfile.mkdtemp(prefix="ns3_search_"))
    counts = {"ok": 0, "DIFF": 0, "ERR": 0}
    for case in range(n):
        rng = random.Random(seed0 * 100003 + case)
        topo, pol, eng, flows = gen(rng)
        rng2 = random.Random(seed0 * 100003 + case + 0x5DEECE66D)
        if rng2.random() < dctcp_p:
            gen_dctcp(rng2, eng)
        p = str(folder / f"c{seed0}_{case}.toml")
        write(p, 1 + case % 5, topo, pol, eng, flows, [])
        faults = []
        if rng.random() < faults_p:
            try:
                faults = gen_faults(rng, p)
                write(p, 1 + case % 5, topo, pol, eng, flows, faults)
            except Exception as e:
                print(case, "faultgen", e); continue
        t0 = time.time()
        try:
            sc, prep, a, b = run_both(p)
        except Exception as e:
            msg = str(e).splitlines()[0][:150] if str(e) else type(e).__name__
            print(f"{case:4d} ERR {type(e).__name__}: {msg}", flush=True)
            counts["ERR"] += 1
            continue
        ma, mb = a.makespan, b.makespan
        rel = (mb - ma) / ma if ma > 0 else (0.0 if mb == ma else float("nan"))
        both = np.isnan(a.end) & np.isnan(b.end)
        d = np.where(both, 0.0, np.abs(np.nan_to_num(b.end - a.end, nan=1e9)))
        worst = float(np.max(d / np.maximum(np.nan_to_num(a.end, nan=1), 1e-9)))
        flag = "DIFF" if abs(rel) > 1e-6 or worst > 1e-6 else "ok"
        counts[flag] += 1
        tp = "dctcp k=%d" % eng["ecn_k"] if eng.get("transport") == "dctcp" else "tcp"
        print(f"{case:4d} {flag:4s} {topo['kind']:10s} {pol:8s} {tp} mtu={eng['mtu']} buf={eng['buffer_packets']} "
              f"nf={len(flows)} faults={len(faults)} ns3={ma*1e6:.2f} pk={mb*1e6:.2f} rel={rel:+.2e} "
              f"worstend={worst:.2e} t={time.time()-t0:.1f}s", flush=True)
    print(f"seed {seed0}: {counts['ok']} ok, {counts['DIFF']} differ, {counts['ERR']} refused "
          f"of {n}; scenarios in {folder}")


if __name__ == "__main__":
    main()
