// An allocator for the engine's big random-access arrays (the packet pool, the connections):
// blocks of 2 MiB or more are 2 MiB-aligned and marked for transparent huge pages.
// Why: an all-to-all keeps ~10^5 packets and 16k connections live (~17 MB touched at random);
// over 4 KiB pages that is ~4,000 pages, beyond the TLB's reach, so most touches also walk the
// page table. Linux only backs memory with huge pages on request when THP is in "madvise"
// mode (the default on many distributions); elsewhere the hint is harmless.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <new>
#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace pk {

template <class T>
struct HugeAlloc {
    using value_type = T;
    static constexpr size_t HUGE = size_t(2) << 20;
    HugeAlloc() = default;
    template <class U>
    HugeAlloc(const HugeAlloc<U>&) {}
    T* allocate(size_t n) {
        const size_t bytes = n * sizeof(T);
        const size_t align = bytes >= HUGE ? HUGE : (alignof(T) > 16 ? alignof(T) : 16);
        const size_t size = (bytes + align - 1) / align * align;
        void* p = std::aligned_alloc(align, size ? size : align);
        if (!p) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
        if (bytes >= HUGE) madvise(p, size, MADV_HUGEPAGE);
#endif
        return static_cast<T*>(p);
    }
    void deallocate(T* p, size_t) { std::free(p); }
    template <class U>
    bool operator==(const HugeAlloc<U>&) const { return true; }
    template <class U>
    bool operator!=(const HugeAlloc<U>&) const { return false; }
};

}  // namespace pk
