// Training run for the profile-guided build of the packet engine (setup.py, PgoBuildExt: the
// engine's sources are compiled with -fprofile-generate, linked with this driver, which runs
// once, and the extension is then compiled again with the profile). Not part of the extension:
// setup.py compiles only the *.cpp files directly in netcore/_packet_cpp/.
//
// The workload is the one the engine is tuned for: a fat_tree(k=8) at 400 Gb/s, all-to-all
// transfers over TCP (slow start, SYN losses and timeouts in the 64 KiB case), plus small runs
// of the other transports so that their code is trained too. Paths are a hashed choice among
// the shortest ones (ECMP-like): only the shape of the work matters here, not that it matches
// topo.routing. Deterministic: the same counts on every run, so the same build.
#include <cstdio>
#include <vector>

#include "../sim.hpp"

using namespace pk;

namespace {

struct FatTree {
    int k, hosts, edges, aggs, cores, nodes;
    std::vector<int32_t> src, dst;  // directed links: 2i = u -> v, 2i + 1 = v -> u
    std::vector<int32_t> link_of;   // (u, v) -> directed link, -1 if none
    explicit FatTree(int k_) : k(k_) {
        const int h = k / 2;
        hosts = k * k * k / 4;
        edges = k * k / 2;
        aggs = k * k / 2;
        cores = h * h;
        nodes = hosts + edges + aggs + cores;
        link_of.assign((size_t)nodes * nodes, -1);
        const int e0 = hosts, a0 = hosts + edges, c0 = hosts + edges + aggs;
        for (int x = 0; x < hosts; ++x) add(x, e0 + x / h);
        for (int e = 0; e < edges; ++e)
            for (int j = 0; j < h; ++j) add(e0 + e, a0 + (e / h) * h + j);
        for (int a = 0; a < aggs; ++a)
            for (int j = 0; j < h; ++j) add(a0 + a, c0 + (a % h) * h + j);
    }
    void add(int u, int v) {
        link_of[(size_t)u * nodes + v] = (int32_t)src.size();
        src.push_back(u);
        dst.push_back(v);
        link_of[(size_t)v * nodes + u] = (int32_t)src.size();
        src.push_back(v);
        dst.push_back(u);
    }
    int32_t L(int u, int v) const { return link_of[(size_t)u * nodes + v]; }
    // a shortest path from host s to host d, the up-links picked by hashing `flow`
    void path(int s, int d, uint64_t flow, std::vector<int32_t>& out) const {
        const int h = k / 2, e0 = hosts, a0 = hosts + edges, c0 = hosts + edges + aggs;
        const int es = e0 + s / h, ed = e0 + d / h;
        const uint64_t z = (flow + 1) * 0x9E3779B97F4A7C15ULL;
        out.push_back(L(s, es));
        if (es != ed) {
            const int ps = (es - e0) / h, pd = (ed - e0) / h;
            const int j = (int)((z >> 20) % h);
            const int as = a0 + ps * h + j, ad = a0 + pd * h + j;
            out.push_back(L(es, as));
            if (ps != pd) {
                const int c = c0 + j * h + (int)((z >> 40) % h);
                out.push_back(L(as, c));
                out.push_back(L(c, ad));
            }
            out.push_back(L(ad, ed));
        }
        out.push_back(L(ed, d));
    }
};

// all-to-all among the first n hosts, `bytes` per pair; returns the packet hops
uint64_t run(const FatTree& ft, int32_t transport, int n, int64_t bytes) {
    Config cfg;
    cfg.transport = transport;
    cfg.l3l4_header = transport == T_DCQCN ? 44 : 52;
    if (transport == T_DCQCN) {  // PFC as netcore/packet/options.py sets it by default
        cfg.pfc_xoff_bytes = 24470;
        cfg.pfc_xon_bytes = 12235;
    }
    const size_t nl = ft.src.size();
    std::vector<double> bw(nl, 400e9 / 8);
    std::vector<ps_t> lat(nl, 500000);
    std::vector<int64_t> adj_ptr(ft.nodes + 1, 0);
    std::vector<int32_t> adj_link;
    for (int u = 0; u < ft.nodes; ++u) {
        for (size_t l = 0; l < nl; ++l)
            if (ft.src[l] == u) adj_link.push_back((int32_t)l);
        adj_ptr[u + 1] = (int64_t)adj_link.size();
    }
    std::vector<int8_t> kind;
    std::vector<int32_t> s, d, nodes, links;
    std::vector<int64_t> size, ptr{0};
    for (int a = 0; a < n; ++a)
        for (int b = 0; b < n; ++b) {
            if (a == b) continue;
            nodes.push_back((int32_t)kind.size());
            kind.push_back(0);
            s.push_back(a);
            d.push_back(b);
            size.push_back(bytes);
            ft.path(a, b, kind.size(), links);
            ptr.push_back((int64_t)links.size());
        }
    const size_t m = kind.size();
    Sim sim(cfg, ft.hosts, false, 1, ft.src, ft.dst, bw, lat, adj_ptr, adj_link, kind, s, d, size,
            std::vector<ps_t>(m, 0), std::vector<ps_t>(m, 0), std::vector<int64_t>(m + 1, 0),
            {}, std::vector<int32_t>(m, 0), {}, {}, {}, {});
    sim.set_paths(nodes, ptr, links, std::vector<uint8_t>(m, 1));
    while (sim.run() == 1) {
    }
    sim.finish();
    return sim.events_by_type[EV_ARRIVE];
}

}  // namespace

int main() {
    const FatTree ft(8);
    uint64_t hops = 0;
    hops += run(ft, T_TCP, 128, 16384);
    hops += run(ft, T_TCP, 128, 65536);
    hops += run(ft, T_DCTCP, 32, 65536);
    hops += run(ft, T_IDEAL, 32, 65536);
    hops += run(ft, T_DCQCN, 32, 65536);
    std::printf("packet engine training run: %llu packet hops\n", (unsigned long long)hops);
    return hops > 0 ? 0 : 1;
}
