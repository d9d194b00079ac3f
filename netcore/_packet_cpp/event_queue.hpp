// Event queue ordered by (time, insertion sequence): simultaneous events run in the order they
// were scheduled, so a run is deterministic (the SimPy rule). Sequence numbers are unique, so
// (t, seq) is a total order, and any structure that always pops the smallest pair runs the
// same simulation: the layout below changes speed, never results.
//
// * Two heaps share one sequence counter: `hot` holds the per-link events (a pipe's head
//   arrival, and for ideal/dcqcn a port's end of serialisation: at most two per directed link;
//   tcp/dctcp ports schedule each packet's serialisation when it is queued, see
//   Sim::schedule_tx, so they have no end-of-serialisation events), `cold` every timer
//   (RTO, delayed ACK, pacing, DCQCN, node start/finish, faults). pop() takes the smaller head.
//   Why: an all-to-all keeps one RTO per connection pending (16k on a k=8 fat tree) while the
//   events that fire are the few hundred link events; in one heap each pop sifted a far-future
//   RTO from the root to the bottom.
// * 4-ary heaps: half the depth of a binary heap. A hot event is 16 bytes (time, then
//   seq << 24 | link << 1 | kind, compared as one 128-bit key), so the 4 children of a node
//   are one 64-byte cache line (the array is 64-byte aligned, shifted by 3 slots).
// * Lazy removal: pop() leaves the root empty; if the handler then pushes an event (it usually
//   does: the link's next arrival or end of serialisation, a little later than `now`), the new
//   event drops into the hole and sifts down from the root, where it tends to stop after one
//   level, instead of sifting the last leaf down the whole height and then the new event up.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
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

struct ColdLess {
    bool operator()(const Event& x, const Event& y) const {
        return x.t < y.t || (x.t == y.t && x.seq < y.seq);
    }
};

struct HotEv {  // a link event: t >= 0; k = seq << 24 | link << 1 | (kind: 0 arrive, 1 tx done)
    uint64_t t, k;
};
struct HotLess {
    bool operator()(const HotEv& x, const HotEv& y) const {
        using u128 = unsigned __int128;
        return ((u128)x.t << 64 | x.k) < ((u128)y.t << 64 | y.k);
    }
};

// A growable array of trivially copyable T whose element 3 (the first child group) starts on
// a 64-byte boundary.
template <class T>
class AlignedBuf {
public:
    AlignedBuf() = default;
    AlignedBuf(const AlignedBuf&) = delete;
    AlignedBuf& operator=(const AlignedBuf&) = delete;
    ~AlignedBuf() { std::free(raw_); }
    T* data() { return base_; }
    const T* data() const { return base_; }
    void reserve(size_t n) {
        if (n <= cap_) return;
        size_t cap = cap_ ? cap_ * 2 : 256;
        while (cap < n) cap *= 2;
        const size_t bytes = (cap + 8) * sizeof(T) + 64;
        void* raw = std::malloc(bytes);
        if (!raw) throw std::bad_alloc();
        // place slot 3 (the first 4-child group) at a 64-byte boundary
        uintptr_t p = reinterpret_cast<uintptr_t>(raw) + 3 * sizeof(T);
        p = (p + 63) & ~uintptr_t(63);
        T* base = reinterpret_cast<T*>(p - 3 * sizeof(T));
        if (cap_) std::memcpy(base, base_, cap_ * sizeof(T));
        std::free(raw_);
        raw_ = raw;
        base_ = base;
        cap_ = cap;
    }

private:
    void* raw_ = nullptr;
    T* base_ = nullptr;
    size_t cap_ = 0;
};

