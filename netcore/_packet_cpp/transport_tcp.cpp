// TCP as ns-3.44's TcpSocketBase + TcpNewReno + TcpClassicRecovery runs it, with SACK
// (RFC 2018 / 6675, ns-3's default) or without (NewReno on ns-3's guessed scoreboard), and
// DCTCP as ns-3's TcpDctcp runs it (RFC 8257's alpha on TcpLinuxReno's window growth, ECT on
// every packet, the CWR state of TcpSocketBase). Sequence numbers count segments of the connection's stream;
// cwnd and ssthresh are bytes, as in ns-3. The scoreboard (what is SACKed, lost, resent) is in
// transport_tcp_sack.cpp; this file is the state machine around it (ns-3's ReceivedAck,
// ProcessAck, DupAck, EnterRecovery, SendPendingData, ReTxTimeout).
#include <algorithm>
#include <cmath>

#include "sim.hpp"

namespace pk {

static constexpr int64_t SSTHRESH_INF = int64_t(1) << 62;

// ns-3 TcpSocketState::TcpCongState_t (CA_CWR: DCTCP's once-per-window cut after an ECE)
enum CaState : uint8_t { CA_OPEN = 0, CA_DISORDER = 1, CA_RECOVERY = 2, CA_LOSS = 3, CA_CWR = 4 };
// a DCTCP sender's ns-3 TcpSocketState::EcnState_t (the receiver's side is Conn::last_ce: with
// TcpDctcp the ECE of an ACK is the CE of the last packet that arrived)
enum EcnState : uint8_t { ECN_IDLE = 0, ECN_ECE_RCVD = 1, ECN_CWR_SENT = 2 };

// TcpDctcp::GetSsThresh, for an ECE, a fast retransmit and a timeout alike (ns-3 ignores the
// bytes in flight here), with Linux's floor of engine.dctcp_min_ssthresh_segments = 2 segments
// (dctcp_ssthresh; ns-3 has none, 0: a window cut below one segment waits for the RTO)
static int64_t dctcp_ssthresh(const Conn& C, int32_t floor_segments) {
    return std::max<int64_t>((int64_t)floor_segments * C.mss,
                             (int64_t)((1 - C.alpha / 2.0) * (double)C.cwnd));
}

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
    // ns-3 ProcessSynRcvd: the packet that completes the handshake at the listener sets the
    // delayed-ACK count to its maximum, "to respond to the first data packet" at once; a
    // delayed-ACK receiver then ACKs segments 1, 3, 5, ... (before, 2, 4, 6, ...: every
    // sender past its initial window ran one segment late). Nothing moves the count before
    // the first data segment, so it is set here, at the connection's open.
    C.delack_n = (int32_t)cfg.delack_count;
    C.peer_wnd = 65535;  // what the SYN-ACK will advertise (unscaled, RFC 7323 section 2.2)
    tcp_send_syn(c);
}

void Sim::tcp_send_syn(int32_t c) {
    Conn& C = conns[c];
    const int32_t pid = new_packet(c, SYN, 0, cfg.syn_bytes + cfg.l2_header, false);
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
    tcp_rtt_sample(C, ts);
    C.cwnd = (int64_t)cfg.init_cwnd * C.mss;
    C.rto_deadline = NEVER;
    // the third packet of the handshake goes out before the data, as in ns-3
    send_packet(new_packet(c, HSACK, 0, cfg.ack_bytes + cfg.l2_header, false));
    tcp_try_send(c);
}

// ns-3 TcpOptionTS: a timestamp counts whole milliseconds of simulation time
// (NowToTsValue), and an RTT sample is the difference of two such counts
// (ElapsedTimeFromTsValue), 1 us when they are equal (EstimateRtt). A 3 s sample of a
// handshake stays 3 s; a data-centre RTT of microseconds samples as 1 us (or 1 ms when a
// millisecond boundary falls inside it).
static ps_t ts_rtt_sample(ps_t now, ps_t echoed) {
    constexpr ps_t MS = 1'000'000'000;
    const ps_t a = now / MS, b = echoed / MS;
    return a > b ? (a - b) * MS : ps_t(1'000'000);
}

