// pybind11 bindings: Python hands over flat numpy arrays once, runs the simulator (returning
// at reroute points so Python can recompute paths), and reads the results back as arrays.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstring>
#include <memory>

#include "sim.hpp"

namespace py = pybind11;
using namespace pk;

template <class T>
using arr = py::array_t<T, py::array::c_style | py::array::forcecast>;

template <class T>
static std::vector<T> vec(const arr<T>& a) {
    std::vector<T> v(a.size());
    if (a.size()) std::memcpy(v.data(), a.data(), a.size() * sizeof(T));
    return v;
}

template <class T>
static py::array_t<T> out(const std::vector<T>& v) {
    py::array_t<T> a(v.size());
    if (!v.empty()) std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(T));
    return a;
}

template <class T, class F>
static py::array_t<T> per_link(const Sim& s, F f) {
    py::array_t<T> a(s.links.size());
    T* d = a.mutable_data();
    for (size_t l = 0; l < s.links.size(); ++l) d[l] = f(s.links[l]);
    return a;
}

PYBIND11_MODULE(_packet, m) {
    m.doc() = "netcosim packet-level engine core (C++17)";
    py::class_<Config>(m, "Config")
        .def(py::init<>())
        .def_readwrite("transport", &Config::transport)
        .def_readwrite("mtu", &Config::mtu)
        .def_readwrite("l3l4_header", &Config::l3l4_header)
        .def_readwrite("l2_header", &Config::l2_header)
        .def_readwrite("ack_bytes", &Config::ack_bytes)
        .def_readwrite("syn_bytes", &Config::syn_bytes)
        .def_readwrite("cnp_bytes", &Config::cnp_bytes)
        .def_readwrite("buffer_packets", &Config::buffer_packets)
        .def_readwrite("buffer_bytes", &Config::buffer_bytes)
        .def_readwrite("switch_buffer_bytes", &Config::switch_buffer_bytes)
        .def_readwrite("host_queue_packets", &Config::host_queue_packets)
        .def_readwrite("per_hop", &Config::per_hop)
        .def_readwrite("adaptive", &Config::adaptive)
        .def_readwrite("init_cwnd", &Config::init_cwnd)
        .def_readwrite("min_rto", &Config::min_rto)
        .def_readwrite("init_rto", &Config::init_rto)
        .def_readwrite("max_rto", &Config::max_rto)
        .def_readwrite("clock_granularity", &Config::clock_granularity)
        .def_readwrite("conn_timeout", &Config::conn_timeout)
        .def_readwrite("syn_retries", &Config::syn_retries)
        .def_readwrite("data_retries", &Config::data_retries)
        .def_readwrite("dupack_threshold", &Config::dupack_threshold)
        .def_readwrite("limited_transmit", &Config::limited_transmit)
        .def_readwrite("sack", &Config::sack)
        .def_readwrite("delayed_ack", &Config::delayed_ack)
        .def_readwrite("delack_count", &Config::delack_count)
        .def_readwrite("delack_timeout", &Config::delack_timeout)
        .def_readwrite("handshake", &Config::handshake)
        .def_readwrite("warm_connections", &Config::warm_connections)
        .def_readwrite("ns3_ties", &Config::ns3_ties)
        .def_readwrite("ecn_k", &Config::ecn_k)
        .def_readwrite("dctcp_g", &Config::dctcp_g)
        .def_readwrite("dctcp_alpha_init", &Config::dctcp_alpha_init)
        .def_readwrite("dctcp_min_ssthresh", &Config::dctcp_min_ssthresh)
        .def_readwrite("kmin_bytes", &Config::kmin_bytes)
        .def_readwrite("kmax_bytes", &Config::kmax_bytes)
        .def_readwrite("pmax", &Config::pmax)
        .def_readwrite("dcqcn_g", &Config::dcqcn_g)
        .def_readwrite("alpha_timer", &Config::alpha_timer)
        .def_readwrite("rate_timer", &Config::rate_timer)
        .def_readwrite("byte_counter", &Config::byte_counter)
        .def_readwrite("fast_recovery_steps", &Config::fast_recovery_steps)
        .def_readwrite("rate_ai", &Config::rate_ai)
        .def_readwrite("rate_hai", &Config::rate_hai)
        .def_readwrite("min_rate", &Config::min_rate)
        .def_readwrite("cnp_interval", &Config::cnp_interval)
        .def_readwrite("pfc_xoff_bytes", &Config::pfc_xoff_bytes)
        .def_readwrite("pfc_xon_bytes", &Config::pfc_xon_bytes)
        .def_readwrite("reroute_delay", &Config::reroute_delay)
        .def_readwrite("loss_rate", &Config::loss_rate)
        .def_readwrite("max_time", &Config::max_time)
        .def_readwrite("sample_interval", &Config::sample_interval);

    py::class_<Sim>(m, "Sim")
        .def(py::init([](const Config& cfg, int32_t n_hosts, bool hosts_forward, uint64_t seed,
                         arr<int32_t> dsrc, arr<int32_t> ddst, arr<double> dbw,
                         arr<int64_t> dlat, arr<int64_t> adj_ptr, arr<int32_t> adj_link,
                         arr<int8_t> kind, arr<int32_t> nsrc, arr<int32_t> ndst,
                         arr<int64_t> size, arr<int64_t> dur, arr<int64_t> start,
                         arr<int64_t> child_ptr, arr<int64_t> child_idx, arr<int32_t> indeg,
                         arr<int64_t> ftime, arr<int32_t> flink, arr<int8_t> fkind,
                         arr<double> ffactor) {
                 return std::make_unique<Sim>(
                     cfg, n_hosts, hosts_forward, seed, vec(dsrc), vec(ddst), vec(dbw),
                     vec(dlat), vec(adj_ptr), vec(adj_link), vec(kind), vec(nsrc), vec(ndst),
                     vec(size), vec(dur), vec(start), vec(child_ptr), vec(child_idx),
                     vec(indeg), vec(ftime), vec(flink), vec(fkind), vec(ffactor));
             }))
        .def("run", &Sim::run, py::call_guard<py::gil_scoped_release>())
        .def("advance", &Sim::advance, py::call_guard<py::gil_scoped_release>())
        .def("add_transfers",
             [](Sim& s, arr<int32_t> src, arr<int32_t> dst, arr<int64_t> size, arr<int64_t> start,
                arr<int64_t> ptr, arr<int32_t> links, arr<uint8_t> reach) {
                 return s.add_transfers(vec(src), vec(dst), vec(size), vec(start), vec(ptr),
                                        vec(links), vec(reach));
             })
        .def("take_done", [](Sim& s) { return out(s.take_done()); })
        .def("pending", &Sim::pending)
        .def("idle", &Sim::idle)
        .def_readwrite("log_done", &Sim::log_done)
        .def("finish", &Sim::finish)
        .def("set_paths",
             [](Sim& s, arr<int32_t> nodes, arr<int64_t> ptr, arr<int32_t> links,
                arr<uint8_t> reach) { s.set_paths(vec(nodes), vec(ptr), vec(links), vec(reach)); })
        .def("set_distances", [](Sim& s, arr<int32_t> row, arr<int32_t> dist, int32_t n_rows) {
            s.set_distances(vec(row), vec(dist), n_rows);
        })
        .def("dead_transfers", [](Sim& s) { return out(s.dead_transfers()); })
        .def("alive", [](const Sim& s) { return out(s.alive()); })
        .def_readonly("now", &Sim::now)
        .def_readonly("events", &Sim::events)
        // the event numbers taken (what the 2^40 limit counts: with ns3_ties a start takes
        // two, its end of serialisation's and its arrival's, though only queued ends are run)
        .def_property_readonly("event_numbers", &Sim::event_numbers)
        .def_readonly("headroom_violations", &Sim::headroom_violations)
        .def_readonly("deadlock_at", &Sim::deadlock_at)
        .def_readonly("deadlock_ports", &Sim::deadlock_ports)
        .def_readonly("tcp_gave_up", &Sim::tcp_gave_up)
        .def("pool_capacity", &Sim::pool_capacity)
        .def_readonly("heap_max", &Sim::heap_max)
        .def("events_by_type", [](const Sim& s) { return out(s.events_by_type); })
        .def("node_start", [](const Sim& s) { return out(s.node_start); })
        .def("node_end", [](const Sim& s) { return out(s.node_end); })
        .def("node_retx", [](const Sim& s) { return out(s.node_retx); })
        .def("node_stranded", [](const Sim& s) { return out(s.node_stranded); })
        .def("sample_times", [](const Sim& s) { return out(s.samples.t); })
        .def("sample_queues", [](const Sim& s) { return out(s.samples.q); })
        // upto >= 0: the figures as closed at that time without changing the run (a look
        // mid-run); upto < 0: as they stand (after finish(), the run's figures)
        .def("link_stats", [](const Sim& s, int64_t upto) {
            std::vector<Sim::LinkFigures> f;
            f.reserve(s.links.size());
            for (const Link& L : s.links)
                f.push_back(upto >= 0 ? s.figures_at(L, upto)
                                      : Sim::LinkFigures{L.stat_bytes, L.stat_pkts,
                                                         L.stat_busy, L.stat_pause,
                                                         L.q_area_bytes, L.q_area_pkts});
            auto col = [&](auto get) {
                using T = decltype(get(f[0]));
                py::array_t<T> a(f.size());
                auto* p = a.mutable_data();
                for (size_t i = 0; i < f.size(); ++i) p[i] = get(f[i]);
                return a;
            };
            py::dict d;
            d["bytes"] = col([](const Sim::LinkFigures& x) { return x.bytes; });
            d["packets"] = col([](const Sim::LinkFigures& x) { return x.pkts; });
            d["busy_ps"] = col([](const Sim::LinkFigures& x) { return x.busy; });
            d["drops"] = per_link<int64_t>(s, [](const Link& L) { return L.stat_drops; });
            d["ecn_marks"] = per_link<int64_t>(s, [](const Link& L) { return L.stat_ecn; });
            d["pause_ps"] = col([](const Sim::LinkFigures& x) { return x.pause; });
            d["queue_max_packets"] =
                per_link<int64_t>(s, [](const Link& L) { return L.stat_qmax_pkts; });
            d["queue_max_bytes"] =
                per_link<int64_t>(s, [](const Link& L) { return L.stat_qmax_bytes; });
            d["queue_area_bytes_ps"] =
                col([](const Sim::LinkFigures& x) { return x.area_bytes; });
            d["queue_area_packets_ps"] =
                col([](const Sim::LinkFigures& x) { return x.area_pkts; });
            return d;
        }, py::arg("upto") = -1);
}
