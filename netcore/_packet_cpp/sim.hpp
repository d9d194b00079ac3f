// The packet-level simulator: links (a FIFO port queue + serialisation, then a propagation
// pipe), hosts that run the transports, the schedule DAG, faults. One class, split over
// several .cpp files by job: sim_core.cpp (event loop, links, routing, faults, schedule),
// transport_tcp.cpp (TCP NewReno / DCTCP), transport_rate.cpp (ideal and DCQCN senders).
#pragma once
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "config.hpp"
#include "event_queue.hpp"
#include "huge_alloc.hpp"
#include "packet.hpp"
#include "ring.hpp"

namespace pk {

constexpr ps_t NEVER = std::numeric_limits<ps_t>::max();
// Integer ranges (netcore/packet/limits.py checks the inputs against the same figures, so a
// scenario beyond them is refused before it runs; these are the core's own guards):
// * the clock: no event is run past TIME_LIMIT (2^62 ps, 53.4 days). Every delay added to a
//   time is at most 2^60 ps (options, latencies, one frame's serialisation: limits.py; the
//   SYN timeout is capped at TIME_LIMIT), so `now + delay` cannot wrap before the guard sees
//   it. Start times, fault times and compute durations are at most TIME_LIMIT (limits.py).
// * a connection's stream is numbered in int32 segments (Conn::nseg, Pkt::seq), and INT32_MAX
//   marks "no transfer pending" at the receiver (Conn::rx_end): at most MAX_SEGMENTS.
constexpr ps_t TIME_LIMIT = ps_t(1) << 62;
// A lossless fabric (PFC, or the ideal transport's credits) with a cyclic buffer dependency can
// deadlock: every port holding packets is paused or out of credit, forever, while DCQCN's
// timers keep the event loop busy. After this much simulated time without a packet or node
// event the loop checks for that state (Sim::frozen) and, when it holds, strands what is
// stuck (its connections close, so their timers stop and the loop ends).
constexpr ps_t DEADLOCK_CHECK_PS = 1'000'000'000;  // 1 ms
constexpr int64_t MAX_SEGMENTS = std::numeric_limits<int32_t>::max() - 1;

// std::llround for x >= 0 without the libm call (same result: halves round up; x - trunc(x)
// is exact in double for every x below 2^52, and larger doubles are integers already)
inline int64_t round_pos(double x) {
    const int64_t r = static_cast<int64_t>(x);
    return r + (x - static_cast<double>(r) >= 0.5);
}

enum EvType : int32_t {
    EV_ARRIVE = 0, EV_TXDONE, EV_NODE_READY, EV_NODE_DONE, EV_RTO, EV_DELACK, EV_PACE,
    EV_ALPHA, EV_RATE, EV_PFC, EV_FAULT, EV_REROUTE, EV_SAMPLE, EV_SYNACK
};

// Field order is cache order: lines 0-2 are what a packet joining, starting on or leaving a
// port touches (Sim::dispatch prefetches them for the link a packet takes next); the PFC,
// credit and ns3_ties state of the other port kinds comes after.
struct alignas(64) Link {
    // line 0
    int32_t src, dst;
    ps_t lat;               // propagation, ps
    double ps_per_byte;     // 1e12 / (bw * factor); kept in floating point (see docs)
    ps_t busy_until = 0;    // end of the last serialisation started (eager ports: scheduled)
    ps_t cur_end = 0;       // eager ports: end of the last serialisation that has started
    int64_t qbytes = 0;
    int64_t nq = 0;         // waiting packets (not yet serialising); eager ports: the newest
                            // nq entries of the pipe, other ports: the entries of q
    uint32_t epoch = 0;
    bool up = true;
    // line 1
    RingT<PipeEntry> pipe;  // packets on the wire / propagating, in arrival order
    Ring q;                 // ideal/dcqcn/ns3_ties ports: ids of the waiting packets
    // line 2: statistics
    int64_t stat_bytes = 0, stat_pkts = 0;
    ps_t stat_busy = 0;
    int64_t stat_qmax_pkts = 0, stat_qmax_bytes = 0;
    double q_area_bytes = 0, q_area_pkts = 0;  // time integrals (byte*ps, pkt*ps)
    ps_t q_last = 0;
    // line 3 on
    double base_bw;         // bytes/s
    bool paused = false;    // PFC: the far end asked us to stop
    bool pause_pending = false;  // a PAUSE/RESUME is on its way (value in pause_target)
    bool blocked = false;   // ideal: head packet waits for a credit downstream
    bool txdone_pending = false;
    bool xoff = false;      // PFC: we (dst) have paused this link
    uint64_t txdone_seq = 0;  // ns3_ties: number of the TX_DONE, taken at the start
    ps_t txdone_at = -1;    // time of the one live TX_DONE event (others are stale)
    int64_t reserved = 0;   // ideal: credits held by packets on their way here
    int64_t nown = 0;       // ideal: the source's own packets among the nq waiting
    bool wake_waiters = false;  // ideal: serve the waiters when this serialisation ends
    Ring waiters;           // ideal/dcqcn: upstream links (>=0) and connections (~conn) waiting
    int64_t ingress_bytes = 0;  // PFC: bytes that came over this link and wait at dst
    int64_t stat_drops = 0, stat_ecn = 0;
    ps_t stat_pause = 0, pause_since = 0;
};

// Field order is cache order: a TCP ACK or data packet reaching its host touches the first
// three 64-byte lines (sender state, then receiver state), which Sim::dispatch prefetches
// when the packet becomes the head of its last link's pipe. Vectors and the rate-based
// senders' state come after.
struct alignas(64) Conn {
    // line 0: identity, flags, sender sequence state
    int32_t src, dst;
    int32_t owner;          // schedule node whose path the connection uses
    int32_t path_off = -1, path_len = 0;
    bool done = false, dead = false;
    uint8_t state = 0;      // 0 closed/syn-sent, 1 established
    uint8_t ca = 0;         // congestion state (CaState in transport_tcp.cpp), ns-3's m_congState
    bool have_rtt = false, rto_pending = false;
    bool ooo_used = false;   // the receiver's out-of-order bitmap exists
    bool recover_active = false;  // ns-3 m_recoverActive: `recover` holds a recovery point
    bool first_partial = true;    // ns-3 m_isFirstPartialAck: the next partial ACK resets the RTO
    bool sb_any = false;     // some segment of the window has a scoreboard flag (sb)
    int32_t nseg = 0;
    int32_t mss = 0;
    int32_t snd_una = 0, high_tx = 0;  // first unacknowledged segment; first never sent
    int32_t dupacks = 0, recover = 0;
    int32_t full_below = 0;  // segments below this one carry a full MSS (seg_payload's fast path)
    int32_t high_sack = -1;  // highest SACKed segment (ns-3 m_highestSack), -1: none
    // line 1: sender window and timer
    int64_t cwnd = 0, ssthresh = 0;
    // receive window the sender knows: 65535 from the SYN-ACK (its window field is never
    // scaled, RFC 7323 section 2.2) until the first ACK, which carries the scaled window
    int64_t peer_wnd = int64_t(1) << 62;
    double srtt = 0, rttvar = 0;
    ps_t rto = 0, rto_deadline = NEVER;
    int32_t backoff = 0, syn_tries = 0;
    // line 2: TCP receiver
    int32_t rcv_nxt = 0;
    int32_t rx_end = std::numeric_limits<int32_t>::max();  // xend[rx_head], max when none
    int32_t delack_n = 0;
    int32_t ooo_n = 0;      // out-of-order segments the receiver holds
    // DCTCP receiver (ns-3 TcpSocketBase::ForwardUp and TcpDctcp's CE state): the highest
    // segment whose CE mark counted (ns-3 m_ecnCESeq; the handshake's ACK stands at segment
    // 0, -1 before any), rcv_nxt when the previous packet arrived (m_priorRcvNxt)
    int32_t ce_seq = -1, prior_rcv_nxt = 0;
    bool delack_pending = false;
    bool last_ce = false;         // the last packet's CE counted (TcpDctcp m_ceState)
    bool delack_reserved = false; // TcpDctcp m_delayedAckReserved
    int64_t delack_gen = 0;
    ps_t last_ts = 0;
    size_t rx_head = 0;     // first transfer not yet completed at the receiver
    // the timestamp the listener echoes in every SYN-ACK: the first SYN it received (ns-3
    // keeps TS.Recent from that SYN; a retransmitted SYN is below the next expected
    // sequence number and leaves it), -1 before any
    ps_t listen_echo = -1;
    // time of the live EV_RTO event (rto_pending). A deadline moved later is caught lazily when
    // that event fires; one moved earlier (the first data segment after a SYN timer of 3 s, an
    // RTO shrunk by a new RTT sample) gets an event of its own, and later ones are then stale
    ps_t rto_evt = NEVER;
    // sender scoreboard (ns-3 TcpTxBuffer, transport_tcp_sack.cpp): bytes of the window's
    // segments flagged SACKed, lost and retransmitted, and the flags themselves (a ring indexed
    // by segment, all zero outside [snd_una, high_tx))
    int64_t sacked_b = 0, lost_b = 0, retx_b = 0;
    int32_t lost_upto = 0;   // every un-SACKed segment in [snd_una, lost_upto) is marked lost
    int32_t nx_hint = 0;     // every segment in [snd_una, nx_hint) is SACKed or retransmitted
    int32_t reno_hint = 0;   // every segment in [snd_una + 1, reno_hint) is SACKed
    int32_t acked_rem = 0;   // ns-3 m_bytesAckedNotProcessed
    std::vector<uint8_t> sb;
    // receiver: SACK blocks [lo, hi) in segments, most recent first (ns-3 TcpRxBuffer keeps 4)
    int32_t sk_lo[4], sk_hi[4];
    int32_t nsk = 0;
    // DCTCP sender (ns-3 TcpDctcp): alpha and its observation window, which ends when an ACK
    // reaches win_end (m_nextSeq, taken from next_tx; win_started: m_nextSeqFlag); next_tx is
    // ns-3's m_nextTxSequence; the sender's ECN state (EcnState below), the ACK of the last
    // ECE (m_ecnEchoSeq) and the segment that carried the last CWR (m_ecnCWRSeq); cwnd_cnt is
    // TcpLinuxReno's m_cWndCnt
    double alpha = 1.0;
    int64_t win_acked = 0, win_marked = 0;
    int32_t win_end = 0, next_tx = 0, ecn_echo = -1, ecn_cwr = -1, cwnd_cnt = 0;
    uint8_t ecn_state = 0;
    bool win_started = false;
    // the stream: transfers in order, each ends at segment xend[i]
    std::vector<int32_t> xfer, xend;
    std::vector<int64_t> xbytes;
    // TCP receiver: ring bitmap of out-of-order segments above rcv_nxt
    std::vector<uint64_t> ooo;
    // rate-based senders (ideal, dcqcn)
    int32_t next_new = 0, received = 0;
    std::vector<int32_t> retx;
    bool waiting = false;       // registered as a waiter on its first link
    bool pace_pending = false;
    ps_t next_send = 0;
    double rc = 0, rt = 0, qalpha = 1.0, line_rate = 0;
    int64_t bc_bytes = 0;
    int32_t t_cnt = 0, b_cnt = 0;
    int64_t alpha_gen = 0, rate_gen = 0;
    ps_t last_cnp = -1;         // receiver side (NP): last CNP sent
};

// The SACK blocks an ACK carries (at most 3 fit beside the timestamp option), kept beside the
// packet pool by packet id so that the 40-byte packet record does not grow (Pkt::flags F_SACK)
struct SackOpt {
    int32_t lo[3], hi[3];
    int32_t n;
};

struct SampleSeries {
    std::vector<double> t;
    std::vector<int32_t> q;  // row-major (n_samples, n_links)
};

class Sim {
public:
    Sim(const Config& cfg, int32_t n_hosts, bool hosts_forward, uint64_t seed,
        std::vector<int32_t> dsrc, std::vector<int32_t> ddst, std::vector<double> dbw,
        std::vector<ps_t> dlat, std::vector<int64_t> adj_ptr, std::vector<int32_t> adj_link,
        std::vector<int8_t> kind, std::vector<int32_t> nsrc, std::vector<int32_t> ndst,
        std::vector<int64_t> size, std::vector<ps_t> dur, std::vector<ps_t> start,
        std::vector<int64_t> child_ptr, std::vector<int64_t> child_idx,
        std::vector<int32_t> indeg, std::vector<ps_t> ftime, std::vector<int32_t> flink,
        std::vector<int8_t> fkind, std::vector<double> ffactor);

