// A growable FIFO ring (packet ids in a port queue, waiters of a port, a pipe's packets).
// The capacity is a power of two; the index mask is kept rather than derived from a vector's
// size (which for a 40-byte entry is a division on every access: ~4% of the engine's
// instructions when it was).
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace pk {

template <class T>
class RingT {
public:
    RingT() = default;
    RingT(const RingT& o) { *this = o; }
    RingT& operator=(const RingT& o) {
        if (this == &o) return *this;
        store_ = o.store_;
        buf_ = store_.empty() ? nullptr : store_.data();  // never the source's buffer
        cap_ = o.cap_;
        mask_ = o.mask_;
        head_ = o.head_;
        n_ = o.n_;
        return *this;
    }
    RingT(RingT&& o) noexcept { *this = std::move(o); }
    RingT& operator=(RingT&& o) noexcept {
        store_ = std::move(o.store_);  // the buffer moves with its storage
        buf_ = store_.empty() ? nullptr : store_.data();
        cap_ = o.cap_;
        mask_ = o.mask_;
        head_ = o.head_;
        n_ = o.n_;
        o.buf_ = nullptr;
        o.cap_ = o.mask_ = o.head_ = o.n_ = 0;
        return *this;
    }
    bool empty() const { return n_ == 0; }
    size_t size() const { return n_; }
    const T& front() const { return buf_[head_]; }
    void push(const T& v) {
        if (n_ == cap_) grow();
        buf_[(head_ + n_) & mask_] = v;
        ++n_;
    }
    T pop() {
        T v = buf_[head_];
        head_ = (head_ + 1) & mask_;
        --n_;
        return v;
    }
    const T& at(size_t i) const { return buf_[(head_ + i) & mask_]; }
    T& at(size_t i) { return buf_[(head_ + i) & mask_]; }
    // a hint that entry i (counted from the front; may lie beyond the newest) will be read
    // (rw = 0) or written (rw = 1) soon; the buffer is a power of two, so any i is a slot
    void prefetch(size_t i, bool write) const {
        if (cap_ == 0) return;
        const T* p = &buf_[(head_ + i) & mask_];
        if (write) __builtin_prefetch(p, 1);
        else __builtin_prefetch(p, 0);
    }
    void clear() { head_ = 0; n_ = 0; }
    void drop_back(size_t k) { n_ -= k; }  // forget the k newest entries (k <= size())

private:
    void grow() {
        const size_t cap = cap_ ? cap_ * 2 : 8;
        std::vector<T> nb(cap);
        for (size_t i = 0; i < n_; ++i) nb[i] = at(i);
        store_.swap(nb);
        buf_ = store_.data();
        cap_ = cap;
        mask_ = cap - 1;
        head_ = 0;
    }
    std::vector<T> store_;
    T* buf_ = nullptr;
    size_t cap_ = 0, mask_ = 0;
    size_t head_ = 0, n_ = 0;
};

using Ring = RingT<int32_t>;

}  // namespace pk
