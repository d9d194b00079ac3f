// A growable FIFO ring (packet ids in a port queue, waiters of a port, a pipe's packets).
// The capacity is a power of two; the index mask is kept rather than derived from a vector's
// size (which for a 40-byte entry was a division on every access: ~4% of the engine's
// instructions). The header is 32 bytes (buffer, mask, head, count), so a link's two rings
// share one cache line (see Link).
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>

namespace pk {

template <class T>
class RingT {
    static_assert(std::is_trivially_copyable<T>::value, "ring entries are copied as bytes");

public:
    RingT() = default;
    RingT(const RingT& o) { *this = o; }
    RingT& operator=(const RingT& o) {
        if (this == &o) return *this;
        std::free(buf_);
        buf_ = nullptr;
        mask_ = head_ = n_ = 0;
        if (o.buf_) {  // a copy of its own (never the source's buffer)
            buf_ = alloc(o.mask_ + 1);
            std::memcpy(static_cast<void*>(buf_), o.buf_, (o.mask_ + 1) * sizeof(T));
            mask_ = o.mask_;
            head_ = o.head_;
            n_ = o.n_;
        }
        return *this;
    }
    RingT(RingT&& o) noexcept { *this = static_cast<RingT&&>(o); }
    RingT& operator=(RingT&& o) noexcept {
        if (this == &o) return *this;
        std::free(buf_);
        buf_ = o.buf_;
        mask_ = o.mask_;
        head_ = o.head_;
        n_ = o.n_;
        o.buf_ = nullptr;
        o.mask_ = o.head_ = o.n_ = 0;
        return *this;
    }
    ~RingT() { std::free(buf_); }
    bool empty() const { return n_ == 0; }
    size_t size() const { return n_; }
    const T& front() const { return buf_[head_]; }
    void push(const T& v) {
        if (n_ == capacity()) grow();
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
        if (!buf_) return;
        const T* p = &buf_[(head_ + i) & mask_];
        if (write) __builtin_prefetch(p, 1);
        else __builtin_prefetch(p, 0);
    }
    void clear() { head_ = 0; n_ = 0; }
    void drop_back(size_t k) { n_ -= k; }  // forget the k newest entries (k <= size())

private:
    size_t capacity() const { return buf_ ? mask_ + 1 : 0; }
    static T* alloc(size_t cap) {
        // 64-byte aligned: a 32-byte pipe entry never straddles two cache lines
        const size_t bytes = (cap * sizeof(T) + 63) & ~size_t(63);
        void* p = std::aligned_alloc(64, bytes);
        if (!p) throw std::bad_alloc();
        return static_cast<T*>(p);
    }
    void grow() {
        const size_t cap = buf_ ? (mask_ + 1) * 2 : 8;
        T* nb = alloc(cap);
        for (size_t i = 0; i < n_; ++i) nb[i] = at(i);
        std::free(buf_);
        buf_ = nb;
        mask_ = cap - 1;
        head_ = 0;
    }
    T* buf_ = nullptr;
    size_t mask_ = 0;
    size_t head_ = 0, n_ = 0;
};

using Ring = RingT<int32_t>;

}  // namespace pk
