"""`netcosim import-astra network.yml`: convert an ASTRA-sim analytical network description into
a netcosim fabric (JSON, GraphML, or a scenario [topology] table)."""
from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("import-astra", help="convert an ASTRA-sim network.yml into a netcosim "
                                            "fabric",
                       description="Read an ASTRA-sim analytical network.yml (topology, "
                                   "npus_count, bandwidth in GB/s, latency in ns per dimension) "
                                   "and write it as a netcosim fabric. docs/interop.md gives "
                                   "the mapping.")
    p.add_argument("network", metavar="NETWORK_YML")
    p.add_argument("--json", metavar="FILE", help="write netcosim JSON (topo.io format)")
    p.add_argument("--graphml", metavar="FILE", help="write GraphML")
    p.add_argument("--toml", metavar="FILE",
                   help="write a scenario [topology] table (kind = \"custom\") to paste or "
                        "include in a scenario")
    p.add_argument("--gb", choices=("binary", "decimal"), default="binary",
                   help="GB in the file's GB/s: binary = 2^30 bytes (ASTRA-sim's conversion, "
                        "default) or decimal = 10^9 bytes")
    p.set_defaults(func=run)


def _toml_table(d: dict) -> str:
    lines = ["[topology]", f'kind = "{d["kind"]}"', f"hosts = {d['hosts']}",
             f"switches = {d['switches']}",
             f"hosts_forward = {'true' if d['hosts_forward'] else 'false'}", "links = ["]
    lines += [f"  [{u}, {v}, {g!r}, {l!r}]," for u, v, g, l in d["links"]]
    lines.append("]")
    return "\n".join(lines) + "\n"


def run(args) -> int:
    from netcosim.interop import export
    from netcosim.interop.astra_network import load_network, to_custom_table

    from netcosim import outpaths

    outputs = (("--json", args.json), ("--graphml", args.graphml), ("--toml", args.toml))
    outpaths.check_distinct(*((path, f"{flag} {path!r}") for flag, path in outputs))
    for flag, path in outputs:
        if path:
            outpaths.check_file(path, f"{flag} {path!r}", inputs=(args.network,))
    topology = load_network(args.network, gb=args.gb)
    s = topology.params
    print(f"{args.network}: {' x '.join(map(str, s['npus_count']))} NPUs "
          f"({', '.join(s['topology'])}): {topology.n_hosts} hosts, {topology.n_switches} "
          f"switches, {topology.n_links} links")
    if args.json:
        print(f"  -> {export.write_json(topology, args.json)}")
    if args.graphml:
        print(f"  -> {export.write_graphml(topology, args.graphml)}")
    if args.toml:
        p = outpaths.write_text(args.toml, f"--toml {args.toml!r}",
                                f"# from {args.network} (ASTRA-sim analytical network)\n" +
                                _toml_table(to_custom_table(topology)))
        print(f"  -> {p}")
    return 0
