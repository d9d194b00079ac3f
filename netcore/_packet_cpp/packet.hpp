// A packet is a small POD record in a pool with a free list: no allocation per packet once the
// pool has grown to the number of packets in flight. A packet carries its route (an offset into
// the flat path array, or -1 when the next hop is chosen per hop) and its position on it.
#pragma once
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "huge_alloc.hpp"

namespace pk {

enum PktType : uint8_t { DATA = 0, ACK = 1, SYN = 2, SYNACK = 3, HSACK = 4, CNP = 5 };
enum PktFlag : uint8_t {
    F_CE = 1,    // congestion experienced (set by a switch)
    F_ECE = 2,   // ACK echoes CE
    F_REV = 4,   // travels the connection's path backwards (ACK, SYN-ACK, CNP)
    F_RESV = 8,  // holds a credit in the queue of link `nxt` (ideal transport)
    F_LOST = 16, // random (bit-error) loss: dropped when it reaches the far end of the link
    F_SACK = 32  // ACK with SACK blocks (Sim::sack_opt holds them under the packet's id)
};

// 40 bytes (was 72): the arrival time, its event sequence number and the link's epoch live in
// the link's pipe FIFO (sequential memory) rather than here, and the destination host of a
// per-hop routed packet is read from its connection. An all-to-all keeps ~260k packets in
// flight, so the pool's footprint decides how many of its touches miss the caches.
struct Pkt {
    int64_t ts;         // send time of the data packet (echoed in ACKs, timestamp option)
    int32_t conn;       // connection index
    int32_t seq;        // segment index (DATA) or cumulative ack (ACK)
    int32_t wire;       // bytes on the wire including all headers
    int32_t path_off;   // offset into the path array, -1: per-hop routing
    int32_t prev;       // link it arrived over at the current node (-1 at the source)
    int32_t nxt;        // next link chosen in advance (ideal credit / per-hop), -1 none
    uint16_t path_len;
    uint16_t hop;       // index of the next link to take on the path
    uint8_t type;
    uint8_t flags;
};
static_assert(sizeof(Pkt) <= 40, "packet record grew");

// A packet on a link's pipe: arrival time at the far end, the sequence number its arrival
// event got when it was scheduled, the link's epoch then (a failure bumps it, killing the
// pipe). On tcp/dctcp ports (see Sim::schedule_tx) a packet enters the pipe when it joins the
// port queue, its arrival time already fixed; until its serialisation starts it is also one of
// the waiting packets, which are always the newest `Link::nq` entries of the pipe. Its start
// time is not stored (32 bytes, two entries per cache line): t_arr - latency - serialisation at
// the port's rate (Sim::drain).
struct PipeEntry {
    int64_t t_arr;
    uint64_t ev_seq;
    int32_t pid;
    uint32_t epoch;
    int32_t wire;      // bytes on the wire (the queue and link statistics need it at start)
    // Sim::hint: on a link into a host the packet's connection, else the link it takes next
    // (both prefetched when the packet becomes the pipe's head)
    int32_t hint;
};
static_assert(sizeof(PipeEntry) == 32, "pipe entry grew");  // two per cache line

class PacketPool {
public:
    int32_t alloc() {
        if (free_.empty()) {
            if (pkts_.size() >= (size_t)std::numeric_limits<int32_t>::max())  // ids are int32
                throw std::overflow_error("packet engine: more than 2^31 - 1 packets in flight");
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
    std::vector<Pkt, HugeAlloc<Pkt>> pkts_;
    std::vector<int32_t> free_;
};

}  // namespace pk
