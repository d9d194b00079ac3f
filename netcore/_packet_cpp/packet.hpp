// A packet is a small POD record in a pool with a free list: no allocation per packet once the
// pool has grown to the number of packets in flight. A packet carries its route (an offset into
// the flat path array, or -1 when the next hop is chosen per hop) and its position on it.
#pragma once
#include <cstdint>
#include <vector>

namespace pk {

enum PktType : uint8_t { DATA = 0, ACK = 1, SYN = 2, SYNACK = 3, HSACK = 4, CNP = 5 };
enum PktFlag : uint8_t {
    F_CE = 1,    // congestion experienced (set by a switch)
    F_ECE = 2,   // ACK echoes CE
    F_REV = 4,   // travels the connection's path backwards (ACK, SYN-ACK, CNP)
    F_RESV = 8,  // holds a credit in the queue of link `nxt` (ideal transport)
    F_LOST = 16  // random (bit-error) loss: dropped when it reaches the far end of the link
};

struct Pkt {
    int64_t t_arr;     // when it reaches the far end of `link`
    uint64_t ev_seq;   // event sequence number of that arrival
    int64_t ts;        // send time of the data packet (echoed in ACKs, timestamp option)
    int32_t conn;      // connection index
    int32_t seq;       // segment index (DATA) or cumulative ack (ACK)
    int32_t wire;      // bytes on the wire including all headers
    int32_t path_off;  // offset into the path array, -1: per-hop routing
    int32_t path_len;
    int32_t hop;       // index of the next link to take on the path
    int32_t link;      // link it is on (serialising / propagating)
    int32_t prev;      // link it arrived over at the current node (-1 at the source)
    int32_t nxt;       // next link chosen in advance (ideal credit / per-hop), -1 none
    int32_t dst_node;  // destination host
    uint32_t epoch;    // epoch of `link` when sent: a link failure bumps it, killing the pipe
    uint8_t type;
    uint8_t flags;
};

class PacketPool {
public:
    int32_t alloc() {
        if (free_.empty()) {
            pkts_.emplace_back();
            return static_cast<int32_t>(pkts_.size() - 1);
        }
        int32_t id = free_.back();
        free_.pop_back();
        return id;
    }
    void release(int32_t id) { free_.push_back(id); }
    Pkt& operator[](int32_t id) { return pkts_[id]; }
    size_t capacity() const { return pkts_.size(); }
    size_t in_use() const { return pkts_.size() - free_.size(); }

private:
    std::vector<Pkt> pkts_;
    std::vector<int32_t> free_;
};

}  // namespace pk