    // Runs until the end (returns 0) or until a reroute is due (returns 1).
    int run();
    int advance(ps_t limit, bool stop_on_done);
    int32_t add_transfers(const std::vector<int32_t>& src, const std::vector<int32_t>& dst,
                          const std::vector<int64_t>& size, const std::vector<ps_t>& start,
                          const std::vector<int64_t>& ptr, const std::vector<int32_t>& links,
                          const std::vector<uint8_t>& reachable);
    std::vector<int32_t> take_done();  // transfers completed since the last call, in order
    int64_t pending() const;           // transfers neither finished nor stranded
    bool idle();  // run() would run no event (what is left are stale timers)
    bool log_done = false;             // record completions (co-simulation)
    std::vector<int32_t> done_log;
    void set_paths(const std::vector<int32_t>& nodes, const std::vector<int64_t>& ptr,
                   const std::vector<int32_t>& links, const std::vector<uint8_t>& reachable);
    void set_distances(const std::vector<int32_t>& dst_row, const std::vector<int32_t>& dist,
                       int32_t n_rows);
    // unfinished transfers on a dead path; after a dead link came back, also those not yet
    // started that were left without a path or routed while a link was down (a detour)
    std::vector<int32_t> dead_transfers();
    std::vector<uint8_t> alive() const;
    void finish();  // close statistics (busy/pause/queue integrals) at the end time

