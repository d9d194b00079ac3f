"""TCP loss recovery rule by rule, packet engine against ns-3: `python -m validation.tcp_rules`.

The ns-3 suite (validation/ns3_suite.py) compares whole scenarios; a lossy one there ends when
a retransmission timer fires, so it checks the timers more than how holes are repaired. Here
each case isolates one rule of TCP's recovery on one switch (hosts on 100 Gb/s, 1 us links,
MTU 9000): a lost SYN, SYN-ACK or last segment, a link outage under a running transfer, lost
ACKs, and small incasts whose drop-tail buffer overflows. Losses are made with link faults
that take one direction of one cable down and up again (``direction = "forward"``); every
outage lasts longer than a frame's time on the wire, because the two simulators lose a frame
caught on a cable by a shorter outage differently (docs/ns3.md, "TCP recovery rule by rule").

Each case runs in ns-3 and in the packet engine with SACK (both simulators' default; the
packet engine in its default tie order, ns-3's, and with eager ports, ``ns3_ties = false``),
and in both without SACK. Writes
validation/results/tcp_rules.md and .csv. Target: the packet engine within 5% of ns-3.
"""
from __future__ import annotations

import argparse
import csv
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
TARGET = 0.05
GBPS, LATENCY_US, MTU = 100, 1.0, 9000
COLUMNS = ("case", "rule", "tcp_timers", "ns3_makespan_us", "ns3_drops",
           "packet_makespan_us", "packet_drops", "err", "eager_makespan_us", "eager_err",
           "ns3_nosack_makespan_us", "packet_nosack_makespan_us", "nosack_err",
           "nosack_eager_err", "ok", "eager_ok", "nosack_ok", "nosack_eager_ok")


@dataclass(frozen=True)
class Case:
    name: str
    rule: str
    senders: int  # hosts 1..senders send to host 0 (one flow: host 0 -> host 1)
    nbytes: int
    timers: str = "ns3"
    buffer_packets: int = 1000
    outage: tuple = ()  # (u, v, down_us, up_us): that direction of the cable u-v


def _one(name, rule, nbytes, outage, timers="ns3"):
    return Case(name, rule, 0, nbytes, timers, 1000, outage)


# node ids on the star: hosts 0..n-1, the switch n (n = 2 for the one-flow cases)
CASES = (
    _one("syn_lost", "lost SYN: resent after ConnTimeout (3 s)", 4000, (0, 2, 0.02, 100.0)),
    _one("syn_lost_twice", "SYN lost twice: ConnTimeout doubles (3 s + 6 s)", 4000,
         (0, 2, 0.02, 4e6)),
    _one("synack_lost", "lost SYN-ACK: the SYN is resent and answered at once", 4000,
         (2, 0, 2.5, 100.0)),
    _one("tail_lost", "lost last segment: no duplicate ACKs, RTO (min 1 s)", 4000,
         (0, 2, 4.05, 10.0)),
    _one("tail_lost_linux", "lost last segment, linux timers (min RTO 200 ms)", 4000,
         (0, 2, 4.05, 10.0), "linux"),
    _one("tail_lost_datacenter", "lost last segment, datacenter timers (min RTO 5 ms)", 4000,
         (0, 2, 4.05, 10.0), "datacenter"),
    _one("last_of_two_lost", "second of two segments lost: RTO", 12000, (0, 2, 4.8, 10.0)),
    _one("outage_in_flight", "10 us outage loses the whole flight: RTO, go-back-N", 1 << 20,
         (0, 2, 30.0, 40.0)),
    _one("outage_in_flight_dc", "the same, datacenter timers", 1 << 20, (0, 2, 30.0, 40.0),
         "datacenter"),
    _one("outage_late", "2 us outage late in a 4 MiB transfer", 4 << 20,
         (0, 2, 300.0, 302.0), "datacenter"),
    _one("acks_lost", "10 us of lost ACKs: a later cumulative ACK covers them", 4 << 20,
         (2, 0, 100.0, 110.0)),
    _one("acks_lost_long", "100 us of lost ACKs: RTO of data that had arrived", 4 << 20,
         (2, 0, 100.0, 200.0), "datacenter"),
    _one("receiver_link_outage", "outage on the receiver's link near the end", 4 << 20,
         (2, 1, 340.0, 400.0), "datacenter"),
    _one("burst_lost_then_delivered", "3 us outage: a burst lost, later segments arrive "
         "(duplicate ACKs, partial ACKs; SACK in ns-3)", 1 << 20, (0, 2, 30.0, 33.0)),
    Case("incast2_buf8", "2-to-1 incast, 8-packet buffer", 2, 4 << 20, "ns3", 8),
    Case("incast2_buf16_dc", "2-to-1 incast, 16-packet buffer", 2, 4 << 20, "datacenter", 16),
    Case("incast3_buf8_dc", "3-to-1 incast, 8-packet buffer", 3, 2 << 20, "datacenter", 8),
    Case("incast4_buf20_dc", "4-to-1 incast, 20-packet buffer", 4, 4 << 20, "datacenter", 20),
    Case("incast7_buf20_linux", "7-to-1 incast, 20-packet buffer", 7, 1 << 20, "linux", 20),
)


