// Event loop, links (queue + pipe), routing of packets, faults and the schedule DAG.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "sim.hpp"

namespace pk {

Sim::Sim(const Config& cfg_, int32_t n_hosts_, bool hosts_forward_, uint64_t seed,
         std::vector<int32_t> dsrc, std::vector<int32_t> ddst, std::vector<double> dbw,
         std::vector<ps_t> dlat, std::vector<int64_t> adj_ptr_, std::vector<int32_t> adj_link_,
         std::vector<int8_t> kind_, std::vector<int32_t> nsrc_, std::vector<int32_t> ndst_,
         std::vector<int64_t> size_, std::vector<ps_t> dur_, std::vector<ps_t> start_,
         std::vector<int64_t> child_ptr_, std::vector<int64_t> child_idx_,
         std::vector<int32_t> indeg_, std::vector<ps_t> ftime_, std::vector<int32_t> flink_,
         std::vector<int8_t> fkind_, std::vector<double> ffactor_)
    : cfg(cfg_), n_hosts(n_hosts_), hosts_forward(hosts_forward_),
      rng_state(seed * 0x2545F4914F6CDD1DULL + 0x1234567ULL),
      adj_ptr(std::move(adj_ptr_)), adj_link(std::move(adj_link_)), kind(std::move(kind_)),
      nsrc(std::move(nsrc_)), ndst(std::move(ndst_)), size(std::move(size_)),
      dur(std::move(dur_)), start(std::move(start_)), child_ptr(std::move(child_ptr_)),
      child_idx(std::move(child_idx_)), indeg(std::move(indeg_)), ftime(std::move(ftime_)),
      flink(std::move(flink_)), fkind(std::move(fkind_)), ffactor(std::move(ffactor_)) {
    n_nodes = static_cast<int32_t>(adj_ptr.size()) - 1;
    eager = (cfg.transport == T_TCP || cfg.transport == T_DCTCP) && !cfg.ns3_ties;
    if (dsrc.size() >= (size_t(1) << EventQueue::LINK_BITS))
        throw std::invalid_argument("packet engine: at most 2^23 directed links");
    if (kind.size() >= (size_t)std::numeric_limits<int32_t>::max())  // node ids are int32
        throw std::overflow_error("packet engine: at most 2^31 - 1 schedule nodes");
    links.resize(dsrc.size());
    for (size_t l = 0; l < dsrc.size(); ++l) {
        Link& L = links[l];
        L.src = dsrc[l];
        L.dst = ddst[l];
        L.base_bw = dbw[l];
        L.lat = dlat[l];
        L.ps_per_byte = 1e12 / dbw[l];
    }
    sw_bytes.assign(n_nodes, 0);
    const size_t n = kind.size();
    n_unfinished = (int64_t)n;
    node_start.assign(n, -1);
    node_end.assign(n, -1);
    node_retx.assign(n, 0);
    node_stranded.assign(n, 0);
    node_conn.assign(n, -1);
    npath_off.assign(n, -1);
    npath_len.assign(n, 0);
    nreach.assign(n, 1);
    ndetour.assign(n, 0);
    if (cfg.warm_connections) warm.assign(static_cast<size_t>(n_hosts) * n_hosts, -1);
    // faults first: at equal times the fabric changes before traffic starts on it
    for (size_t i = 0; i < ftime.size(); ++i) eq.push(ftime[i], EV_FAULT, static_cast<int32_t>(i));
    for (size_t i = 0; i < n; ++i)
        if (indeg[i] == 0) eq.push(start[i], EV_NODE_READY, static_cast<int32_t>(i));
    if (cfg.sample_interval > 0) eq.push(0, EV_SAMPLE, 0);
}

int Sim::run() { return advance(NEVER, false); }

// The loop of advance(NEVER) would stop before its first event: nothing queued, every
// transfer done and no packet out (the timers left are stale), or the next event past max_time.
bool Sim::idle() {
    return eq.empty() || (n_unfinished == 0 && pool.in_use() == 0) ||
           (cfg.max_time > 0 && eq.top_time() > cfg.max_time);
}

// Runs events in (time, seq) order until `limit` (events at `limit` included) or, with
// stop_on_done, until every event at the time stamp of the first transfer completion has run
// (returns 2; the completions are in done_log). Returns 1 when a reroute is due, 0 otherwise.
int Sim::advance(ps_t limit, bool stop_on_done) {
    stop_for_reroute = false;
    const ps_t stop = std::min(limit, TIME_LIMIT);  // one comparison per event for both
    while (!eq.empty()) {
        // all work done and nothing on the wire: what is left are stale timers
        if (n_unfinished == 0 && pool.in_use() == 0) break;
        const ps_t t = eq.top_time();
        if (cfg.max_time > 0 && t > cfg.max_time) break;
        if (t > stop) {
            if (t > TIME_LIMIT && limit > TIME_LIMIT)
                throw std::overflow_error(
                    "packet engine: the simulated clock would pass 2^62 ps (4.61e12 us, 53 "
                    "days), the longest time it represents; the run does not finish within "
                    "it (set engine.max_time_s to stop earlier, or use the flow engine)");
            break;
        }
        if (stop_on_done && !done_log.empty() && t > now) return 2;
        Event e = eq.pop();
        now = e.t;
        cur_seq = e.seq;
        ++events;
        ++events_by_type[e.type];
        if (eq.size() > heap_max) heap_max = eq.size();
        if (e.type <= EV_NODE_DONE) last_activity = now;
        dispatch(e);
        if (stop_for_reroute) return 1;
        if (now - last_activity > DEADLOCK_CHECK_PS && now >= next_deadlock_check) {
            next_deadlock_check = now + DEADLOCK_CHECK_PS;
            const int64_t f = frozen();
            if (f > 0) {
                // every unfinished transfer is stuck: strand them; their connections die, so
                // their timers stop and the loop ends (co-simulation: transfers added later
                // run, and are checked again)
                if (deadlock_at < 0) deadlock_at = last_activity;
                deadlock_ports = std::max(deadlock_ports, f);
                for (size_t c = 0; c < conns.size(); ++c) {
                    const Conn& C = conns[c];
                    if (!C.done && !C.dead && C.rx_head < C.xfer.size())
                        strand_conn((int32_t)c);
                }
                for (size_t i = 0; i < kind.size(); ++i)
                    if (node_end[i] < 0) node_stranded[i] = 1;
                next_deadlock_check = NEVER;
            }
        }
    }
    if (stop_on_done && !done_log.empty()) return 2;
    if (limit != NEVER && limit > now) now = limit;
    return 0;
}

// A deadlock of a lossless fabric, checked exactly: no packet is on a wire or being
// serialised (no link event pending), nothing that could restart a port is pending (no PFC
// frame, fault, reroute, node start or end, SYN-ACK; only transport timers, which change
// rates, not pauses), and every port with waiting packets is paused by PFC or waits for a
// credit. Then no port can ever send again: a pause is lifted only when the paused buffer
// drains, which needs a port downstream to send. Returns the number of such ports (0: none,
// or not frozen).
int64_t Sim::frozen() const {
    if (n_unfinished == 0 || eq.link_events_pending()) return 0;
    if (eq.any_other([](const Event& e) {
            return e.type != EV_RTO && e.type != EV_DELACK && e.type != EV_PACE &&
                   e.type != EV_ALPHA && e.type != EV_RATE && e.type != EV_SAMPLE;
        }))
        return 0;
    int64_t held = 0;
    for (const Link& L : links) {
        // on the wire (eager ports, tcp/dctcp, keep their waiting packets in the pipe too,
        // and nothing pauses them)
        if (!L.pipe.empty()) return 0;
        if (L.q.empty()) continue;
        if (!(L.paused || L.blocked)) return 0;
        ++held;
    }
    return held;
}

// Co-simulation: appends transfers (no parents) with their paths, ready at start[k] (>= now).
int32_t Sim::add_transfers(const std::vector<int32_t>& src, const std::vector<int32_t>& dst,
                           const std::vector<int64_t>& sz, const std::vector<ps_t>& st,
                           const std::vector<int64_t>& ptr, const std::vector<int32_t>& lk,
                           const std::vector<uint8_t>& reach) {
    const int32_t first = (int32_t)kind.size();
    const size_t k = src.size();
    if (kind.size() + k >= (size_t)std::numeric_limits<int32_t>::max())
        throw std::overflow_error("packet engine: at most 2^31 - 1 schedule nodes");
    const int64_t cp = child_ptr.empty() ? 0 : child_ptr.back();
    if (child_ptr.empty()) child_ptr.push_back(0);
    check_path_room(lk.size());
    const int32_t base = (int32_t)path_links.size();
    path_links.insert(path_links.end(), lk.begin(), lk.end());
    for (size_t i = 0; i < k; ++i) {
        if (ptr[i + 1] - ptr[i] > 65535)
            throw std::invalid_argument("packet engine: a path longer than 65535 hops");
        kind.push_back(0);
        nsrc.push_back(src[i]);
        ndst.push_back(dst[i]);
        size.push_back(sz[i]);
        dur.push_back(0);
        start.push_back(st[i]);
        child_ptr.push_back(cp);
        indeg.push_back(0);
        node_start.push_back(-1);
        node_end.push_back(-1);
        node_retx.push_back(0);
        node_stranded.push_back(0);
        node_conn.push_back(-1);
        // per-hop policies route a transfer per packet unless it comes with a path of its
        // own (a pair inside a scale-up domain, which must not take the leaf: _Router.push)
        npath_off.push_back(cfg.per_hop && ptr[i + 1] == ptr[i] ? -1 : base + (int32_t)ptr[i]);
        npath_len.push_back((int32_t)(ptr[i + 1] - ptr[i]));
        nreach.push_back(reach[i]);
        ndetour.push_back(links_down > 0);
    }
    n_unfinished += (int64_t)k;
    next_deadlock_check = 0;  // new traffic may freeze again
    for (size_t i = 0; i < k; ++i)
        eq.push(std::max(now, st[i]), EV_NODE_READY, first + (int32_t)i);
    return first;
}

std::vector<int32_t> Sim::take_done() {
    std::vector<int32_t> out;
    out.swap(done_log);
    return out;
}

int64_t Sim::pending() const {
    int64_t n = 0;
    for (size_t i = 0; i < kind.size(); ++i)
        if (node_end[i] < 0 && !node_stranded[i]) ++n;
    return n;
}

void Sim::dispatch(const Event& e) {
    switch (e.type) {
        case EV_ARRIVE: {
            Link& L = links[e.a];
            // stale: a fault removed (or re-timed) the packets it was for (eager ports only)
            if (L.pipe.empty() || L.pipe.front().ev_seq != e.seq) return;
            const PipeEntry pe = L.pipe.pop();
            // eager ports: the next packet has started by now (its start <= its predecessor's
            // arrival); drain gives it its event sequence number before it enters the heap
            if (eager && !L.pipe.empty() && (size_t)L.nq == L.pipe.size()) drain(L, now);
            if (!L.pipe.empty()) {
                const PipeEntry& h = L.pipe.front();
                eq.push_seq(h.t_arr, h.ev_seq, EV_ARRIVE, e.a);
                // its record is read when it arrives; with ~10^5 packets in flight it has
                // left the caches since it was sent. So has its connection's, which the
                // transport reads when the packet reaches a host (lines 0-2 of Conn).
                const char* pp = reinterpret_cast<const char*>(&pool[h.pid]);
                __builtin_prefetch(pp);  // a 40-byte record spans two lines half of the time
                __builtin_prefetch(pp + sizeof(Pkt) - 1);
                L.pipe.prefetch(1, false);  // the entry after it: the next arrival reads it
                if (L.dst < n_hosts) {
                    const char* cp = reinterpret_cast<const char*>(&conns[h.hint]);
                    __builtin_prefetch(cp);
                    __builtin_prefetch(cp + 64);
                    __builtin_prefetch(cp + 128);
                } else if (h.hint >= 0) {  // the link it takes next, whose port it joins
                    const char* lp = reinterpret_cast<const char*>(&links[h.hint]);
                    __builtin_prefetch(lp);  // lines 0-2 of Link
                    __builtin_prefetch(lp + 64);
                    __builtin_prefetch(lp + 128);
                }
            }
            const int32_t pid = pe.pid;
            Pkt& p = pool[pid];
            if (pe.epoch != L.epoch || (p.flags & F_LOST)) {
                drop(e.a, pid);  // the link failed under it, or a bit error killed it
                return;
            }
            p.prev = e.a;
            at_node(pid, L.dst, L.dst < n_hosts ? -1 : pe.hint);
            return;
        }
        case EV_TXDONE: {
            Link& L = links[e.a];
            if (!L.txdone_pending || e.t != L.txdone_at) return;  // superseded
            L.txdone_pending = false;
            const bool wake = L.wake_waiters;
            L.wake_waiters = false;
            try_start(e.a);
            if (wake && links[e.a].q.empty()) service_waiters(e.a);  // transport_rate.cpp
            return;
        }
        case EV_NODE_READY: node_ready(e.a); return;
        case EV_NODE_DONE: node_end[e.a] = now; node_finish(e.a); return;
        case EV_RTO: {
            Conn& C = conns[e.a];
            if (!C.rto_pending || now != C.rto_evt) return;  // superseded by an earlier one
            C.rto_pending = false;
            C.rto_evt = NEVER;
            if (C.done || C.dead || C.rto_deadline == NEVER) return;
            if (now < C.rto_deadline) {  // lazily re-armed timer: fire at the new deadline
                tcp_schedule_rto(C, e.a);
                return;
            }
            tcp_rto(e.a);
            return;
        }
        case EV_DELACK: tcp_delack(e.a, e.b); return;
        case EV_PACE:
            conns[e.a].pace_pending = false;
            rate_wake(e.a, false);
            return;
        case EV_ALPHA: dcqcn_alpha_timer(e.a, e.b); return;
        case EV_RATE: dcqcn_rate_timer(e.a, e.b); return;
        case EV_PFC: {
            Link& L = links[e.a];
            if (e.b) {
                if (!L.paused && L.up) { L.paused = true; L.pause_since = now; }
            } else if (L.paused) {
                L.paused = false;
                L.stat_pause += now - L.pause_since;
                try_start(e.a);
            }
            return;
        }
        case EV_FAULT: apply_fault(e.a); return;
        case EV_REROUTE: stop_for_reroute = true; return;
        case EV_SAMPLE: sample(); return;
        case EV_SYNACK: {  // the listener's answer to a SYN (see deliver)
            if (conns[e.a].dead) return;
            const int32_t r = new_packet(e.a, SYNACK, 0, cfg.syn_bytes + cfg.l2_header, true);
            pool[r].ts = (ps_t)e.b;  // echo the SYN's timestamp
            send_packet(r);
            return;
        }
    }
}

// ------------------------------------------------------------------ schedule DAG
void Sim::node_ready(int32_t node) {
    node_start[node] = now;
    if (kind[node] == 0) {
        if (!nreach[node]) { node_stranded[node] = 1; return; }
        if (size[node] == 0) { transfer_done(node); return; }
        start_transfer(node);
    } else {
        eq.push(now + dur[node], EV_NODE_DONE, node);
    }
}

void Sim::node_finish(int32_t node) {
    --n_unfinished;
    last_activity = now;
    for (int64_t j = child_ptr[node]; j < child_ptr[node + 1]; ++j) {
        int64_t ch = child_idx[j];
        if (--indeg[ch] == 0) eq.push(std::max(now, start[ch]), EV_NODE_READY, (int32_t)ch);
    }
}

void Sim::transfer_done(int32_t node) {
    node_end[node] = now;
    if (log_done) done_log.push_back(node);
    node_finish(node);
}

void Sim::strand_conn(int32_t c) {
    Conn& C = conns[c];
    C.dead = true;
    for (size_t i = C.rx_head; i < C.xfer.size(); ++i) node_stranded[C.xfer[i]] = 1;
}

// ------------------------------------------------------------------ routing of packets
int32_t Sim::choose_hop(int32_t u, int32_t d) {
    if (dst_row.empty()) return -1;
    const int32_t r = dst_row[d];
    if (r < 0) return -1;
    const int32_t* D = dist.data() + static_cast<size_t>(r) * n_nodes;
    const int32_t du = D[u];
    if (du <= 0) return -1;
    int32_t best = -1, count = 0;
    double best_load = 0;
    for (int64_t j = adj_ptr[u]; j < adj_ptr[u + 1]; ++j) {
        const int32_t l = adj_link[j];
        const Link& L = links[l];
        const int32_t v = L.dst;
        if (D[v] != du - 1 || !L.up) continue;
        if (v < n_hosts && v != d && !hosts_forward) continue;
        if (cfg.adaptive) {
            if (eager) {
                Link& M = links[l];
                drain(M, now - 1);
                const double load = (double)M.qbytes +
                    (M.cur_end > now ? (M.cur_end - now) / M.ps_per_byte : 0.0);
                if (best < 0 || load < best_load) { best = l; best_load = load; }
                continue;
            }
            double load = (double)L.qbytes + (double)L.reserved * cfg.mtu +
                          (L.busy_until > now ? (L.busy_until - now) / L.ps_per_byte : 0.0);
            if (best < 0 || load < best_load) { best = l; best_load = load; }
        } else {
            ++count;  // reservoir sampling: uniform among the candidates, seeded
            if (urand() * count < 1.0) best = l;
        }
    }
    return best;
}

int32_t Sim::next_link(Pkt& p, int32_t node) {
    if (p.nxt >= 0) return p.nxt;
    if (p.path_off >= 0) {
        if (p.hop >= p.path_len) return -1;
        return (p.flags & F_REV) ? (path_links[p.path_off + p.path_len - 1 - p.hop] ^ 1)
                                 : path_links[p.path_off + p.hop];
    }
    return choose_hop(node, pkt_dst(p));
}

// the link a packet will take after link l (on which it is about to be sent), -1 if l is last
int32_t Sim::link_after(Pkt& p, int32_t l) {
    if (p.path_off >= 0) {
        if (p.hop >= p.path_len) return -1;
        return (p.flags & F_REV) ? (path_links[p.path_off + p.path_len - 1 - p.hop] ^ 1)
                                 : path_links[p.path_off + p.hop];
    }
    const int32_t w = links[l].dst;
    const int32_t d = pkt_dst(p);
    if (w == d) return -1;
    return choose_hop(w, d);
}

// `next`: the packet's next link as read from its path when it was sent on the link it came
// over (PipeEntry::hint), or -1; used only while no reroute has changed any path since, when it
// is exactly what next_link would read
void Sim::at_node(int32_t pid, int32_t node, int32_t next) {
    Pkt& p = pool[pid];
    // hop-by-hop forwarding after a reroute (as ns-3's routing tables): a packet sent on a
    // connection's old path follows its new path from the first node of it the packet
    // reaches; off the new path it keeps its old one (where a dead link drops it). Not for a
    // packet whose next link is already chosen (ideal: a credit is reserved on it).
    // (only once some connection has changed paths: the check reads the connection record,
    // a cache miss per hop in large runs)
    if (paths_changed && p.path_off >= 0 && p.prev >= 0 && p.nxt < 0) {
        const Conn& C = conns[p.conn];
        if (C.path_off >= 0 && C.path_off != p.path_off) {
            const bool rev = p.flags & F_REV;
            for (int32_t h = 0; h < C.path_len; ++h) {
                const int32_t l = rev ? (path_links[C.path_off + C.path_len - 1 - h] ^ 1)
                                      : path_links[C.path_off + h];
                if (links[l].src == node) {
                    p.path_off = C.path_off;
                    p.path_len = (uint16_t)C.path_len;
                    p.hop = (uint16_t)h;
                    break;
                }
            }
        }
    }
    const bool arrived = p.path_off >= 0 ? (p.hop >= p.path_len) : (node == pkt_dst(p));
    if (arrived) {
        deliver(pid);
        pool.release(pid);
        return;
    }
    const int32_t l = (next >= 0 && !paths_changed && p.nxt < 0) ? next : next_link(p, node);
    if (l < 0) {  // no route from here (per-hop routing with the destination cut off)
        drop(p.prev, pid);
        return;
    }
    ++p.hop;
    enqueue(l, pid);
}

void Sim::qchange(Link& L) {
    L.q_area_bytes += (double)L.qbytes * (double)(now - L.q_last);
    L.q_area_pkts += (double)L.nq * (double)(now - L.q_last);
    L.q_last = now;
}

int64_t Sim::room(int32_t l) const {
    const Link& L = links[l];
    if (cfg.transport == T_IDEAL)
        return cfg.buffer_packets - L.nq - L.reserved;
    return cfg.host_queue_packets - L.nq;
}

// Room for a sender's own next packet on its first link. ideal: at most host_queue_packets of
// the source's own frames wait in its NIC (as dcqcn's paced senders keep), so the flows of a
// NIC take turns packet by packet: with the credit room (buffer_packets) one flow queued up to
// 1000 frames before a flow starting 3 ns later got one, and three 300 kB flows ended in series
// (27.0 / 51.9 / 76.8 us) instead of together. Transit packets of a forwarding host keep the
// credit room.
int64_t Sim::send_room(int32_t l) const {
    if (cfg.transport != T_IDEAL) return room(l);
    return std::min(room(l), cfg.host_queue_packets - links[l].nown);
}

void Sim::enqueue(int32_t l, int32_t pid) {
    Link& L = links[l];
    Pkt& p = pool[pid];
    if (p.flags & F_RESV) { --L.reserved; p.flags &= ~F_RESV; }  // the credit becomes a slot
    p.nxt = -1;
    if (!L.up) {
        drop(l, pid);
        service_waiters(l);
        return;
    }
    if (eager) {
        drain(L, now - 1);
        if (cfg.switch_buffer_bytes > 0 && L.src >= n_hosts) drain_node(L.src);
    }
    const bool transit = p.prev >= 0;  // the source's own NIC queue never drops (back-pressure)
    const bool lossy = cfg.transport == T_TCP || cfg.transport == T_DCTCP;
    if (transit) {
        const bool full = L.nq >= cfg.buffer_packets ||
                          (cfg.buffer_bytes > 0 && L.qbytes + p.wire > cfg.buffer_bytes) ||
                          (cfg.switch_buffer_bytes > 0 && L.src >= n_hosts &&
                           sw_bytes[L.src] + p.wire > cfg.switch_buffer_bytes);
        if (full && lossy) { drop(l, pid); return; }
    }
    if (!transit && cfg.transport == T_IDEAL) ++L.nown;
    // a switch egress marks: the sender's own NIC queue stands for its socket buffer (a lone
    // flow marked itself there and halved its window on an idle path). DCTCP marks every
    // packet, as ns-3's TcpDctcp sends SYNs and pure ACKs ECN-capable too (what a marked one
    // does: dctcp_rx_ce); DCQCN only data.
    if (cfg.transport == T_DCTCP && transit && L.nq >= cfg.ecn_k) {
        p.flags |= F_CE;
        ++L.stat_ecn;
    }
    if (p.type == DATA) {
        if (cfg.transport == T_DCQCN && transit) {
            // DCQCN's congestion point is a switch egress: a sender's own NIC queue never marks
            const double q = (double)L.qbytes;
            bool mark = false;
            if (q >= cfg.kmax_bytes) mark = true;
            else if (q > cfg.kmin_bytes)
                mark = urand() < cfg.pmax * (q - cfg.kmin_bytes) / (cfg.kmax_bytes - cfg.kmin_bytes);
            if (mark) { p.flags |= F_CE; ++L.stat_ecn; }
        }
    }
    if (cfg.transport == T_DCQCN && transit && cfg.pfc_xoff_bytes > 0) {
        // PFC accounts per ingress port (the buffer is shared by the egress queues): the
        // lossless promise holds while no ingress exceeds its allowance (xoff + headroom)
        Link& I = links[p.prev];
        I.ingress_bytes += p.wire;
        int64_t allowance = cfg.buffer_packets * (int64_t)(cfg.mtu + cfg.l2_header);
        if (cfg.buffer_bytes > 0) allowance = std::min(allowance, cfg.buffer_bytes);
        if (I.ingress_bytes > allowance) ++headroom_violations;
        pfc_check(p.prev);
    }
    qchange(L);
    if (!eager) L.q.push(pid);  // eager ports: the waiting packets are the pipe's newest
    ++L.nq;
    L.qbytes += p.wire;
    sw_bytes[L.src] += p.wire;
    if (L.nq > L.stat_qmax_pkts) L.stat_qmax_pkts = L.nq;
    if (L.qbytes > L.stat_qmax_bytes) L.stat_qmax_bytes = L.qbytes;
    if (eager) schedule_tx(l, pid);
    else try_start(l);
}

// Eager ports (tcp/dctcp): the packet that just joined the queue starts serialising when the
// port has finished everything before it (FIFO, never paused), so its start and arrival times
// are fixed now: it enters the pipe at once and stays counted as waiting (L.nq) until drain()
// sees its start time pass; drain() also gives its arrival event its sequence number.
// Tie order (docs/packet_engine.md, "Eager ports"): a start at t that follows the end of the
// previous packet is seen after the other events at t (drain(L, now - 1)); a packet joining
// an idle port starts at once.
void Sim::schedule_tx(int32_t l, int32_t pid, bool fresh) {
    Link& L = links[l];
    Pkt& p = pool[pid];
    const ps_t st = std::max(now, L.busy_until);
    const ps_t ser = round_pos((double)p.wire * L.ps_per_byte);
    L.busy_until = st + ser;
    if (!fresh) {  // re-timed after a rate change: the caller drains and pushes
        L.pipe.push(PipeEntry{st + ser + L.lat, ~uint64_t(0), pid, L.epoch, p.wire,
                              hint(L, p)});
        return;
    }
    if (cfg.loss_rate > 0 && urand() < cfg.loss_rate) p.flags |= F_LOST;
    const bool was_empty = L.pipe.empty();
    L.pipe.push(PipeEntry{st + ser + L.lat, ~uint64_t(0), pid, L.epoch, p.wire, hint(L, p)});
    L.pipe.prefetch(L.pipe.size() + 1, true);  // the slot after next: the next push's line
    if (st <= now) drain(L, now);  // an idle port starts at once (and takes its sequence)
    if (was_empty) {  // an empty pipe means an idle port: the packet started above
        const PipeEntry& pe = L.pipe.at(0);
        eq.push_seq(pe.t_arr, pe.ev_seq, EV_ARRIVE, l);
    }
}

void Sim::try_start(int32_t l) {
    Link& L = links[l];
    if (L.q.empty() || L.paused || L.blocked || !L.up) return;
    // ns3_ties: ns-3's port is busy until its TransmitComplete runs; at that very picosecond,
    // an event numbered before it (an arrival, typically) still finds the port busy, and the
    // packet waits for TransmitComplete to start it (validation/results/tie_jitter.md)
    if (L.busy_until > now ||
        (cfg.ns3_ties && L.busy_until == now && L.txdone_seq > cur_seq)) {
        if (!L.txdone_pending) {
            if (cfg.ns3_ties) eq.push_seq(L.busy_until, L.txdone_seq, EV_TXDONE, l);
            else eq.push(L.busy_until, EV_TXDONE, l);
            L.txdone_pending = true;
            L.txdone_at = L.busy_until;
        }
        return;
    }
    const int32_t pid = L.q.front();
    Pkt& p = pool[pid];
    if (cfg.transport == T_IDEAL) {  // hop-by-hop credit: send only into a queue with room
        const int32_t nl = link_after(p, l);
        if (nl >= 0 && links[nl].up) {
            if (room(nl) <= 0) {
                L.blocked = true;
                links[nl].waiters.push(l);
                return;
            }
            ++links[nl].reserved;
            p.flags |= F_RESV;
        }
        p.nxt = nl;
    } else if (p.path_off < 0) {
        p.nxt = -1;
    }
    qchange(L);
    L.q.pop();
    --L.nq;
    if (cfg.transport == T_IDEAL && p.prev < 0) --L.nown;
    L.qbytes -= p.wire;
    sw_bytes[L.src] -= p.wire;
    if (cfg.transport == T_DCQCN && p.prev >= 0 && cfg.pfc_xoff_bytes > 0) {
        links[p.prev].ingress_bytes -= p.wire;
        pfc_check(p.prev);
    }
    // serialisation: bytes x (ps per byte) in floating point, rounded once per packet
    const ps_t ser = round_pos((double)p.wire * L.ps_per_byte);
    L.busy_until = now + ser;
    L.stat_busy += ser;
    L.stat_bytes += p.wire;
    ++L.stat_pkts;
    if (cfg.loss_rate > 0 && urand() < cfg.loss_rate) p.flags |= F_LOST;
    // ns-3 (PointToPointNetDevice::TransmitStart) schedules the TransmitComplete, then the far
    // end's Receive: the end of this serialisation is numbered now, before the arrival, even
    // when its event is pushed later (when the next packet joins)
    if (cfg.ns3_ties) L.txdone_seq = eq.take_seq();
    const PipeEntry pe{now + ser + L.lat, eq.take_seq(), pid, L.epoch, p.wire, hint(L, p)};
    if (L.pipe.empty()) eq.push_seq(pe.t_arr, pe.ev_seq, EV_ARRIVE, l);
    L.pipe.push(pe);
    if (!L.q.empty()) {
        if (cfg.ns3_ties) eq.push_seq(L.busy_until, L.txdone_seq, EV_TXDONE, l);
        else eq.push(L.busy_until, EV_TXDONE, l);
        L.txdone_pending = true;
        L.txdone_at = L.busy_until;
    }
    service_waiters(l);
}

void Sim::service_waiters(int32_t l) {
    if (cfg.transport != T_IDEAL && cfg.transport != T_DCQCN) return;
    while (!links[l].waiters.empty() && (room(l) > 0 || !links[l].up)) {
        // a sender first in line whose own frames fill its NIC share waits for one of them
        // to leave (try_start serves the waiters again then); the line keeps its order
        if (links[l].waiters.front() < 0 && links[l].up && send_room(l) <= 0) break;
        const int32_t w = links[l].waiters.pop();
        if (w >= 0) {
            links[w].blocked = false;
            try_start(w);
        } else {
            conns[~w].waiting = false;
            if (links[l].up) rate_wake(~w, true);  // on a dead first link: wait for reroute
        }
    }
}

void Sim::release_credit(Pkt& p) {
    if (!(p.flags & F_RESV)) return;
    p.flags &= ~F_RESV;
    --links[p.nxt].reserved;
    service_waiters(p.nxt);
}

void Sim::drop(int32_t l, int32_t pid) {
    Pkt& p = pool[pid];
    if (l >= 0) ++links[l].stat_drops;
    if (p.flags & F_RESV) release_credit(p);
    on_drop(p);
    pool.release(pid);
}

// ------------------------------------------------------------------ PFC
void Sim::pfc_check(int32_t l) {
    Link& L = links[l];
    if (!L.xoff && L.ingress_bytes >= cfg.pfc_xoff_bytes) {
        L.xoff = true;
        eq.push(now + L.lat, EV_PFC, l, 1);  // the PAUSE frame travels back over the link
    } else if (L.xoff && L.ingress_bytes <= cfg.pfc_xon_bytes) {
        L.xoff = false;
        eq.push(now + L.lat, EV_PFC, l, 0);
    }
}

// ------------------------------------------------------------------ faults
void Sim::apply_fault(int32_t i) {
    const int32_t l = flink[i];
    Link& L = links[l];
    if (fkind[i] == 0) {  // down: what is queued and on the wire is lost
        if (!L.up) return;
        ++links_down;
        if (eager) drain(L, now - 1);  // faults come first at equal times
        // eager ports: the waiting packets are the newest pipe entries; they die here
        const size_t n_wait = eager ? (size_t)L.nq : 0;
        L.up = false;
        ++L.epoch;
        qchange(L);
        for (size_t k = 0; L.nq > 0; ++k) {  // oldest first
            const int32_t pid = eager ? L.pipe.at(L.pipe.size() - n_wait + k).pid : L.q.pop();
            --L.nq;
            Pkt& p = pool[pid];
            L.qbytes -= p.wire;
            sw_bytes[L.src] -= p.wire;
            if (cfg.transport == T_DCQCN && p.prev >= 0 && cfg.pfc_xoff_bytes > 0) {
                links[p.prev].ingress_bytes -= p.wire;
                pfc_check(p.prev);
            }
            drop(l, pid);
        }
        L.nown = 0;
        L.pipe.drop_back(n_wait);
        L.busy_until = now;
        L.cur_end = std::min(L.cur_end, now);
        L.blocked = false;
        if (L.paused) { L.paused = false; L.stat_pause += now - L.pause_since; }
        service_waiters(l);  // upstream links blocked on us send (and lose) their packets
        if (now != last_reroute) {
            eq.push(now + cfg.reroute_delay, EV_REROUTE, 0);
            last_reroute = now;
        }
    } else {
        if (!L.up) {
            // a dead link back: transfers not yet started that were left without a path or
            // sent around it are routed again now (as the flow engine does), so the link is
            // used by later decisions; without this they stayed stranded / on the detour
            --links_down;
            link_came_up = true;
            if (now != last_reroute) {
                eq.push(now, EV_REROUTE, 0);
                last_reroute = now;
            }
        }
        L.up = true;
        // eager ports: a packet starting at `now` takes the new rate; drain at the old one
        // (drain derives start times from the rate the waiting packets were timed at)
        if (eager) drain(L, now - 1);
        L.ps_per_byte = 1e12 / (L.base_bw * (fkind[i] == 1 ? ffactor[i] : 1.0));
        if (eager) {  // packets not yet serialising were timed at the old rate: time them again
            const size_t n = (size_t)L.nq;
            if (n > 0) {
                std::vector<int32_t> w(n);
                for (size_t k = 0; k < n; ++k) w[k] = L.pipe.at(L.pipe.size() - n + k).pid;
                L.pipe.drop_back(n);  // never the pipe's head (a head has left the queue)
                const bool was_empty = L.pipe.empty();
                L.busy_until = L.cur_end;
                // loss was drawn already; drain only once every waiting packet is back in the
                // pipe (drain finds them as the newest nq entries)
                for (int32_t pid : w) schedule_tx(l, pid, false);
                drain(L, was_empty ? now : now - 1);  // an idle port starts at once (rule 1)
                if (was_empty) {
                    const PipeEntry& h = L.pipe.at(0);
                    eq.push_seq(h.t_arr, h.ev_seq, EV_ARRIVE, l);
                }
            }
        } else {
            try_start(l);
        }
        service_waiters(l);
    }
}

std::vector<uint8_t> Sim::alive() const {
    std::vector<uint8_t> a(links.size());
    for (size_t l = 0; l < links.size(); ++l) a[l] = links[l].up;
    return a;
}

std::vector<int32_t> Sim::dead_transfers() {
    std::vector<int32_t> out;
    std::vector<uint8_t> mark(kind.size(), 0);
    const bool revisit = link_came_up;
    link_came_up = false;
    // a path is dead when a link of it is down either way: its ACKs, SYN-ACKs and CNPs walk
    // it backwards over l ^ 1 (engine.py two_way gives the new paths the same rule)
    auto path_dead = [&](int32_t off, int32_t len) {
        if (off < 0) return true;  // per-hop routing: refresh every unfinished transfer
        for (int32_t k = 0; k < len; ++k) {
            const int32_t l = path_links[off + k];
            if (!links[l].up || !links[l ^ 1].up) return true;
        }
        return false;
    };
    for (size_t i = 0; i < kind.size(); ++i) {
        // (a transfer under way without a path is found through its connection, below)
        if (kind[i] != 0 || node_end[i] >= 0 || node_stranded[i]) continue;
        const bool unstarted = revisit && node_start[i] < 0;
        if (!nreach[i]) {
            if (unstarted) { out.push_back((int32_t)i); mark[i] = 1; }
            continue;
        }
        if (path_dead(npath_off[i], npath_len[i]) || (unstarted && ndetour[i])) {
            out.push_back((int32_t)i);
            mark[i] = 1;
        }
    }
    // warm connections keep the path of their first transfer; a TCP connection left without
    // a path keeps its old one and asks again whenever that path is still dead
    for (const Conn& C : conns)
        if (!C.done && !C.dead && !mark[C.owner] && path_dead(C.path_off, C.path_len)) {
            out.push_back(C.owner);
            mark[C.owner] = 1;
        }
    return out;
}

void Sim::set_paths(const std::vector<int32_t>& nodes, const std::vector<int64_t>& ptr,
                    const std::vector<int32_t>& lk, const std::vector<uint8_t>& reach) {
    check_path_room(lk.size());
    const int32_t base = (int32_t)path_links.size();
    path_links.insert(path_links.end(), lk.begin(), lk.end());
    for (size_t k = 0; k < nodes.size(); ++k) {
        const int32_t node = nodes[k];
        if (ptr[k + 1] - ptr[k] > 65535)  // Pkt::path_len is 16 bits
            throw std::invalid_argument("packet engine: a path longer than 65535 hops");
        npath_off[node] = cfg.per_hop && ptr[k + 1] == ptr[k] ? -1 : base + (int32_t)ptr[k];
        npath_len[node] = (int32_t)(ptr[k + 1] - ptr[k]);
        nreach[node] = reach[k];
        ndetour[node] = links_down > 0;
    }
    if (conns.empty()) return;
    for (size_t c = 0; c < conns.size(); ++c) {
        Conn& C = conns[c];
        if (C.done || C.dead) continue;
        if (!nreach[C.owner]) {
            // TCP under way keeps its old path, whose dead link drops what it sends (as a
            // router with no route does), and its timers: it resumes if a later reroute (the
            // link coming back) gives it a path, and gives up after data_retries timeouts.
            // Rate-based senders would resend into the dead link at once, forever: stranded.
            if (!tcp_like()) strand_conn((int32_t)c);
            continue;
        }
        if (C.path_off != npath_off[C.owner]) paths_changed = true;
        C.path_off = npath_off[C.owner];
        C.path_len = npath_len[C.owner];
    }
    wake_all();
}

void Sim::set_distances(const std::vector<int32_t>& row, const std::vector<int32_t>& d,
                        int32_t) {
    dst_row = row;
    dist = d;
}

void Sim::sample() {
    samples.t.push_back((double)now * 1e-12);
    for (const Link& L : links) samples.q.push_back(eager ? waiting(L, now - 1) : (int32_t)L.nq);
    // Re-arm only while something else can still happen: a transfer with no path left keeps
    // n_unfinished > 0 forever, and the sampler alone must not keep the run alive.
    if ((n_unfinished > 0 || pool.in_use() > 0) && !eq.empty())
        eq.push(now + cfg.sample_interval, EV_SAMPLE, 0);
}

void Sim::finish() {
    now = last_activity;
    for (Link& L : links) {
        if (eager) drain(L, now);
        if (now > L.q_last) qchange(L);
        if (L.paused && now > L.pause_since) {
            L.stat_pause += now - L.pause_since;
            L.pause_since = now;
        }
    }
}

// ------------------------------------------------------------------ packets of a connection
int32_t Sim::seg_xfer(const Conn& C, int32_t seg) const {
    return (int32_t)(std::upper_bound(C.xend.begin(), C.xend.end(), seg) - C.xend.begin());
}

int32_t Sim::seg_payload(const Conn& C, int32_t seg) const {
    if (seg < C.full_below) return C.mss;  // before the first transfer's last segment
    const int32_t i = seg_xfer(C, seg);
    const int32_t first = i == 0 ? 0 : C.xend[i - 1];
    const int32_t last = C.xend[i] - 1;
    if (seg < last) return C.mss;
    return (int32_t)(C.xbytes[i] - (int64_t)(last - first) * C.mss);
}

int32_t Sim::new_packet(int32_t c, uint8_t type, int32_t seq, int32_t wire, bool rev) {
    const int32_t pid = pool.alloc();
    Pkt& p = pool[pid];
    const Conn& C = conns[c];
    p.ts = now;
    p.conn = c;
    p.seq = seq;
    p.wire = wire;
    p.path_off = C.path_off;
    p.path_len = C.path_len;
    p.hop = 0;
    p.prev = -1;
    p.nxt = -1;
    p.type = type;
    p.flags = rev ? F_REV : 0;
    return pid;
}

void Sim::send_packet(int32_t pid) {
    Pkt& p = pool[pid];
    const Conn& C = conns[p.conn];
    at_node(pid, (p.flags & F_REV) ? C.dst : C.src);
}

// ------------------------------------------------------------------ transports: dispatch
void Sim::start_transfer(int32_t node) {
    const bool tcp = cfg.transport == T_TCP || cfg.transport == T_DCTCP;
    const int32_t s = nsrc[node], d = ndst[node];
    int32_t c = -1;
    bool fresh = true;
    if (tcp && cfg.warm_connections) {
        int32_t w = warm[(size_t)s * n_hosts + d];
        if (w >= 0 && !conns[w].dead) { c = w; fresh = false; }
    }
    if (c < 0) {
        if (conns.size() >= (size_t)std::numeric_limits<int32_t>::max())  // ids are int32
            throw std::overflow_error("packet engine: more than 2^31 - 1 connections");
        c = (int32_t)conns.size();
        conns.emplace_back();
        Conn& C = conns.back();
        C.src = s;
        C.dst = d;
        C.owner = node;
        C.path_off = npath_off[node];
        C.path_len = npath_len[node];
        C.mss = cfg.mtu - cfg.l3l4_header;
        if (tcp && cfg.warm_connections) warm[(size_t)s * n_hosts + d] = c;
    }
    Conn& C = conns[c];
    // segments of this transfer (no `size + mss - 1`: it could wrap near 2^63)
    const int64_t segs = size[node] / C.mss + (size[node] % C.mss != 0);
    if (segs > MAX_SEGMENTS - C.nseg)
        throw std::overflow_error(
            "packet engine: transfer " + std::to_string(node) + " (" +
            std::to_string(size[node]) + " bytes) takes its connection past " +
            std::to_string(MAX_SEGMENTS) + " segments of " + std::to_string(C.mss) +
            " bytes, the most a connection numbers");
    C.xfer.push_back(node);
    C.nseg += (int32_t)segs;
    C.xend.push_back(C.nseg);
    C.xbytes.push_back(size[node]);
    if (C.xfer.size() == 1) C.full_below = C.nseg - 1;
    if (C.rx_head + 1 == C.xfer.size()) C.rx_end = C.nseg;  // the receiver waits for this one
    node_conn[node] = c;
    if (tcp) {
        if (fresh) tcp_open(c);
        else if (C.state == 1) tcp_try_send(c);
        return;
    }
    if (cfg.transport == T_DCQCN) {
        const int32_t fl = first_link(C);
        // the NIC's rate now (a degraded link's, not its nominal one: from the nominal rate
        // the first CNP only cut the sender down to what the link already ran at)
        // (a link at its nominal rate keeps base_bw exactly: 1e12 / (1e12 / b) may differ)
        const Link& F = links[fl >= 0 ? fl : 0];
        C.line_rate = F.ps_per_byte == 1e12 / F.base_bw ? F.base_bw : 1e12 / F.ps_per_byte;
        C.rc = C.rt = C.line_rate;
        C.qalpha = 1.0;
        eq.push(now + cfg.alpha_timer, EV_ALPHA, c, C.alpha_gen);
        eq.push(now + cfg.rate_timer, EV_RATE, c, C.rate_gen);
    }
    rate_wake(c, false);
}

void Sim::deliver(int32_t pid) {
    const Pkt p = pool[pid];  // a copy: handlers allocate packets, which may move the pool
    Conn& C = conns[p.conn];
    switch (p.type) {
        case DATA:
            if (cfg.transport == T_TCP || cfg.transport == T_DCTCP) tcp_on_data(pid);
            else rate_on_data(pid);
            return;
        case ACK: tcp_on_ack(pid); return;
        case SYN: {
            if (C.dead) return;
            // ns-3's listener answers in an event of its own at now (ProcessListen ->
            // ScheduleNow(CompleteFork)): after everything already due at this instant, echoing
            // the first SYN it received (Conn::listen_echo)
            if (C.listen_echo < 0) C.listen_echo = p.ts;
            eq.push(now, EV_SYNACK, p.conn, (int64_t)C.listen_echo);
            return;
        }
        case SYNACK: tcp_on_synack(p.conn, p.ts); return;
        case HSACK:  // the listener's DCTCP sees its CE mark (segment 0)
            if (cfg.transport == T_DCTCP && !C.dead) dctcp_rx_ce(p.conn, 0, p.flags & F_CE);
            return;
        case CNP: dcqcn_on_cnp(p.conn); return;
    }
}

void Sim::on_drop(Pkt& p) {
    if (p.type != DATA || cfg.transport == T_TCP || cfg.transport == T_DCTCP) return;
    Conn& C = conns[p.conn];
    if (C.done || C.dead) return;
    // ideal/dcqcn: the loss is known at once (an oracle NACK) and the packet is resent
    C.retx.push_back(p.seq);
    ++node_retx[C.owner];
    if (!C.pace_pending && !C.waiting) {
        eq.push(now, EV_PACE, p.conn);
        C.pace_pending = true;
    }
}

void Sim::wake_all() {
    for (size_t c = 0; c < conns.size(); ++c) {
        Conn& C = conns[c];
        if (C.done || C.dead) continue;
        if (cfg.transport == T_IDEAL || cfg.transport == T_DCQCN) {
            if (!C.pace_pending && !C.waiting) {
                eq.push(now, EV_PACE, (int32_t)c);
                C.pace_pending = true;
            }
        }
    }
}

}  // namespace pk
