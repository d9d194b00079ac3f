// Binary min-heap of POD events ordered by (time, insertion sequence): simultaneous events run
// in the order they were scheduled, so a run is deterministic (the SimPy rule).
#pragma once
#include <cstdint>
#include <vector>

namespace pk {

using ps_t = int64_t;  // integer picoseconds

struct Event {
    ps_t t;
    uint64_t seq;
    int32_t type;
    int32_t a;  // packet / link / connection / node id, by type
    int64_t b;  // extra argument (generation counter, fault index, ...)
};

class EventQueue {
public:
    void push(ps_t t, int32_t type, int32_t a, int64_t b = 0) {
        heap_.push_back(Event{t, next_seq_++, type, a, b});
        sift_up(heap_.size() - 1);
    }
    // Reserve a sequence number now and push the event later: a link's pipe keeps its packets
    // in a FIFO (arrival times never decrease along a link) and only its head sits in the heap,
    // with the (time, sequence) it was given when it was sent, so the global order is the same
    // as if every packet had its own heap entry, and the heap stays as small as the busy links.
    uint64_t take_seq() { return next_seq_++; }
    void push_seq(ps_t t, uint64_t seq, int32_t type, int32_t a, int64_t b = 0) {
        heap_.push_back(Event{t, seq, type, a, b});
        sift_up(heap_.size() - 1);
    }
    bool empty() const { return heap_.empty(); }
    size_t size() const { return heap_.size(); }
    const Event& top() const { return heap_[0]; }
    Event pop() {
        Event e = heap_[0];
        heap_[0] = heap_.back();
        heap_.pop_back();
        if (!heap_.empty()) sift_down(0);
        return e;
    }

private:
    static bool less(const Event& x, const Event& y) {
        return x.t < y.t || (x.t == y.t && x.seq < y.seq);
    }
    void sift_up(size_t i) {
        Event e = heap_[i];
        while (i > 0) {
            size_t p = (i - 1) >> 1;
            if (!less(e, heap_[p])) break;
            heap_[i] = heap_[p];
            i = p;
        }
        heap_[i] = e;
    }
    void sift_down(size_t i) {
        const size_t n = heap_.size();
        Event e = heap_[i];
        for (;;) {
            size_t c = 2 * i + 1;
            if (c >= n) break;
            if (c + 1 < n && less(heap_[c + 1], heap_[c])) ++c;
            if (!less(heap_[c], e)) break;
            heap_[i] = heap_[c];
            i = c;
        }
        heap_[i] = e;
    }
    std::vector<Event> heap_;
    uint64_t next_seq_ = 0;
};

}  // namespace pk