    // results
    std::vector<ps_t> node_start, node_end;
    std::vector<int32_t> node_retx;
    std::vector<uint8_t> node_stranded;
    std::vector<Link> links;
    SampleSeries samples;
    uint64_t events = 0;
    std::vector<uint64_t> events_by_type = std::vector<uint64_t>(16, 0);
    size_t heap_max = 0;
    uint64_t event_numbers() const { return eq.next_seq(); }  // what the 2^40 limit counts
    ps_t now = 0;
    uint64_t cur_seq = 0;  // sequence number of the event being handled (ns3_ties)
    ps_t last_activity = 0;  // last packet or node event: the end of the run's useful work
    int64_t n_unfinished = 0;
    int64_t headroom_violations = 0;
    ps_t deadlock_at = -1;        // the first deadlock detected: its last packet event
    int64_t deadlock_ports = 0;   // ports holding packets that nothing can ever restart
    int64_t tcp_gave_up = 0;      // connections TCP abandoned after syn_retries / data_retries
    size_t pool_capacity() const { return pool.capacity(); }

    // A link's statistics as finish() would close them at `upto`, computed on copies: a look
    // mid-run (Session.result() after run_until) must change nothing, and drain() takes the
    // arrivals' event numbers (see waiting()) while closing the integrals moves q_last.
    struct LinkFigures {
        int64_t bytes, pkts;
        ps_t busy, pause;
        double area_bytes, area_pkts;
    };
    LinkFigures figures_at(const Link& L, ps_t upto) const {
        LinkFigures f{L.stat_bytes, L.stat_pkts, L.stat_busy, L.stat_pause, L.q_area_bytes,
                      L.q_area_pkts};
        ps_t last = L.q_last;
        int64_t nq = L.nq, qbytes = L.qbytes;
        for (; eager && nq > 0; --nq) {  // the waiting packets that started by `upto`
            const PipeEntry& pe = L.pipe.at(L.pipe.size() - (size_t)nq);
            const ps_t ser = round_pos((double)pe.wire * L.ps_per_byte);
            const ps_t t = pe.t_arr - L.lat - ser;
            if (t > upto) break;
            f.area_bytes += (double)qbytes * (double)(t - last);
            f.area_pkts += (double)nq * (double)(t - last);
            last = t;
            qbytes -= pe.wire;
            f.busy += ser;
            f.bytes += pe.wire;
            ++f.pkts;
        }
        if (upto > last) {
            f.area_bytes += (double)qbytes * (double)(upto - last);
            f.area_pkts += (double)nq * (double)(upto - last);
        }
        if (L.paused && upto > L.pause_since) f.pause += upto - L.pause_since;
        return f;
    }
private:
    friend struct TcpOps;
    Config cfg;
    int32_t n_hosts, n_nodes;
    bool hosts_forward;
    uint64_t rng_state;
    EventQueue eq;
    PacketPool pool;
    std::vector<int64_t> adj_ptr;
    std::vector<int32_t> adj_link;
    std::vector<int64_t> sw_bytes;  // per node: waiting bytes (shared switch buffer)
    // schedule
    std::vector<int8_t> kind;
    std::vector<int32_t> nsrc, ndst;
    std::vector<int64_t> size;
    std::vector<ps_t> dur, start;
    std::vector<int64_t> child_ptr, child_idx;
    std::vector<int32_t> indeg;
    std::vector<int32_t> node_conn;       // connection carrying each transfer
    // paths per schedule node (CSR in a growing array; reroutes append)
    std::vector<int32_t> npath_off, npath_len;
    std::vector<uint8_t> nreach;
    std::vector<uint8_t> ndetour;  // path set while some link was down (maybe a detour)
    int64_t links_down = 0;        // directed links down now
    bool link_came_up = false;     // a down link came back since the last dead_transfers()
    std::vector<int32_t> path_links;
    // per-hop routing: hop distance to destination hosts
    std::vector<int32_t> dst_row, dist;
    // faults
    std::vector<ps_t> ftime;
    std::vector<int32_t> flink;
    std::vector<int8_t> fkind;
    std::vector<double> ffactor;
    std::vector<Conn, HugeAlloc<Conn>> conns;
    std::vector<int32_t> warm;  // (src * n_hosts + dst) -> conn, warm connections only
    std::vector<SackOpt> sack_opt;  // by packet id: the blocks of an ACK flagged F_SACK
    bool stop_for_reroute = false;
    bool paths_changed = false;  // a reroute gave some live connection a new path
    // tcp/dctcp: a port is a FIFO nothing pauses or blocks, so a packet's start of
    // serialisation is known when it joins the queue (see schedule_tx); no end-of-serialisation
    // events. ideal/dcqcn (credits, PFC pauses) keep try_start and EV_TXDONE.
    bool eager = false;

