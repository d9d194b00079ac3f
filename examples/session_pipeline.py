"""A pipeline-parallel training step driven from Python through the Session API.

4 stages on 4 hosts of a k=4 fat-tree (one per pod, so every hop between stages crosses the
core), 8 micro-batches, the 1F1B schedule: each stage runs its forward (F) and backward (B)
passes one at a time in the 1F1B order; a forward needs the previous stage's activations, a
backward the next stage's gradients. Compute is a `schedule` delay; activations and gradients
are `send`s whose `on_done` hands the data to the receiving stage. The network decides when
data arrives; the stages' logic lives here, in plain Python, as a system simulator's would.

    python examples/session_pipeline.py [--engine flow|packet] [--transport fluid|tcp]
"""
from __future__ import annotations

import argparse

from netcore.session import Session
from topo.builders import fat_tree


def one_f_one_b(stage: int, stages: int, micro: int) -> list[tuple[str, int]]:
    """The 1F1B order of one stage: warm-up forwards, then one forward / one backward, then
    the remaining backwards (Narayanan et al., PipeDream-Flush / Megatron-LM)."""
    warm = min(stages - stage - 1, micro)
    order = [("F", m) for m in range(warm)]
    for i in range(micro - warm):
        order += [("F", warm + i), ("B", i)]
    order += [("B", m) for m in range(micro - warm, micro)]
    return order


def pipeline_step(engine: str = "flow", stages: int = 4, micro: int = 8,
                  act_bytes: int = 16 << 20, fwd_s: float = 2e-3, bwd_s: float = 4e-3,
                  link_gbps: float = 100, **options) -> dict:
    topo = fat_tree(4, link_gbps=link_gbps, latency_us=1.0)
    hosts = [4 * s % topo.n_hosts for s in range(stages)]  # one stage per pod
    sess = Session(topo, engine=engine, routing="dmodk", **options)
    order = [one_f_one_b(s, stages, micro) for s in range(stages)]
    nxt = [0] * stages          # index of the next op in each stage's order
    busy = [False] * stages
    have = [set() for _ in range(stages)]  # inputs that arrived: ("F", m) / ("B", m)
    finished = []

    def ready(s: int, op: tuple[str, int]) -> bool:
        kind, m = op
        if kind == "F":
            return s == 0 or op in have[s]
        return s == stages - 1 or op in have[s]  # last stage: its own F(m) ran before B(m)

    def try_run(s: int):
        if busy[s] or nxt[s] == len(order[s]) or not ready(s, order[s][nxt[s]]):
            return
        op = order[s][nxt[s]]
        nxt[s] += 1
        busy[s] = True
        sess.schedule(fwd_s if op[0] == "F" else bwd_s, lambda: computed(s, op))

    def computed(s: int, op: tuple[str, int]):
        busy[s] = False
        kind, m = op
        peer = s + 1 if kind == "F" else s - 1
        if 0 <= peer < stages:
            # activations forward / gradients backward, same size (boundary tensor)
            sess.send(hosts[s], hosts[peer], act_bytes, tag=(kind, m, s),
                      on_done=lambda tid: arrived(peer, (kind, m)))
        if nxt[s] == len(order[s]):
            finished.append(sess.now())
        try_run(s)

    def arrived(s: int, op: tuple[str, int]):
        have[s].add(op)
        try_run(s)

    for s in range(stages):
        try_run(s)
    sess.run()
    res = sess.result()
    compute_only = (micro + stages - 1) * (fwd_s + bwd_s)
    return {"step_time_s": max(finished), "compute_only_s": compute_only,
            "transfers": res.n_transfers if hasattr(res, "n_transfers") else len(res.end),
            "network_makespan_s": res.makespan, "calls": dict(sess.calls)}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", default="flow", choices=["flow", "packet"])
    ap.add_argument("--transport", default=None,
                    help="flow: fluid (default) | tcp; packet: tcp (default) | ideal | ...")
    args = ap.parse_args(argv)
    opts = {} if args.transport is None else {"transport": args.transport}
    out = pipeline_step(args.engine, **opts)
    print(f"pipeline step ({args.engine}{', ' + args.transport if args.transport else ''}): "
          f"{out['step_time_s'] * 1e3:.3f} ms; compute alone (1F1B, no network) "
          f"{out['compute_only_s'] * 1e3:.3f} ms; {out['transfers']} transfers")
    return out


if __name__ == "__main__":
    main()
