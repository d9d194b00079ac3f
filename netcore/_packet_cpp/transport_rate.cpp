// Rate-based senders. `ideal`: line rate, limited only by hop-by-hop credits (lossless).
// `dcqcn`: RoCEv2-style sender paced at the DCQCN rate (Zhu et al., SIGCOMM 2015) over a
// PFC fabric. Both resend a packet as soon as it is lost (an oracle NACK; losses only come
// from faults and bit errors here).
#include <algorithm>
#include <cmath>

#include "sim.hpp"

namespace pk {

int32_t Sim::first_link(Conn& C) {
    if (C.path_off >= 0) return C.path_len > 0 ? path_links[C.path_off] : -1;
    return choose_hop(C.src, C.dst);
}

bool Sim::rate_can_send(Conn& C) {
    return !C.done && !C.dead && (!C.retx.empty() || C.next_new < C.nseg);
}

void Sim::rate_wake(int32_t c, bool from_service) {
    Conn& C = conns[c];
    if (!rate_can_send(C) || C.waiting) return;
    if (cfg.transport == T_DCQCN && now < C.next_send) {
        if (!C.pace_pending) { eq.push(C.next_send, EV_PACE, c); C.pace_pending = true; }
        return;
    }
    const int32_t fl = first_link(C);
    if (fl < 0 || !links[fl].up) return;  // cut off: sleeps until the next reroute wakes it
    if (send_room(fl) <= 0) {
        links[fl].waiters.push(~c);
        C.waiting = true;
        return;
    }
    rate_send_one(c, fl);
    Conn& D = conns[c];
    // queue behind the other senders of this NIC (round robin, one packet each)
    if (rate_can_send(D) && !D.waiting) {
        if (cfg.transport == T_DCQCN) {
            if (!D.pace_pending) { eq.push(std::max(now, D.next_send), EV_PACE, c); D.pace_pending = true; }
        } else {
            links[fl].waiters.push(~c);
            D.waiting = true;
            // a host with several first links under per-packet routing (spray/adaptive on a
            // GPU with one link per plane): the packet may have gone straight onto an idle
            // link, whose empty queue starts nothing more and so never serves this waiter
            // (every transfer stranded after a few packets). Serve it when the serialisation
            // ends. One first link keeps a packet queued and is untouched.
            Link& F = links[fl];
            if (D.path_off < 0 && F.q.empty() && !F.txdone_pending &&
                adj_ptr[D.src + 1] - adj_ptr[D.src] > 1) {
                F.wake_waiters = true;
                F.txdone_pending = true;
                F.txdone_at = std::max(now, F.busy_until);
                eq.push(F.txdone_at, EV_TXDONE, fl);
            }
        }
    }
    if (!from_service) service_waiters(fl);
}

void Sim::rate_send_one(int32_t c, int32_t fl) {
    Conn& C = conns[c];
    int32_t seq;
    if (!C.retx.empty()) {
        seq = C.retx.back();
        C.retx.pop_back();
    } else {
        seq = C.next_new++;
    }
    const int32_t wire = seg_payload(C, seq) + cfg.l3l4_header + cfg.l2_header;
    if (cfg.transport == T_DCQCN) {
        C.next_send = now + round_pos((double)wire * 1e12 / C.rc);
        C.bc_bytes += wire;
        if (C.bc_bytes >= cfg.byte_counter) {  // byte-counter stage of rate increase
            C.bc_bytes -= cfg.byte_counter;
            ++C.b_cnt;
            dcqcn_increase(C);
        }
    }
    const int32_t pid = new_packet(c, DATA, seq, wire, false);
    if (pool[pid].path_off < 0) pool[pid].nxt = fl;
    send_packet(pid);
}

void Sim::rate_on_data(int32_t pid) {
    const Pkt p = pool[pid];
    const int32_t c = p.conn;
    Conn& C = conns[c];
    if (C.done || C.dead) return;
    if (cfg.transport == T_DCQCN && (p.flags & F_CE) &&
        (C.last_cnp < 0 || now - C.last_cnp >= cfg.cnp_interval)) {
        C.last_cnp = now;  // notification point: at most one CNP per interval per flow
        send_packet(new_packet(c, CNP, 0, cfg.cnp_bytes + cfg.l2_header, true));
    }
    Conn& D = conns[c];
    if (++D.received == D.nseg) {
        D.done = true;
        D.rx_head = D.xfer.size();
        D.rx_end = std::numeric_limits<int32_t>::max();
        transfer_done(D.owner);
    }
}

void Sim::dcqcn_on_cnp(int32_t c) {
    Conn& C = conns[c];
    if (C.done || C.dead) return;
    // reaction point: cut the rate, remember the target, raise alpha, restart the stages
    C.rt = C.rc;
    C.rc = std::max(cfg.min_rate, C.rc * (1 - C.qalpha / 2));
    C.qalpha = (1 - cfg.dcqcn_g) * C.qalpha + cfg.dcqcn_g;
    C.t_cnt = C.b_cnt = 0;
    C.bc_bytes = 0;
    ++C.alpha_gen;
    ++C.rate_gen;
    eq.push(now + cfg.alpha_timer, EV_ALPHA, c, C.alpha_gen);
    eq.push(now + cfg.rate_timer, EV_RATE, c, C.rate_gen);
}

void Sim::dcqcn_alpha_timer(int32_t c, int64_t gen) {
    Conn& C = conns[c];
    if (C.done || C.dead || gen != C.alpha_gen) return;
    C.qalpha *= (1 - cfg.dcqcn_g);  // no CNP during the last period
    eq.push(now + cfg.alpha_timer, EV_ALPHA, c, gen);
}

void Sim::dcqcn_rate_timer(int32_t c, int64_t gen) {
    Conn& C = conns[c];
    if (C.done || C.dead || gen != C.rate_gen) return;
    ++C.t_cnt;
    dcqcn_increase(C);
    eq.push(now + cfg.rate_timer, EV_RATE, c, gen);
}

void Sim::dcqcn_increase(Conn& C) {
    const int32_t F = cfg.fast_recovery_steps;
    if (std::max(C.t_cnt, C.b_cnt) < F) {
        // fast recovery: move halfway back to the target
    } else if (std::min(C.t_cnt, C.b_cnt) > F) {
        C.rt += cfg.rate_hai;  // hyper increase
    } else {
        C.rt += cfg.rate_ai;   // additive increase
    }
    C.rt = std::min(C.rt, C.line_rate);
    C.rc = std::min(C.line_rate, (C.rt + C.rc) / 2);
}

}  // namespace pk