    // rng (splitmix64): one stream for the run, consumed in event order -> deterministic
    double urand() {
        uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        z ^= z >> 31;
        return (z >> 11) * (1.0 / 9007199254740992.0);
    }

    // core (sim_core.cpp)
    void dispatch(const Event& e);
    void node_ready(int32_t node);
    void node_finish(int32_t node);
    void transfer_done(int32_t node);
    void strand_conn(int32_t c);
    bool tcp_like() const { return cfg.transport == T_TCP || cfg.transport == T_DCTCP; }
    int32_t next_link(Pkt& p, int32_t node);
    int32_t pkt_dst(const Pkt& p) const {  // destination host (per-hop routing)
        const Conn& C = conns[p.conn];
        return (p.flags & F_REV) ? C.src : C.dst;
    }
    int32_t choose_hop(int32_t node, int32_t dst_host);
    int32_t link_after(Pkt& p, int32_t l);
    void at_node(int32_t pid, int32_t node, int32_t next = -1);
    void enqueue(int32_t l, int32_t pid);
    void try_start(int32_t l);
    void schedule_tx(int32_t l, int32_t pid, bool fresh = true);  // fresh: just queued
    // eager ports: the waiting packets whose serialisation started at or before `upto` leave
    // the queue (queue integrals and link statistics are closed at each one's start time).
    // Most callers pass now - 1: a start at `now` that follows the end of the previous packet
    // is seen after the other events at `now` (the old EV_TXDONE usually ran after them).
    void drain(Link& L, ps_t upto) {
        while (L.nq > 0) {
            PipeEntry& pe = L.pipe.at(L.pipe.size() - (size_t)L.nq);
            // the start of serialisation is not stored: a waiting packet was timed at the
            // port's current rate (a rate change re-times the waiting ones, see apply_fault)
            const ps_t ser = round_pos((double)pe.wire * L.ps_per_byte);
            const ps_t t = pe.t_arr - L.lat - ser;
            if (t > upto) return;
            // the arrival event's sequence number is taken when the start is observed (as the
            // old end-of-serialisation event took it when the packet started), not at enqueue
            pe.ev_seq = eq.take_seq();
            L.q_area_bytes += (double)L.qbytes * (double)(t - L.q_last);
            L.q_area_pkts += (double)L.nq * (double)(t - L.q_last);
            L.q_last = t;
            --L.nq;
            L.qbytes -= pe.wire;
            sw_bytes[L.src] -= pe.wire;
            L.cur_end = t + ser;
            L.stat_busy += ser;
            L.stat_bytes += pe.wire;
            ++L.stat_pkts;
            // the next waiting packet's entry, read by the next drain: a host NIC's queue
            // holds ~10^3 entries written long ago
            if (L.nq > 0) L.pipe.prefetch(L.pipe.size() - (size_t)L.nq, false);
        }
    }
    // eager ports: how many packets still wait at `upto` (drain's count, without draining:
    // a drain takes the arrivals' event numbers, so an observer that drained, the queue
    // sampler, reordered arrivals tied at one picosecond)
    int32_t waiting(const Link& L, ps_t upto) const {
        int32_t k = 0;
        for (; k < L.nq; ++k) {
            const PipeEntry& pe = L.pipe.at(L.pipe.size() - (size_t)(L.nq - k));
            const ps_t ser = round_pos((double)pe.wire * L.ps_per_byte);
            if (pe.t_arr - L.lat - ser > upto) break;
        }
        return L.nq - k;
    }
    // PipeEntry::hint for packet p sent on link L (p.hop already counts L): on a link into a
    // host its connection, else the link it takes after L (its path's line was just read)
    int32_t hint(const Link& L, const Pkt& p) const {
        if (L.dst < n_hosts) return p.conn;
        if (p.path_off < 0 || p.hop >= p.path_len) return -1;
        return (p.flags & F_REV) ? (path_links[p.path_off + p.path_len - 1 - p.hop] ^ 1)
                                 : path_links[p.path_off + p.hop];
    }
    // path offsets are int32 (npath_off, Pkt::path_off): the flat path array stays below 2^31
    void check_path_room(size_t more) const {
        if (path_links.size() + more > (size_t)std::numeric_limits<int32_t>::max())
            throw std::overflow_error("packet engine: more than 2^31 path entries (links of "
                                      "every transfer's path, and of every reroute)");
    }
    void drain_node(int32_t u) {  // every output port of node u
        for (int64_t j = adj_ptr[u]; j < adj_ptr[u + 1]; ++j) drain(links[adj_link[j]], now - 1);
    }
    void service_waiters(int32_t l);
    int64_t room(int32_t l) const;
    int64_t send_room(int32_t l) const;
    void drop(int32_t l, int32_t pid);
    void release_credit(Pkt& p);
    void qchange(Link& L);
    void apply_fault(int32_t i);
    void pfc_check(int32_t l);
    void set_pause(int32_t l, bool on);
    void sample();
    int32_t new_packet(int32_t c, uint8_t type, int32_t seq, int32_t wire, bool rev);
    void send_packet(int32_t pid);
    int32_t seg_payload(const Conn& c, int32_t seg) const;
    int32_t seg_xfer(const Conn& c, int32_t seg) const;