void Sim::tcp_rtt_sample(Conn& C, ps_t echoed) {
    // RFC 6298 / ns-3 RttMeanDeviation: alpha 1/8, beta 1/4
    const double x = (double)ts_rtt_sample(now, echoed);
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

// ns-3 SendDataPacket: a segment below high_tx is a retransmission (flagged on the
// scoreboard); the retransmission timer is armed if it is not running
void Sim::tcp_send_seg(int32_t c, int32_t seg) {
    Conn& C = conns[c];
    const int32_t payload = seg_payload(C, seg);
    if (seg < C.high_tx) {
        ++node_retx[C.xfer[seg_xfer(C, seg)]];
        sb_mark_retx(C, seg);
    } else {
        C.high_tx = seg + 1;
        // ns-3 SendDataPacket: the first new segment after an ECE carries CWR
        if (C.ecn_state == ECN_ECE_RCVD && C.ecn_echo > C.ecn_cwr) {
            C.ecn_state = ECN_CWR_SENT;
            C.ecn_cwr = seg;
        }
    }
    const int32_t pid =
        new_packet(c, DATA, seg, payload + cfg.l3l4_header + cfg.l2_header, false);
    if (conns[c].rto_deadline == NEVER) tcp_arm_rto(c);
    send_packet(pid);
}

// ns-3 SendPendingData: while the window (the un-inflated cwnd, and the peer's window) exceeds
// the pipe, send what NextSeg names; below one segment of room only a last piece that fits
// (silly-window avoidance)
void Sim::tcp_try_send(int32_t c) {
    Conn& C0 = conns[c];
    if (C0.state != 1 || C0.done || C0.dead) return;
    const bool rule3 = cfg.sack && C0.ca == CA_RECOVERY;
    for (;;) {
        Conn& C = conns[c];
        const int64_t win = std::min(C.cwnd, C.peer_wnd);
        const int64_t pipe = sb_pipe(C);
        if (pipe >= win) return;
        const int64_t room = win - pipe;
        const int32_t s = sb_next_seg(C, rule3);
        if (s < 0) return;
        if (room < C.mss && seg_bytes(C, s, std::min(C.nseg, s + 2)) > room) return;
        tcp_send_seg(c, s);
        conns[c].next_tx = s + 1;
    }
}

// a pure ACK; with SACK it carries the first 3 blocks of the receiver's list (all the option
// space beside the timestamp allows: ns-3 AddOptionSack), 8 bytes each plus 2 of option header
// (with the timestamp's 10, a multiple of 4: no padding)
void Sim::tcp_send_ack(int32_t c, bool ece, ps_t ts, int32_t ack) {
    const Conn& R = conns[c];
    const int32_t nb = cfg.sack && R.ooo_used ? std::min(R.nsk, 3) : 0;
    const int32_t pid = new_packet(c, ACK, ack < 0 ? R.rcv_nxt : ack,
                                   cfg.ack_bytes + 8 * nb + cfg.l2_header, true);
    Pkt& p = pool[pid];
    p.ts = ts;
    if (ece) p.flags |= F_ECE;
    if (nb > 0) {
        if (sack_opt.size() <= (size_t)pid) sack_opt.resize(pool.capacity());
        SackOpt& o = sack_opt[pid];
        for (int32_t k = 0; k < nb; ++k) { o.lo[k] = R.sk_lo[k]; o.hi[k] = R.sk_hi[k]; }
        o.n = nb;
        p.flags |= F_SACK;
    }
    conns[c].delack_n = 0;
    ++conns[c].delack_gen;  // cancels a pending delayed-ACK timer
    conns[c].delack_pending = false;
    send_packet(pid);
}

void Sim::tcp_delack(int32_t c, int64_t gen) {
    Conn& C = conns[c];
    if (gen != C.delack_gen || C.dead) return;
    C.delack_pending = false;
    C.delack_reserved = true;  // ns-3 DelAckTimeout raises CA_EVENT_DELAYED_ACK
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
    const bool dctcp = cfg.transport == T_DCTCP;
    const int32_t s = p.seq;
    const bool ce = dctcp && dctcp_rx_ce(c, s, p.flags & F_CE);
    Conn& R = conns[c];
    R.last_ts = p.ts;
    const int32_t before = R.rcv_nxt;
    bool stored = false;  // ns-3 TcpRxBuffer::Add succeeded: new data, not a duplicate
    if (s == R.rcv_nxt) {
        stored = true;
        ++R.rcv_nxt;
        if (R.ooo_used) {  // (a flag in line 0: the vector and the SACK list are lines further)
            while (bit_get(R.ooo, R.rcv_nxt)) {
                bit_set(R.ooo, R.rcv_nxt, false);
                ++R.rcv_nxt;
                --R.ooo_n;
            }
            if (R.nsk > 0) rx_sack_clear(R);
        }
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
        if (!bit_get(R.ooo, s)) {  // a duplicate changes nothing (ns-3 TcpRxBuffer::Add fails)
            stored = true;
            bit_set(R.ooo, s, true);
            ++R.ooo_n;
            if (cfg.sack) rx_sack_add(R, s);
        }
    }
    // ns-3 ReceivedData delays the ACK only of a segment that arrived in order, filled no gap
    // and left none behind: with out-of-order data still buffered (rx buffer Size() >
    // Available()) it ACKs at once (before, the engine delayed that ACK, and a sender waiting
    // for it after a timeout idled 200 ms)
    // (delack_reserved follows ns-3's CA_EVENT_DELAYED_ACK / CA_EVENT_NON_DELAYED_ACK, which
    // TcpDctcp keeps as m_delayedAckReserved; a duplicate raises neither)
    const bool in_order = (s == before) && (R.rcv_nxt == before + 1) && R.ooo_n == 0;
    if (!cfg.delayed_ack || !in_order) {
        if (stored) R.delack_reserved = false;
        tcp_send_ack(c, ce, p.ts);
    } else {
        ++R.delack_n;
        if (R.delack_n >= cfg.delack_count) {
            R.delack_reserved = false;
            tcp_send_ack(c, ce, p.ts);
        } else {
            R.delack_reserved = true;
            if (!R.delack_pending) {
                R.delack_pending = true;
                eq.push(now + cfg.delack_timeout, EV_DELACK, c, R.delack_gen);
            }
        }
    }
    tcp_rx_advance(c);
}

// DCTCP receiver, as ns-3's ForwardUp and TcpDctcp see a packet (data, or the handshake's
// ACK at segment 0): its CE mark counts only above the last one that counted (m_ecnCESeq: a
// resent segment, or the first data segment after a marked handshake ACK, counts as unmarked);
// a change of CE state while an ACK is held back (m_delayedAckReserved) first sends the ACK
// the previous state owed, for rcv_nxt as it stood when the previous packet arrived
// (m_priorRcvNxt: ns-3 takes it before the packet's data is added, so this ACK may repeat
// one already sent)
bool Sim::dctcp_rx_ce(int32_t c, int32_t seq, bool marked) {
    Conn& R = conns[c];
    const bool ce = marked && R.ce_seq < seq;
    if (ce) R.ce_seq = seq;
    if (ce != R.last_ce && R.delack_reserved) tcp_send_ack(c, R.last_ce, R.last_ts, R.prior_rcv_nxt);
    Conn& Q = conns[c];
    Q.prior_rcv_nxt = Q.rcv_nxt;
    Q.last_ce = ce;
    return ce;
}

void Sim::tcp_rx_advance(int32_t c) {
    Conn& C = conns[c];
    while (C.rcv_nxt >= C.rx_end) {  // rx_end = xend[rx_head]: no vector read per segment
        const int32_t node = C.xfer[C.rx_head++];
        C.rx_end = C.rx_head < C.xfer.size() ? C.xend[C.rx_head]
                                             : std::numeric_limits<int32_t>::max();
        transfer_done(node);
    }
    // (a connection of its own closes at its sender's last ACK, tcp_on_ack: that ACK is on its
    // way now, so the receiver finishing never closes it)
}

// ns-3 TcpLinuxReno::IncreaseWindow (DCTCP's base): slow start adds every segment acknowledged
// up to ssthresh, congestion avoidance one segment per window's worth counted in cwnd_cnt
static void increase_window_linux(Conn& C, int64_t segs) {
    const int64_t mss = C.mss;
    if (C.cwnd < C.ssthresh) {
        if (segs >= 1) C.cwnd = std::min(C.cwnd + segs * mss, C.ssthresh);
        return;
    }
    const int64_t w = std::max<int64_t>(1, C.cwnd / mss);
    if (C.cwnd_cnt >= w) {
        C.cwnd_cnt = 0;
        C.cwnd += mss;
    }
    C.cwnd_cnt += (int32_t)segs;
    if (C.cwnd_cnt >= w) {
        const int64_t delta = C.cwnd_cnt / w;
        C.cwnd_cnt -= (int32_t)(delta * w);
        C.cwnd += delta * mss;
    }
}

// ns-3 TcpNewReno::IncreaseWindow: slow start adds one segment per ACK whatever it covers,
// congestion avoidance about one segment per window
static void increase_window(Conn& C, int64_t segs) {
    const int64_t mss = C.mss;
    if (C.cwnd < C.ssthresh) {
        if (segs < 1) return;
        C.cwnd += mss;
        --segs;
    }
    if (C.cwnd >= C.ssthresh && segs > 0)
        C.cwnd += std::max<int64_t>(1, (int64_t)((double)mss * mss / (double)C.cwnd));
}

// ns-3 NewAck: progress resets the retry count; reset_rto restarts the retransmission timer
// (not every partial ACK of a recovery does); none runs once everything is acknowledged
void Sim::tcp_new_ack(int32_t c, bool reset_rto) {
    Conn& C = conns[c];
    C.backoff = 0;
    C.next_tx = std::max(C.next_tx, C.snd_una);  // (m_nextTxSequence, DCTCP's window end)
    if (C.snd_una >= C.nseg) C.rto_deadline = NEVER;
    else if (reset_rto) tcp_arm_rto(c);
}

// ns-3 DoRetransmit: the first segment NextSeg names without rule 3, else the head again;
// sent whatever the window
void Sim::tcp_do_retransmit(int32_t c) {
    Conn& C = conns[c];
    int32_t s = sb_next_seg(C, false);
    if (s < 0) s = C.snd_una;
    tcp_send_seg(c, s);
    conns[c].next_tx = s;  // (ns-3 leaves m_nextTxSequence at the resent segment's start)
}

// ns-3 EnterRecovery with TcpClassicRecovery: ssthresh from the pipe (plus the head, without
// SACK), cwnd = ssthresh (the inflated window is only traced in ns-3), resend the head
void Sim::tcp_enter_recovery(int32_t c) {
    Conn& C = conns[c];
    if (!cfg.sack) {
        sb_add_reno_sack(C);
        sb_mark_head_lost(C);
    } else if (!sb_is_lost(C, C.snd_una)) {
        sb_mark_head_lost(C);
    }
    C.recover = C.high_tx;
    C.recover_active = true;
    C.ca = CA_RECOVERY;
    const int64_t mss = C.mss;
    const int64_t flight = sb_pipe(C) + (cfg.sack ? 0 : mss);
    C.ssthresh = cfg.transport == T_DCTCP ? dctcp_ssthresh(C, cfg.dctcp_min_ssthresh)
                                          : std::max<int64_t>(2 * mss, flight / 2);
    C.cwnd = C.ssthresh;
    tcp_send_seg(c, C.snd_una);
}

// ns-3 DupAck: count it (not in recovery), enter recovery at the threshold or once the head
// is lost on the scoreboard; without SACK each duplicate is a guessed SACK
void Sim::tcp_dupack(int32_t c) {
    Conn& C = conns[c];
    if (C.ca == CA_LOSS) return;  // ns-3 ignores duplicates after a timeout
    if (C.ca != CA_RECOVERY) ++C.dupacks;
    if (C.ca == CA_OPEN) C.ca = CA_DISORDER;
    if (C.ca == CA_RECOVERY) {
        if (!cfg.sack) sb_add_reno_sack(C);
        return;
    }
    if (C.ca != CA_DISORDER) return;  // CWR (dctcp): counted, nothing more
    if (C.dupacks == cfg.dupack_threshold && (C.snd_una >= C.recover || !C.recover_active))
        tcp_enter_recovery(c);
    else if (sb_is_lost(C, C.snd_una))
        tcp_enter_recovery(c);
    else if (!cfg.sack && cfg.limited_transmit)
        sb_add_reno_sack(C);  // RFC 3042: the pipe shrinks, a new segment may go
}

// DCTCP sender, ns-3 TcpDctcp::PktsAcked: every call adds its segments to the window's count
// (as marked while the sender's ECN state is ECE_RCVD); an ACK at or past win_end closes the
// window: alpha = (1 - g) alpha + g F. ns-3 calls it for a duplicate ACK too (one segment)
// and, in each congestion state, with the segments ProcessAck counts there.
void Sim::dctcp_pkts_acked(Conn& C, int64_t segs, int32_t a) {
    const int64_t bytes = segs * C.mss;
    C.win_acked += bytes;
    if (C.ecn_state == ECN_ECE_RCVD) C.win_marked += bytes;
    if (!C.win_started) {
        C.win_end = C.next_tx;
        C.win_started = true;
    }
    if (a >= C.win_end) {
        const double F = C.win_acked > 0 ? (double)C.win_marked / (double)C.win_acked : 0.0;
        C.alpha = (1 - cfg.dctcp_g) * C.alpha + cfg.dctcp_g * F;
        C.win_end = C.next_tx;
        C.win_acked = C.win_marked = 0;
    }
}

// DCTCP sender, ns-3 ReceivedAck before ProcessAck: an ACK past the recovery point ends the
// CWR state (cwnd = ssthresh); an ACK that advances with ECE puts the ECN state at ECE_RCVD
// and, outside CWR (in any other state: ns-3 leaves a loss recovery for it), cuts once:
// ssthresh = cwnd (1 - alpha/2) with the alpha before this ACK, cwnd = ssthresh
// (TcpClassicRecovery), recovery point = the highest segment sent
void Sim::dctcp_on_ece(int32_t c, int32_t a, int32_t old_una, bool ece) {
    Conn& C = conns[c];
    if (C.ca == CA_CWR && a > C.recover) {
        C.ca = CA_OPEN;
        C.cwnd = C.ssthresh;
    }
    if (a > old_una && ece) {
        C.ecn_echo = a;
        C.ecn_state = ECN_ECE_RCVD;
        if (C.ca != CA_CWR) {
            C.ssthresh = dctcp_ssthresh(C, cfg.dctcp_min_ssthresh);
            C.cwnd = C.ssthresh;
            C.ca = CA_CWR;
            C.recover = C.high_tx;
        }
    } else if (C.ecn_state == ECN_ECE_RCVD && !ece) {
        C.ecn_state = ECN_IDLE;
    }
}

// ns-3 ReceivedAck + ProcessAck
void Sim::tcp_on_ack(int32_t pid) {
    const Pkt p = pool[pid];
    const int32_t c = p.conn;
    Conn& C = conns[c];
    if (C.done || C.dead || C.state != 1) return;
    const int32_t a = p.seq;
    if (a < C.snd_una || a > C.high_tx) return;  // stale, or acknowledges nothing sent
    const bool dctcp = cfg.transport == T_DCTCP;
    const int64_t mss = C.mss;
    const int32_t old_una = C.snd_una;
    C.peer_wnd = int64_t(1) << 62;  // every ACK of data carries the scaled (never limiting) window
    int64_t sacked = 0;
    if (p.flags & F_SACK) sacked = sb_update(C, sack_opt[pid]);
    int64_t delivered = sacked;
    if (a > old_una) {
        tcp_rtt_sample(C, p.ts);
        delivered += sb_discard(C, a);
    }
    if (dctcp) dctcp_on_ece(c, a, old_una, p.flags & F_ECE);
    const int32_t old_dup = conns[c].dupacks;
    const bool dup = cfg.sack ? sacked > 0 : (a == old_una && a < conns[c].high_tx);
    if (dup) tcp_dupack(c);
    Conn& D = conns[c];
    // ns-3 calls PktsAcked for a repeated ACK as if one segment had left
    if (dctcp && a == old_una && a < D.high_tx) dctcp_pkts_acked(D, 1, a);
    if (a > old_una) {
        int64_t segs = delivered / mss;
        D.acked_rem += (int32_t)(delivered % mss);
        if (D.acked_rem >= mss) { ++segs; D.acked_rem -= (int32_t)mss; }
        if (!dup) D.dupacks = 0;
        if (a < D.recover && D.ca == CA_RECOVERY) {
            // partial ACK: resend the next hole unless it was resent already; only the first
            // partial ACK of a recovery restarts the timer
            if (!cfg.sack) sb_mark_head_lost(D);
            // (ns-3 IsRetransmittedDataAcked(a + MSS): a full head segment, resent, not SACKed)
            const bool resent = a < D.high_tx && seg_payload(D, a) == D.mss &&
                                sb_resent_unsacked(D, a);
            if (!resent) tcp_do_retransmit(c);
            Conn& E = conns[c];
            if (dctcp) dctcp_pkts_acked(E, 1, a);
            const bool first = E.first_partial;
            E.first_partial = false;
            tcp_new_ack(c, first);
        } else if (a < D.recover && D.ca == CA_LOSS) {
            if (dctcp) {
                dctcp_pkts_acked(D, segs, a);
                increase_window_linux(D, segs);
            } else {
                increase_window(D, segs);
            }
            tcp_new_ack(c, true);
        } else if (D.ca == CA_CWR) {  // (dctcp only) no growth until the recovery point
            dctcp_pkts_acked(D, segs, a);
            tcp_new_ack(c, true);
        } else {
            bool exited = false;
            if (D.ca == CA_OPEN) {
                if (dctcp) dctcp_pkts_acked(D, segs, a);
            } else if (D.ca == CA_DISORDER) {
                if (dctcp && segs >= old_dup) dctcp_pkts_acked(D, segs - old_dup, a);
                if (!dup) D.ca = CA_OPEN;
            } else if (D.ca == CA_RECOVERY) {
                D.first_partial = true;
                segs = seg_bytes(D, old_una, a) / mss;
                if (dctcp) dctcp_pkts_acked(D, segs, a);
                D.ca = CA_OPEN;
                exited = true;
                D.dupacks = 0;
            } else if (D.ca == CA_LOSS) {
                D.first_partial = true;
                segs = seg_bytes(D, D.recover, a) / mss;
                if (dctcp) dctcp_pkts_acked(D, segs, a);
                D.ca = CA_OPEN;
            }
            if (a >= D.recover) D.recover_active = false;
            if (exited) {
                tcp_new_ack(c, true);
                D.cwnd = D.ssthresh;
            }
            if (D.ca == CA_OPEN) {
                if (dctcp) increase_window_linux(D, segs);
                else increase_window(D, segs);
                tcp_new_ack(c, true);
            }
        }
    }
    // a connection of its own closes once its receiver holds every byte (rx_end, not
    // xfer.size(): one line fewer) and its sender has them all acknowledged. Until its last
    // ACK arrives, a sender whose receiver already holds everything keeps its timers, as
    // ns-3's socket does: a last ACK held back by delayed ACKs past a short minimum RTO, or
    // lost, has it resend its tail into a fabric other transfers still use (before session
    // 41, the connection closed when its receiver was done)
    Conn& F = conns[c];
    if (!cfg.warm_connections && F.snd_una >= F.nseg &&
        F.rx_end == std::numeric_limits<int32_t>::max())
        F.done = true;
    tcp_try_send(c);
}

// ns-3 ReTxTimeout: everything outstanding and not SACKed is lost (without SACK the guesses
// are forgotten too), ssthresh from the pipe before the timeout, cwnd one segment, the timer
// doubled; then NextSeg resends from the head
void Sim::tcp_rto(int32_t c) {
    Conn& C = conns[c];
    if (C.state == 0) {
        if (++C.syn_tries > cfg.syn_retries) { ++tcp_gave_up; strand_conn(c); return; }
        C.rto_deadline = NEVER;
        tcp_send_syn(c);
        return;
    }
    if (C.snd_una >= C.nseg) { C.rto_deadline = NEVER; return; }
    // give up after data_retries timeouts in a row without progress (ns-3 DataRetries)
    if (++C.backoff > cfg.data_retries) { ++tcp_gave_up; strand_conn(c); return; }
    const int64_t flight = sb_pipe(C);
    C.dupacks = 0;
    if (!cfg.sack) sb_reset_reno_sack(C);
    sb_set_sent_list_lost(C, !cfg.sack);
    C.recover = C.high_tx;
    C.recover_active = true;
    C.rto = std::min<ps_t>(cfg.max_rto, C.rto * 2);
    C.ssthresh = cfg.transport == T_DCTCP ? dctcp_ssthresh(C, cfg.dctcp_min_ssthresh)
                                          : std::max<int64_t>(2 * (int64_t)C.mss, flight / 2);
    C.ca = CA_LOSS;
    C.cwnd = C.mss;
    C.rto_deadline = NEVER;
    tcp_try_send(c);
}

}  // namespace pk
