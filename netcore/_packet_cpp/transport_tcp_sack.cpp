// TCP loss-recovery bookkeeping as ns-3.44 keeps it: the sender's scoreboard (TcpTxBuffer:
// per outstanding segment SACKed / lost / retransmitted flags, their byte counts, IsLost,
// NextSeg, the pipe) and the receiver's SACK list (TcpRxBuffer::UpdateSackList). Without SACK
// ns-3 runs the same scoreboard fed with guesses (AddRenoSack, MarkHeadAsLost), and so does
// this file. Units are segments of the connection's stream; the counters are bytes, as ns-3's.
//
// ns-3 walks its sent list on every call; here the walks that would repeat on every ACK of a
// long recovery start from hints (nx_hint, reno_hint, lost_upto) that skip the prefix already
// known to be uninteresting. Each hint is a statement about [snd_una, hint) that the
// operations below keep true (or reset), so the results are those of the full walk.
#include <algorithm>

#include "sim.hpp"

namespace pk {

enum SbFlag : uint8_t { SB_SACKED = 1, SB_LOST = 2, SB_RETX = 4 };

static inline uint8_t& flag_at(Conn& C, int32_t s) {
    return C.sb[(size_t)s & (C.sb.size() - 1)];
}

int64_t Sim::seg_bytes(const Conn& C, int32_t a, int32_t b) const {
    if (b <= a) return 0;
    int64_t n = (int64_t)(b - a) * C.mss;
    if (b <= C.full_below) return n;
    // transfers whose (possibly short) last segment lies in [a, b)
    size_t i = (size_t)(std::upper_bound(C.xend.begin(), C.xend.end(), a) - C.xend.begin());
    for (; i < C.xend.size() && C.xend[i] - 1 < b; ++i) n -= C.mss - seg_payload(C, C.xend[i] - 1);
    return n;
}

// ns-3 TcpTxBuffer::BytesInFlight: sent - SACKed - lost + retransmitted
int64_t Sim::sb_pipe(const Conn& C) const {
    const int64_t out = seg_bytes(C, C.snd_una, C.high_tx);
    if (!C.sb_any) return out;
    return out - C.sacked_b - C.lost_b + C.retx_b;
}

// the ring covers the window [snd_una, high_tx); flags live only inside it
void Sim::sb_fit(Conn& C) {
    const size_t need = (size_t)(C.high_tx - C.snd_una) + 1;
    if (C.sb.size() >= need) return;
    size_t n = 64;
    while (n < 2 * need) n <<= 1;
    std::vector<uint8_t> nb(n, 0);
    if (!C.sb.empty()) {
        // every flagged segment lies in [snd_una, snd_una + old size): it was flagged while the
        // ring covered the window of the time, and segments below snd_una were cleared
        const int32_t old = (int32_t)C.sb.size();
        const int32_t end = std::min(C.high_tx, C.snd_una + old);
        for (int32_t s = C.snd_una; s < end; ++s) nb[(size_t)s & (n - 1)] = flag_at(C, s);
    }
    C.sb.swap(nb);
}

// TcpTxBuffer::Update: mark the segments each block covers SACKed (no longer lost). Returns
// the bytes newly SACKed.
int64_t Sim::sb_update(Conn& C, const SackOpt& o) {
    sb_fit(C);
    int64_t got = 0;
    for (int32_t k = 0; k < o.n; ++k) {
        if (C.high_tx < o.lo[k]) return got;  // a block beyond what was sent ends the update
        const int32_t e = std::min(o.hi[k], C.high_tx);
        for (int32_t s = std::max(o.lo[k], C.snd_una); s < e; ++s) {
            uint8_t& f = flag_at(C, s);
            if (f & SB_SACKED) continue;
            const int32_t pay = seg_payload(C, s);
            if (f & SB_LOST) { f &= ~SB_LOST; C.lost_b -= pay; }
            f |= SB_SACKED;
            C.sacked_b += pay;
            got += pay;
            C.sb_any = true;
            if (C.high_sack < s) C.high_sack = s;
        }
    }
    if (got > 0) sb_update_lost_count(C);
    return got;
}

// TcpTxBuffer::UpdateLostCount: every un-SACKed segment below the dupthresh-th highest SACKed
// one is lost, and then the head too
void Sim::sb_update_lost_count(Conn& C) {
    const int32_t thresh = cfg.dupack_threshold;
    int32_t cnt = 0, p = -1;
    for (int32_t s = C.high_sack; s > C.snd_una; --s) {
        if ((flag_at(C, s) & SB_SACKED) && ++cnt >= thresh) { p = s; break; }
    }
    if (p < 0) return;
    for (int32_t s = std::max(C.lost_upto, C.snd_una + 1); s < p; ++s) {
        uint8_t& f = flag_at(C, s);
        if (!(f & (SB_SACKED | SB_LOST))) { f |= SB_LOST; C.lost_b += seg_payload(C, s); }
    }
    C.lost_upto = std::max(C.lost_upto, p);
    uint8_t& h = flag_at(C, C.snd_una);
    if (!(h & SB_LOST)) { h |= SB_LOST; C.lost_b += seg_payload(C, C.snd_una); }
    C.sb_any = true;
}

// TcpTxBuffer::IsLost: only below the highest SACK
bool Sim::sb_is_lost(Conn& C, int32_t seg) {
    if (C.high_sack < 0 || seg >= C.high_sack || !C.sb_any) return false;  // high_sack < high_tx
    sb_fit(C);
    return flag_at(C, seg) & SB_LOST;
}

// TcpTxBuffer::NextSeg (RFC 6675): (1) the first lost segment neither SACKed nor resent below
// the highest SACK, (2) new data if the peer's window has room, (3) in SACK recovery the first
// segment neither SACKed nor resent below the highest SACK. -1: nothing to send.
int32_t Sim::sb_next_seg(Conn& C, bool rule3) {
    int32_t r3 = -1;
    if (C.sb_any && (C.lost_b > 0 || rule3)) {
        sb_fit(C);
        const int32_t end = C.high_sack >= 0 ? std::min(C.high_sack, C.high_tx) : C.high_tx;
        int32_t s = std::max(C.nx_hint, C.snd_una);
        while (s < end && (flag_at(C, s) & (SB_SACKED | SB_RETX))) ++s;
        C.nx_hint = s;
        for (; s < end; ++s) {
            const uint8_t f = flag_at(C, s);
            if (f & (SB_SACKED | SB_RETX)) continue;
            if (f & SB_LOST) return s;
            if (rule3 && r3 < 0) r3 = s;
            if (C.lost_b == 0) break;  // nothing lost: the first candidate is all rule 3 wants
        }
    }
    if (C.high_tx < C.nseg) {
        if (seg_bytes(C, C.snd_una, C.high_tx) < C.peer_wnd) return C.high_tx;
        return -1;
    }
    return r3;
}

// TcpTxBuffer::AddRenoSack: a duplicate ACK without SACK counts as the first un-SACKed
// segment after the head arriving
void Sim::sb_add_reno_sack(Conn& C) {
    sb_fit(C);
    int32_t s = std::max(C.reno_hint, C.snd_una + 1);
    while (s < C.high_tx && (flag_at(C, s) & SB_SACKED)) ++s;
    C.reno_hint = s;
    if (s >= C.high_tx) return;  // everything is "SACKed" already (spurious retransmissions)
    flag_at(C, s) |= SB_SACKED;
    C.sacked_b += seg_payload(C, s);
    C.high_sack = s;
    C.sb_any = true;
}

// TcpTxBuffer::MarkHeadAsLost: the head is lost, neither SACKed nor resent any more
void Sim::sb_mark_head_lost(Conn& C) {
    if (C.snd_una >= C.high_tx) return;
    sb_fit(C);
    uint8_t& f = flag_at(C, C.snd_una);
    const int32_t pay = seg_payload(C, C.snd_una);
    if (f & SB_SACKED) { f &= ~SB_SACKED; C.sacked_b -= pay; }
    if (f & SB_RETX) { f &= ~SB_RETX; C.retx_b -= pay; }
    if (!(f & SB_LOST)) { f |= SB_LOST; C.lost_b += pay; }
    C.nx_hint = C.snd_una;
    C.sb_any = true;
}

// TcpTxBuffer::ResetRenoSack (an RTO without SACK forgets the guesses)
void Sim::sb_reset_reno_sack(Conn& C) {
    if (C.sb_any) {
        sb_fit(C);
        for (int32_t s = C.snd_una; s < C.high_tx; ++s) flag_at(C, s) &= ~SB_SACKED;
    }
    C.sacked_b = 0;
    C.high_sack = -1;
    C.nx_hint = C.snd_una;
    C.reno_hint = C.snd_una + 1;
    C.lost_upto = C.snd_una;  // segments un-SACKed here need not be lost
    C.sb_any = (C.lost_b | C.retx_b) != 0;
}

// TcpTxBuffer::SetSentListLost (RTO): everything outstanding and not SACKed is lost and
// not resent; reset_sack (no SACK) forgets the SACKs as well
void Sim::sb_set_sent_list_lost(Conn& C, bool reset_sack) {
    sb_fit(C);
    int64_t lost = 0, sacked = 0;
    for (int32_t s = C.snd_una; s < C.high_tx; ++s) {
        uint8_t& f = flag_at(C, s);
        const uint8_t kept = f & (SB_SACKED | SB_LOST);
        f = reset_sack || kept == 0 ? SB_LOST : kept;  // neither SACKed nor lost: lost
        const int32_t pay = seg_payload(C, s);
        if (f & SB_LOST) lost += pay;
        if (f & SB_SACKED) sacked += pay;
    }
    C.lost_b = lost;
    C.sacked_b = sacked;
    C.retx_b = 0;
    if (reset_sack) C.high_sack = -1;
    C.lost_upto = C.high_tx;
    C.nx_hint = C.snd_una;
    C.reno_hint = C.snd_una + 1;
    C.sb_any = lost + sacked > 0;
}

// a segment below high_tx goes out again (TcpTxBuffer::GetTransmittedSegment)
void Sim::sb_mark_retx(Conn& C, int32_t seg) {
    sb_fit(C);
    uint8_t& f = flag_at(C, seg);
    if (f & SB_RETX) return;
    f |= SB_RETX;
    C.retx_b += seg_payload(C, seg);
    C.sb_any = true;
}

bool Sim::sb_resent_unsacked(Conn& C, int32_t seg) {
    if (!C.sb_any) return false;
    sb_fit(C);
    return (flag_at(C, seg) & (SB_RETX | SB_SACKED)) == SB_RETX;
}

// TcpTxBuffer::DiscardUpTo: drop [snd_una, ack) from the scoreboard. Returns the bytes this
// delivers (ns-3's rate sampler: what a real SACK already delivered is not counted again; a
// guessed Reno SACK delivered nothing).
int64_t Sim::sb_discard(Conn& C, int32_t ack) {
    int64_t delivered;
    if (!C.sb_any) {
        delivered = seg_bytes(C, C.snd_una, ack);
    } else {
        sb_fit(C);
        delivered = 0;
        for (int32_t s = C.snd_una; s < ack; ++s) {
            uint8_t& f = flag_at(C, s);
            const int32_t pay = seg_payload(C, s);
            if (!(f & SB_SACKED) || !cfg.sack) delivered += pay;
            if (f & SB_SACKED) C.sacked_b -= pay;
            if (f & SB_LOST) C.lost_b -= pay;
            if (f & SB_RETX) C.retx_b -= pay;
            f = 0;
        }
    }
    C.snd_una = ack;
    C.nx_hint = std::max(C.nx_hint, ack);
    C.reno_hint = std::max(C.reno_hint, ack + 1);
    C.lost_upto = std::max(C.lost_upto, ack);
    if (C.sb_any && ack < C.high_tx && (flag_at(C, ack) & SB_SACKED)) {
        // a SACKed head is a wrong Reno guess: move the guess one segment up, the head is lost
        flag_at(C, ack) &= ~SB_SACKED;
        C.sacked_b -= seg_payload(C, ack);
        sb_add_reno_sack(C);
        sb_mark_head_lost(C);
    }
    if (C.high_sack >= 0 && C.high_sack <= ack) C.high_sack = -1;
    C.sb_any = (C.sacked_b | C.lost_b | C.retx_b) != 0;
    return delivered;
}

// ---------------------------------------------------------------- receiver: the SACK list
// TcpRxBuffer::UpdateSackList: a segment arrived above rcv_nxt. Its block goes first, merged
// with the blocks it touches; at most 4 are kept.
void Sim::rx_sack_add(Conn& R, int32_t seg) {
    int32_t lo[5], hi[5];
    int32_t n = 1;
    lo[0] = seg;
    hi[0] = seg + 1;
    for (int32_t k = 0; k < R.nsk; ++k, ++n) { lo[n] = R.sk_lo[k]; hi[n] = R.sk_hi[k]; }
    int32_t i = 1;
    while (i < n) {
        if (lo[0] == hi[i]) lo[0] = lo[i];
        else if (hi[0] == lo[i]) hi[0] = hi[i];
        else { ++i; continue; }
        for (int32_t k = i; k + 1 < n; ++k) { lo[k] = lo[k + 1]; hi[k] = hi[k + 1]; }
        --n;
        i = 1;
    }
    R.nsk = std::min(n, 4);
    for (int32_t k = 0; k < R.nsk; ++k) { R.sk_lo[k] = lo[k]; R.sk_hi[k] = hi[k]; }
}

// TcpRxBuffer::ClearSackList: blocks now below rcv_nxt are dropped
void Sim::rx_sack_clear(Conn& R) {
    int32_t m = 0;
    for (int32_t k = 0; k < R.nsk; ++k) {
        if (R.sk_hi[k] <= R.rcv_nxt) continue;
        R.sk_lo[m] = R.sk_lo[k];
        R.sk_hi[m] = R.sk_hi[k];
        ++m;
    }
    R.nsk = m;
}

}  // namespace pk
