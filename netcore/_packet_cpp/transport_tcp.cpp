// TCP NewReno (RFC 5681 / 6582, as ns-3's TcpSocketBase + TcpNewReno with classic recovery)
// and DCTCP (RFC 8257, ns-3 TcpDctcp). Sequence numbers count segments of the connection's
// stream; cwnd and ssthresh are bytes, as in ns-3.
#include <algorithm>
#include <cmath>

#include "sim.hpp"

namespace pk {

static constexpr int64_t SSTHRESH_INF = int64_t(1) << 62;

void Sim::tcp_open(int32_t c) {
    Conn& C = conns[c];
    C.alpha = cfg.dctcp_alpha_init;
    C.rto = cfg.init_rto;
    C.ssthresh = SSTHRESH_INF;
    if (!cfg.handshake) {
        C.state = 1;
        C.cwnd = (int64_t)cfg.init_cwnd * C.mss;
        tcp_try_send(c);
        return;
    }
    C.state = 0;
    C.syn_tries = 0;
    C.peer_wnd = 65535;  // what the SYN-ACK will advertise (unscaled, RFC 7323 section 2.2)
    tcp_send_syn(c);
}

void Sim::tcp_send_syn(int32_t c) {
    Conn& C = conns[c];
    const int32_t pid = new_packet(c, SYN, 0, cfg.syn_bytes + cfg.l2_header, false);
    C.syn_ts = now;
    send_packet(pid);
    Conn& C2 = conns[c];
    // ns-3 ConnTimeout, doubled on every retry; at most TIME_LIMIT, so that `now + wait`
    // (now <= TIME_LIMIT) cannot wrap
    const int shift = std::min(C2.syn_tries, 20);
    const ps_t wait = cfg.conn_timeout > (TIME_LIMIT >> shift) ? TIME_LIMIT
                                                               : cfg.conn_timeout << shift;
    C2.rto_deadline = now + wait;
    tcp_schedule_rto(C2, c);
}

void Sim::tcp_schedule_rto(Conn& C, int32_t c) {
    if (C.rto_pending && C.rto_evt <= C.rto_deadline) return;  // caught when that event fires
    eq.push(C.rto_deadline, EV_RTO, c);
    C.rto_pending = true;
    C.rto_evt = C.rto_deadline;
}

void Sim::tcp_on_synack(int32_t c, ps_t ts) {
    Conn& C = conns[c];
    if (C.state != 0 || C.dead || C.done) return;
    C.state = 1;
    tcp_rtt_sample(C, now - ts);
    C.cwnd = (int64_t)cfg.init_cwnd * C.mss;
    C.rto_deadline = NEVER;
    // the third packet of the handshake goes out before the data, as in ns-3
    send_packet(new_packet(c, HSACK, 0, cfg.ack_bytes + cfg.l2_header, false));
    tcp_try_send(c);
}

void Sim::tcp_rtt_sample(Conn& C, ps_t m) {
    // RFC 6298 / ns-3 RttMeanDeviation: alpha 1/8, beta 1/4
    const double x = (double)m;
    if (!C.have_rtt) {
        C.srtt = x;
        C.rttvar = x / 2;
        C.have_rtt = true;
    } else {
        C.rttvar = 0.75 * C.rttvar + 0.25 * std::fabs(C.srtt - x);
        C.srtt = 0.875 * C.srtt + 0.125 * x;
    }
    const double rto = C.srtt + std::max((double)cfg.clock_granularity, 4 * C.rttvar);
    C.rto = std::min<ps_t>(cfg.max_rto, std::max<ps_t>(cfg.min_rto, (ps_t)std::llround(rto)));
}

void Sim::tcp_arm_rto(int32_t c) {
    Conn& C = conns[c];
    C.rto_deadline = now + C.rto;
    tcp_schedule_rto(C, c);
}

void Sim::tcp_send_seg(int32_t c, int32_t seg) {
    Conn& C = conns[c];
    const int32_t payload = seg_payload(C, seg);
    if (seg < C.high_tx) ++node_retx[C.xfer[seg_xfer(C, seg)]];
    const int32_t pid =
        new_packet(c, DATA, seg, payload + cfg.l3l4_header + cfg.l2_header, false);
    if (conns[c].rto_deadline == NEVER) tcp_arm_rto(c);
    send_packet(pid);
}

void Sim::tcp_try_send(int32_t c) {
    Conn& C = conns[c];
    if (C.state != 1 || C.done || C.dead) return;
    int64_t allow = C.cwnd;
    // RFC 3042 limited transmit: one new segment for each of the first two duplicate ACKs
    if (cfg.limited_transmit && !C.in_rec && C.dupacks > 0 && C.dupacks < cfg.dupack_threshold)
        allow += (int64_t)C.dupacks * C.mss;
    // the peer window counts payload bytes in flight including the next segment's: the first
    // flight after a handshake is 65535 bytes (7 segments at MSS 8948), as in ns-3 and Linux
    while (C.snd_nxt < C.nseg && (int64_t)(C.snd_nxt - C.snd_una + 1) * C.mss <= allow &&
           (int64_t)(C.snd_nxt - C.snd_una) * C.mss + seg_payload(C, C.snd_nxt) <= C.peer_wnd) {
        const int32_t s = C.snd_nxt++;
        if (C.snd_nxt > C.high_tx) {
            tcp_send_seg(c, s);
            conns[c].high_tx = conns[c].snd_nxt;
        } else {
            tcp_send_seg(c, s);
        }
    }
}

void Sim::tcp_send_ack(int32_t c, bool ece, ps_t ts) {
    const int32_t pid = new_packet(c, ACK, conns[c].rcv_nxt, cfg.ack_bytes + cfg.l2_header, true);
    Pkt& p = pool[pid];
    p.ts = ts;
    if (ece) p.flags |= F_ECE;
    conns[c].delack_n = 0;
    ++conns[c].delack_gen;  // cancels a pending delayed-ACK timer
    conns[c].delack_pending = false;
    send_packet(pid);
}

void Sim::tcp_delack(int32_t c, int64_t gen) {
    Conn& C = conns[c];
    if (gen != C.delack_gen || C.dead) return;
    C.delack_pending = false;
    if (C.delack_n > 0) tcp_send_ack(c, C.last_ce, C.last_ts);
}

// receiver: mark a segment, move rcv_nxt over what is contiguous (ring bitmap of size 2^k)
static inline bool bit_get(const std::vector<uint64_t>& b, int32_t s) {
    const size_t mask = b.size() * 64 - 1;
    const size_t i = (size_t)s & mask;
    return (b[i >> 6] >> (i & 63)) & 1;
}
static inline void bit_set(std::vector<uint64_t>& b, int32_t s, bool v) {
    const size_t mask = b.size() * 64 - 1;
    const size_t i = (size_t)s & mask;
    if (v) b[i >> 6] |= (uint64_t(1) << (i & 63));
    else b[i >> 6] &= ~(uint64_t(1) << (i & 63));
}

void Sim::tcp_on_data(int32_t pid) {
    const Pkt p = pool[pid];
    const int32_t c = p.conn;
    Conn& C = conns[c];
    if (C.dead) return;
    const bool ce = p.flags & F_CE;
    const bool dctcp = cfg.transport == T_DCTCP;
    // DCTCP receiver with delayed ACKs: a change of CE state flushes the pending ACK at once
    if (dctcp && cfg.delayed_ack && ce != C.last_ce && C.delack_n > 0)
        tcp_send_ack(c, C.last_ce, C.last_ts);
    Conn& R = conns[c];
    R.last_ce = ce;
    R.last_ts = p.ts;
    const int32_t s = p.seq;
    const int32_t before = R.rcv_nxt;
    if (s == R.rcv_nxt) {
        ++R.rcv_nxt;
        if (R.ooo_used)  // (a flag in line 2: the vector's own header is a line further)
            while (bit_get(R.ooo, R.rcv_nxt)) { bit_set(R.ooo, R.rcv_nxt, false); ++R.rcv_nxt; }
    } else if (s > R.rcv_nxt) {
        const size_t need = (size_t)(s - R.rcv_nxt) + 1;
        if (R.ooo.empty() || need > R.ooo.size() * 64) {
            size_t bits = 64;
            while (bits < need * 2) bits <<= 1;
            std::vector<uint64_t> nb(bits / 64, 0);
            if (!R.ooo.empty()) {
                const size_t old = R.ooo.size() * 64;
                for (size_t k = 0; k < old; ++k) {  // re-place every bit by its absolute segment
                    const int32_t seg = R.rcv_nxt + (int32_t)((k - (size_t)R.rcv_nxt) & (old - 1));
                    if ((R.ooo[k >> 6] >> (k & 63)) & 1) bit_set(nb, seg, true);
                }
            }
            R.ooo.swap(nb);
            R.ooo_used = true;
        }
        bit_set(R.ooo, s, true);
    }
    const bool in_order = (s == before) && (R.rcv_nxt == before + 1);
    if (!cfg.delayed_ack || !in_order) {
        tcp_send_ack(c, dctcp && ce, p.ts);
    } else {
        ++R.delack_n;
        if (R.delack_n >= cfg.delack_count) {
            tcp_send_ack(c, dctcp && ce, p.ts);
        } else if (!R.delack_pending) {
            R.delack_pending = true;
            eq.push(now + cfg.delack_timeout, EV_DELACK, c, R.delack_gen);
        }
    }
    tcp_rx_advance(c);
}

void Sim::tcp_rx_advance(int32_t c) {
    Conn& C = conns[c];
    while (C.rcv_nxt >= C.rx_end) {  // rx_end = xend[rx_head]: no vector read per segment
        const int32_t node = C.xfer[C.rx_head++];
        C.rx_end = C.rx_head < C.xfer.size() ? C.xend[C.rx_head]
                                             : std::numeric_limits<int32_t>::max();
        transfer_done(node);
    }
    // a connection of its own closes when its transfer is complete (the sender learns of it
    // through the ACKs already on their way; it sends nothing more)
    if (!cfg.warm_connections && C.rx_end == std::numeric_limits<int32_t>::max())
        C.done = true;  // every transfer received (rx_end, not xfer.size(): one line fewer)
}

void Sim::tcp_on_ack(int32_t pid) {
    const Pkt p = pool[pid];
    const int32_t c = p.conn;
    Conn& C = conns[c];
    if (C.done || C.dead || C.state != 1) return;
    const int32_t a = p.seq;
    const bool ece = p.flags & F_ECE;
    const bool dctcp = cfg.transport == T_DCTCP;
    const int64_t mss = C.mss;
    C.peer_wnd = int64_t(1) << 62;  // every ACK of data carries the scaled (never limiting) window
    if (a > C.snd_una) {
        const int32_t acked = a - C.snd_una;
        tcp_rtt_sample(C, now - p.ts);
        if (dctcp) {  // one observation window per RTT (ns-3 TcpDctcp::PktsAcked)
            C.win_acked += acked * mss;
            if (ece) C.win_marked += acked * mss;
            if (a >= C.win_end) {
                const double F = C.win_acked > 0 ? (double)C.win_marked / (double)C.win_acked : 0;
                C.alpha = (1 - cfg.dctcp_g) * C.alpha + cfg.dctcp_g * F;
                C.win_acked = C.win_marked = 0;
                C.win_end = C.snd_nxt;
            }
        }
        C.snd_una = a;
        if (C.snd_nxt < a) C.snd_nxt = a;
        C.backoff = 0;
        if (C.in_rec) {
            if (a >= C.recover) {  // full ACK: leave recovery with cwnd = ssthresh
                C.in_rec = false;
                C.cwnd = C.ssthresh;
                C.dupacks = 0;
            } else {  // partial ACK (RFC 6582): resend the next hole, deflate
                C.cwnd = std::max<int64_t>(mss, C.cwnd - acked * mss + mss);
                tcp_send_seg(c, a);
            }
        } else {
            C.dupacks = 0;
            // ns-3 TcpNewReno: slow start adds one segment per ACK, then congestion avoidance
            int32_t left = acked;
            if (C.cwnd < C.ssthresh) { C.cwnd += mss; --left; }
            if (C.cwnd >= C.ssthresh && left > 0)
                C.cwnd += std::max<int64_t>(1, (int64_t)((double)mss * mss / (double)C.cwnd));
        }
        Conn& D = conns[c];
        if (D.cwr && D.snd_una >= D.cwr_end) D.cwr = false;
        if (D.snd_una >= D.snd_nxt) D.rto_deadline = NEVER;
        else tcp_arm_rto(c);
    } else if (a == C.snd_una && C.snd_nxt > C.snd_una) {
        ++C.dupacks;
        if (C.in_rec) {
            C.cwnd += mss;  // window inflation for each further duplicate
        } else if (C.dupacks == cfg.dupack_threshold) {
            const int64_t flight = (int64_t)(C.high_tx - C.snd_una) * mss;
            C.ssthresh = std::max<int64_t>(2 * mss, flight / 2);
            C.recover = C.high_tx;
            C.in_rec = true;
            C.cwnd = C.ssthresh + (int64_t)cfg.dupack_threshold * mss;
            tcp_send_seg(c, a);
        }
    } else {
        return;
    }
    Conn& E = conns[c];
    if (dctcp && ece && !E.cwr && !E.in_rec) {  // once per window: cwnd *= (1 - alpha/2)
        E.ssthresh = std::max<int64_t>(2 * mss, (int64_t)((double)E.cwnd * (1 - E.alpha / 2)));
        E.cwnd = E.ssthresh;
        E.cwr = true;
        E.cwr_end = E.high_tx;
    }
    tcp_try_send(c);
}

void Sim::tcp_rto(int32_t c) {
    Conn& C = conns[c];
    if (C.state == 0) {
        if (++C.syn_tries > cfg.syn_retries) { ++tcp_gave_up; strand_conn(c); return; }
        C.rto_deadline = NEVER;
        tcp_send_syn(c);
        return;
    }
    if (C.snd_una >= C.snd_nxt) { C.rto_deadline = NEVER; return; }
    // guard: give up after data_retries timeouts in a row without progress (ns-3 DataRetries)
    if (++C.backoff > cfg.data_retries) { ++tcp_gave_up; strand_conn(c); return; }
    const int64_t flight = (int64_t)(C.high_tx - C.snd_una) * C.mss;
    C.ssthresh = std::max<int64_t>(2 * (int64_t)C.mss, flight / 2);
    C.cwnd = C.mss;
    C.in_rec = false;
    C.cwr = false;
    C.dupacks = 0;
    C.snd_nxt = C.snd_una;  // go back N
    C.rto = std::min<ps_t>(cfg.max_rto, C.rto * 2);
    C.rto_deadline = NEVER;
    tcp_try_send(c);
}

}  // namespace pk
