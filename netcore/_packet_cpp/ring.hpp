// A growable FIFO ring (packet ids in a port queue, waiters of a port, a pipe's packets).
#pragma once
#include <cstdint>
#include <vector>

namespace pk {

template <class T>
class RingT {
public:
    bool empty() const { return n_ == 0; }
    size_t size() const { return n_; }
    const T& front() const { return buf_[head_]; }
    void push(const T& v) {
        if (n_ == buf_.size()) grow();
        buf_[(head_ + n_) & (buf_.size() - 1)] = v;
        ++n_;
    }
    T pop() {
        T v = buf_[head_];
        head_ = (head_ + 1) & (buf_.size() - 1);
        --n_;
        return v;
    }
    const T& at(size_t i) const { return buf_[(head_ + i) & (buf_.size() - 1)]; }
    T& at(size_t i) { return buf_[(head_ + i) & (buf_.size() - 1)]; }
    // a hint that entry i (counted from the front; may lie beyond the newest) will be read
    // (rw = 0) or written (rw = 1) soon; the buffer is a power of two, so any i is a slot
    void prefetch(size_t i, bool write) const {
        if (buf_.empty()) return;
        const T* p = &buf_[(head_ + i) & (buf_.size() - 1)];
        if (write) __builtin_prefetch(p, 1);
        else __builtin_prefetch(p, 0);
    }
    void clear() { head_ = 0; n_ = 0; }
    void drop_back(size_t k) { n_ -= k; }  // forget the k newest entries (k <= size())

private:
    void grow() {
        size_t cap = buf_.empty() ? 8 : buf_.size() * 2;
        std::vector<T> nb(cap);
        for (size_t i = 0; i < n_; ++i) nb[i] = at(i);
        buf_.swap(nb);
        head_ = 0;
    }
    std::vector<T> buf_;
    size_t head_ = 0, n_ = 0;
};

using Ring = RingT<int32_t>;

}  // namespace pk