template <class T, class Less>
class Heap4 {
public:
    bool empty() const { return n_ - (hole_ ? 1 : 0) == 0; }
    size_t size() const { return n_ - (hole_ ? 1 : 0); }
    // whether any queued element satisfies f (a linear scan; slot 0 is the popped element
    // while hole_ is set)
    template <class F>
    bool any_of(F f) const {
        const T* h = h_.data();
        for (size_t i = hole_ ? 1 : 0; i < n_; ++i)
            if (f(h[i])) return true;
        return false;
    }
    const T& top() {
        settle();
        return h_.data()[0];
    }
    // Removes and returns the smallest; its slot stays empty until the next push or top().
    T pop() {
        settle();
        hole_ = true;
        return h_.data()[0];
    }
    void push(const T& e) {
        if (hole_) {
            hole_ = false;
            sift_down(0, e);
            return;
        }
        h_.reserve(n_ + 1);
        T* h = h_.data();
        size_t i = n_++;
        while (i > 0) {
            const size_t p = (i - 1) >> 2;
            if (!less_(e, h[p])) break;
            h[i] = h[p];
            i = p;
        }
        h[i] = e;
    }

private:
    void settle() {  // fill an empty root with the last leaf
        if (!hole_) return;
        hole_ = false;
        --n_;
        if (n_ > 0) sift_down(0, h_.data()[n_]);
    }
    void sift_down(size_t i, const T e) {
        T* h = h_.data();
        const size_t n = n_;
        for (;;) {
            const size_t c0 = 4 * i + 1;
            if (c0 >= n) break;
            size_t c = c0;
            if (c0 + 4 <= n) {
                // smallest of four without branches: which child wins is a coin toss, and a
                // mispredicted branch costs more than the arithmetic
                const T* g = h + c0;
                const size_t a = (size_t)less_(g[1], g[0]);
                const size_t b = 2 + (size_t)less_(g[3], g[2]);
                const size_t pick = size_t(0) - (size_t)less_(g[b], g[a]);
                c = c0 + (a ^ ((a ^ b) & pick));
            } else {
                for (size_t k = c0 + 1; k < n; ++k)
                    if (less_(h[k], h[c])) c = k;
            }
            if (!less_(h[c], e)) break;
            h[i] = h[c];
            i = c;
        }
        h[i] = e;
    }
    AlignedBuf<T> h_;
    size_t n_ = 0;
    bool hole_ = false;
    Less less_;
};

class EventQueue {
public:
    // event types 0 and 1 (arrival at a pipe's end, end of serialisation) are link events
    static constexpr int32_t N_HOT_TYPES = 2;
    static constexpr int LINK_BITS = 23;                    // directed links < 8,388,608
    static constexpr uint64_t MAX_SEQ = uint64_t(1) << 40;  // 1.1e12 events per run

    void push(ps_t t, int32_t type, int32_t a, int64_t b = 0) {
        push_seq(t, next_seq_++, type, a, b);
    }
    // Reserve a sequence number now and push the event later: a link's pipe keeps its packets
    // in a FIFO (arrival times never decrease along a link) and only its head sits in the heap,
    // with the (time, sequence) it was given when it was sent, so the global order is the same
    // as if every packet had its own heap entry, and the heap stays as small as the busy links.
    uint64_t take_seq() { return next_seq_++; }
    void push_seq(ps_t t, uint64_t seq, int32_t type, int32_t a, int64_t b = 0) {
        if (type < N_HOT_TYPES) {
            if (seq >= MAX_SEQ)
                throw std::overflow_error("packet engine: more than 2^40 events (1.1e12) in one "
                                          "run, the most it numbers");
            hot_.push(HotEv{(uint64_t)t, seq << 24 | (uint64_t)a << 1 | (uint64_t)type});
        } else {
            cold_.push(Event{t, seq, type, a, b});
        }
    }
    bool empty() const { return hot_.empty() && cold_.empty(); }
    size_t size() const { return hot_.size() + cold_.size(); }
    ps_t top_time() {
        if (cold_.empty()) return (ps_t)hot_.top().t;
        if (hot_.empty()) return cold_.top().t;
        return hot_first() ? (ps_t)hot_.top().t : cold_.top().t;
    }
    Event pop() {
        if (!cold_.empty() && (hot_.empty() || !hot_first())) return cold_.pop();
        const HotEv h = hot_.pop();
        return Event{(ps_t)h.t, h.k >> 24, (int32_t)(h.k & 1),
                     (int32_t)((h.k >> 1) & ((uint64_t(1) << LINK_BITS) - 1)), 0};
    }
    uint64_t next_seq() const { return next_seq_; }
    bool link_events_pending() const { return !hot_.empty(); }
    template <class F>
    bool any_other(F f) const { return cold_.any_of(f); }  // over the non-link events

private:
    bool hot_first() {  // both non-empty
        const HotEv& h = hot_.top();
        const Event& c = cold_.top();
        const uint64_t hs = h.k >> 24;
        return (ps_t)h.t < c.t || ((ps_t)h.t == c.t && hs < c.seq);
    }
    Heap4<HotEv, HotLess> hot_;
    Heap4<Event, ColdLess> cold_;
    uint64_t next_seq_ = 0;
};

}  // namespace pk