def star(n: int):
    """n hosts on one switch (node n), 100 Gb/s, 1 us per link."""
    from topo.topology import Topology, gbps, us

    return Topology("custom", n, 1, list(range(n)), [n] * n, [gbps(GBPS)] * n,
                    [us(LATENCY_US)] * n, [0] * n)


def setup(case: Case):
    """(topology, schedule, routing, faults, engine options) of a case."""
    from netcore.schedule import Schedule
    from topo.faults import LinkFaults
    from topo.routing import Routing

    if case.senders == 0:
        t = star(2)
        s = Schedule.from_transfers([0], [1], [case.nbytes])
    else:
        n = case.senders
        t = star(n + 1)
        s = Schedule.from_transfers(list(range(1, n + 1)), [0] * n, [case.nbytes] * n)
    faults = None
    if case.outage:
        u, v, down, up = case.outage
        faults = LinkFaults.from_records(t, [
            {"link": [u, v], "kind": "down", "at_us": down, "direction": "forward"},
            {"link": [u, v], "kind": "up", "at_us": up, "direction": "forward"}])
    engine = {"transport": "tcp", "tcp_timers": case.timers, "mtu": MTU,
              "buffer_packets": case.buffer_packets}
    if case.timers != "ns3":
        engine["max_rto_s"] = 60.0  # ns-3 caps its RTO at 60 s (validation/ns3/support.py)
    return t, s, Routing(t, "shortest"), faults, engine


def ns3_drops(res) -> int:
    """ns-3's lost packets as the packet engine counts them: dropped by a device queue or a
    cut link, or by IP for want of a route (a host sending while its only link is down)."""
    return int(res.info["drops"]) + int(res.info.get("ip_drops", 0))


def run_case(case: Case) -> dict:
    from netcore.api import simulate
    from netcore.packet.options import check_options as packet_options
    from validation.ns3 import run_ns3
    from validation.ns3.support import check_options

    t, s, R, f, engine = setup(case)
    ref = run_ns3(t, s, R, f, **check_options(dict(engine)))
    nosack = run_ns3(t, s, R, f, **check_options(dict(engine, sack=False)))
    pk = simulate(t, s, R, f, engine="packet", **packet_options(dict(engine)))
    eager = simulate(t, s, R, f, engine="packet", **packet_options(dict(engine, ns3_ties=False)))
    pk_nosack = simulate(t, s, R, f, engine="packet",
                         **packet_options(dict(engine, sack=False)))
    eager_nosack = simulate(t, s, R, f, engine="packet",
                            **packet_options(dict(engine, sack=False, ns3_ties=False)))
    err = pk.makespan / ref.makespan - 1
    eager_err = eager.makespan / ref.makespan - 1
    nosack_err = pk_nosack.makespan / nosack.makespan - 1
    nosack_eager_err = eager_nosack.makespan / nosack.makespan - 1
    return {"case": case.name, "rule": case.rule, "tcp_timers": case.timers,
            "ns3_makespan_us": ref.makespan * 1e6, "ns3_drops": ns3_drops(ref),
            "packet_makespan_us": pk.makespan * 1e6, "packet_drops": int(pk.info["drops"]),
            "err": err, "eager_makespan_us": eager.makespan * 1e6, "eager_err": eager_err,
            "ns3_nosack_makespan_us": nosack.makespan * 1e6,
            "packet_nosack_makespan_us": pk_nosack.makespan * 1e6, "nosack_err": nosack_err,
            "nosack_eager_err": nosack_eager_err, "ok": abs(err) <= TARGET,
            "eager_ok": abs(eager_err) <= TARGET, "nosack_ok": abs(nosack_err) <= TARGET,
            "nosack_eager_ok": abs(nosack_eager_err) <= TARGET}


