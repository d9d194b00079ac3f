// Engine parameters as plain fields; netcore/packet/options.py fills and checks every default
// (with its source) and copies them here. Times are picoseconds, sizes bytes.
#pragma once
#include <cstdint>

namespace pk {

enum Transport : int32_t { T_IDEAL = 0, T_TCP = 1, T_DCTCP = 2, T_DCQCN = 3 };

struct Config {
    int32_t transport = T_TCP;
    int32_t mtu = 9000;               // IP MTU (bytes)
    int32_t l3l4_header = 52;         // IPv4 20 + TCP 20 + timestamps 12 (RoCEv2: 20+8+12+4)
    int32_t l2_header = 2;            // point-to-point PPP header as ns-3 adds it
    int32_t ack_bytes = 52;           // IP bytes of a pure ACK
    // IP bytes of SYN / SYN-ACK: IPv4 20 + TCP 20 + options 16 (window scale 3, SACK-permitted
    // 2, timestamps 10, 1 pad; ns-3.44 sends no MSS option; measured on ns-3's wire: 58 B + PPP)
    int32_t syn_bytes = 56;
    int32_t cnp_bytes = 60;           // IP bytes of a RoCEv2 CNP
    int64_t buffer_packets = 1000;    // per output port (waiting packets)
    int64_t buffer_bytes = 0;         // per output port, 0: no byte limit
    int64_t switch_buffer_bytes = 0;  // shared by the ports of a switch, 0: none
    int64_t host_queue_packets = 2;   // NIC queue a rate-paced (dcqcn) sender keeps full
    bool per_hop = false;             // spray / adaptive: next hop chosen per packet
    bool adaptive = false;            // least-loaded next hop (else seeded random)
    // TCP (ns-3 TcpSocket / TcpSocketBase defaults)
    int32_t init_cwnd = 10;
    int64_t min_rto = 1000000000000LL;   // 1 s
    int64_t init_rto = 1000000000000LL;  // 1 s
    int64_t max_rto = 60000000000000LL;  // 60 s
    int64_t clock_granularity = 1000000000LL;  // 1 ms
    int64_t conn_timeout = 3000000000000LL;    // SYN retransmission timeout 3 s
    int32_t syn_retries = 6;
    int32_t data_retries = 6;
    int32_t dupack_threshold = 3;
    bool limited_transmit = true;
    bool sack = true;                 // TcpSocketBase::Sack (RFC 2018 / 6675 recovery)
    bool delayed_ack = false;
    int32_t delack_count = 2;
    int64_t delack_timeout = 200000000000LL;  // 200 ms
    bool handshake = true;
    bool warm_connections = false;
    // tcp/dctcp ports with end-of-serialisation events numbered as ns-3 numbers its
    // TransmitComplete (exact ns-3 tie order) instead of eager ports (faster)
    bool ns3_ties = false;
    // DCTCP
    int64_t ecn_k = 65;        // packets waiting
    double dctcp_g = 1.0 / 16;
    double dctcp_alpha_init = 1.0;
    int32_t dctcp_min_ssthresh = 2;  // segments (2: Linux's dctcp_ssthresh, 0: ns-3's TcpDctcp)
    // DCQCN (Zhu et al. SIGCOMM 2015) and RED marking
    double kmin_bytes = 5e3, kmax_bytes = 200e3, pmax = 0.01;
    double dcqcn_g = 1.0 / 256;
    int64_t alpha_timer = 55000000;      // 55 us
    int64_t rate_timer = 55000000;       // 55 us
    int64_t byte_counter = 10 * 1000 * 1000;  // 10 MB
    int32_t fast_recovery_steps = 5;
    double rate_ai = 40e6 / 8;   // bytes/s
    double rate_hai = 400e6 / 8;
    double min_rate = 100e6 / 8;
    int64_t cnp_interval = 50000000;     // 50 us
    // PFC
    int64_t pfc_xoff_bytes = 0;
    int64_t pfc_xon_bytes = 0;
    // faults, loss, guards
    int64_t reroute_delay = 0;
    double loss_rate = 0.0;
    int64_t max_time = 0;      // 0: none
    int64_t sample_interval = 0;
};

}  // namespace pk