    // transports
    void start_transfer(int32_t node);
    void deliver(int32_t pid);
    void on_drop(Pkt& p);
    // TCP / DCTCP (transport_tcp.cpp)
    void tcp_open(int32_t c);
    void tcp_send_syn(int32_t c);
    void tcp_try_send(int32_t c);
    void tcp_send_seg(int32_t c, int32_t seg);
    void tcp_on_data(int32_t pid);
    void tcp_send_ack(int32_t c, bool ece, ps_t ts, int32_t ack = -1);  // -1: rcv_nxt
    bool dctcp_rx_ce(int32_t c, int32_t seq, bool ce);  // a packet's CE, as ns-3 counts it
    void dctcp_on_ece(int32_t c, int32_t a, int32_t old_una, bool ece);
    void dctcp_pkts_acked(Conn& C, int64_t segs, int32_t a);
    void tcp_rx_advance(int32_t c);
    void tcp_on_ack(int32_t pid);
    void tcp_on_synack(int32_t c, ps_t ts);
    void tcp_rto(int32_t c);
    void tcp_arm_rto(int32_t c);
    void tcp_schedule_rto(Conn& C, int32_t c);  // push EV_RTO for C.rto_deadline unless one is due by then
    void tcp_delack(int32_t c, int64_t gen);
    void tcp_rtt_sample(Conn& c, ps_t echoed);  // a sample from the echoed timestamp
    void tcp_dupack(int32_t c);
    void tcp_enter_recovery(int32_t c);
    void tcp_do_retransmit(int32_t c);
    void tcp_new_ack(int32_t c, bool reset_rto);
    // sender scoreboard and receiver SACK list (transport_tcp_sack.cpp), ns-3 TcpTxBuffer /
    // TcpRxBuffer in segment units
    int64_t seg_bytes(const Conn& c, int32_t a, int32_t b) const;  // payload of [a, b)
    int64_t sb_pipe(const Conn& c) const;
    void sb_fit(Conn& c);
    int64_t sb_update(Conn& c, const SackOpt& o);
    void sb_update_lost_count(Conn& c);
    bool sb_is_lost(Conn& c, int32_t seg);
    int32_t sb_next_seg(Conn& c, bool rule3);
    void sb_add_reno_sack(Conn& c);
    void sb_mark_head_lost(Conn& c);
    void sb_reset_reno_sack(Conn& c);
    void sb_set_sent_list_lost(Conn& c, bool reset_sack);
    int64_t sb_discard(Conn& c, int32_t ack);
    void sb_mark_retx(Conn& c, int32_t seg);
    bool sb_resent_unsacked(Conn& c, int32_t seg);
    void rx_sack_add(Conn& r, int32_t seg);
    void rx_sack_clear(Conn& r);
    // ideal / DCQCN (transport_rate.cpp)
    void rate_wake(int32_t c, bool from_service);
    int32_t first_link(Conn& c);
    bool rate_can_send(Conn& c);
    void rate_send_one(int32_t c, int32_t fl);
    void rate_on_data(int32_t pid);
    void dcqcn_on_cnp(int32_t c);
    void dcqcn_alpha_timer(int32_t c, int64_t gen);
    void dcqcn_rate_timer(int32_t c, int64_t gen);
    void dcqcn_increase(Conn& c);
    void wake_all();
    ps_t last_reroute = -1;
    ps_t next_deadlock_check = 0;
    int64_t frozen() const;  // ports frozen for good (>0: deadlock), see sim_core.cpp
};

}  // namespace pk