def write(rows: list[dict]) -> None:
    RESULTS.mkdir(exist_ok=True)
    with open(RESULTS / "tcp_rules.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{r[k]:.6f}" if isinstance(r[k], float) else r[k])
                        for k in COLUMNS})
    ok = sum(r["ok"] for r in rows)
    eager_ok = sum(r["eager_ok"] for r in rows)
    nosack_ok = sum(r["nosack_ok"] for r in rows)
    nosack_eager_ok = sum(r["nosack_eager_ok"] for r in rows)
    lines = [
        "# TCP loss recovery rule by rule: packet engine against ns-3",
        "",
        "Produced by `python -m validation.tcp_rules` (cases and method in its docstring; "
        "findings in docs/ns3.md, \"TCP recovery rule by rule\"). One switch, 100 Gb/s and "
        "1 us links, MTU 9000; makespans in us. Reference: ns-3.44 with its default SACK, "
        "against the packet engine with its default `sack = true`. err = packet / ns-3 - 1 "
        "(default tie order, ns-3's); eager = the packet engine with eager ports (`ns3_ties = "
        "false`, its faster order at equal picoseconds); no SACK: both "
        "with SACK off (`sack = false`, ns-3's `Sack = false`). Drops (with SACK, default "
        "order) count what a queue, a cut link or (ns-3) IP for want of a route lost. "
        "Target: within 5%.",
        "",
        f"**Within 5% of ns-3: {ok} of {len(rows)} (default order), {eager_ok} of {len(rows)} "
        f"(eager ports); without SACK {nosack_ok} and {nosack_eager_ok} of {len(rows)}.**",
        "",
        "| case | rule | timers | ns-3 | ns-3 drops | packet | packet drops | err | eager "
        "| eager err | ns-3 no SACK | packet no SACK | no SACK err | no SACK eager err |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        def mark(key):
            return "" if r[key] else " **MISS**"
        lines.append(
            f"| {r['case']} | {r['rule']} | {r['tcp_timers']} | {r['ns3_makespan_us']:,.3f} | "
            f"{r['ns3_drops']} | {r['packet_makespan_us']:,.3f} | {r['packet_drops']} | "
            f"{r['err']:+.2%}{mark('ok')} | {r['eager_makespan_us']:,.3f} | "
            f"{r['eager_err']:+.2%}{mark('eager_ok')} | {r['ns3_nosack_makespan_us']:,.3f} | "
            f"{r['packet_nosack_makespan_us']:,.3f} | {r['nosack_err']:+.2%}{mark('nosack_ok')} | "
            f"{r['nosack_eager_err']:+.2%}{mark('nosack_eager_ok')} |")
    (RESULTS / "tcp_rules.md").write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="case names (default: all)")
    args = ap.parse_args(argv)
    cases = [c for c in CASES if not args.only or c.name in args.only]
    rows = []
    for c in cases:
        r = run_case(c)
        rows.append(r)
        print(f"{r['case']:28s} ns-3 {r['ns3_makespan_us']:14,.3f}  packet "
              f"{r['packet_makespan_us']:14,.3f}  {r['err']:+8.2%}  eager {r['eager_err']:+8.2%}"
              f"  no SACK {r['nosack_err']:+8.2%}", flush=True)
    if not args.only:
        write(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
