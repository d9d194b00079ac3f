"""A small training step in the scalable form (transfers standing for member sets), shared by
the flow engine's tests of member-set paths."""
from compute.training import build_step
from topo.builders import fullflat

MODEL = dict(layers=4, hidden=512, heads=8, seq=512, vocab=1024)
PAR = dict(tp=4, pp=2, sp=True, recompute="selective", dist_opt=True, global_batch=8)


def member_step():
    """(fabric, schedule): GPT-like 4 layers on 32 GPUs of a 2-plane fullflat, coarse, auto."""
    fab = fullflat(32, planes=2, switch_radix=16, gpu_gbps=800)
    s = build_step(MODEL, PAR, "h100_sxm", fab, granularity="coarse", network_detail="auto")
    assert s.has_members
    return fab, s
