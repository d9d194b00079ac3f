// A growable FIFO ring of int32 (packet ids in a port queue, waiters of a port).
#pragma once
#include <cstdint>
#include <vector>

namespace pk {

class Ring {
public:
    bool empty() const { return n_ == 0; }
    size_t size() const { return n_; }
    int32_t front() const { return buf_[head_]; }
    void push(int32_t v) {
        if (n_ == buf_.size()) grow();
        buf_[(head_ + n_) & (buf_.size() - 1)] = v;
        ++n_;
    }
    int32_t pop() {
        int32_t v = buf_[head_];
        head_ = (head_ + 1) & (buf_.size() - 1);
        --n_;
        return v;
    }
    int32_t at(size_t i) const { return buf_[(head_ + i) & (buf_.size() - 1)]; }
    void clear() { head_ = 0; n_ = 0; }

private:
    void grow() {
        size_t cap = buf_.empty() ? 8 : buf_.size() * 2;
        std::vector<int32_t> nb(cap);
        for (size_t i = 0; i < n_; ++i) nb[i] = at(i);
        buf_.swap(nb);
        head_ = 0;
    }
    std::vector<int32_t> buf_;
    size_t head_ = 0, n_ = 0;
};

}  // namespace pk
