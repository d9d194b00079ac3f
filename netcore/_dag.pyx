# cython: language_level=3
"""Compiled DAG helpers for the Schedule: Kahn's topological order over CSR parent lists."""
import numpy as np

from libc.stdint cimport int64_t


def topological_order(const int64_t[::1] dep_ptr, const int64_t[::1] dep_idx):
    """Kahn's algorithm. Returns ``(order, filled)``: ``order[:filled]`` is a topological order
    of the nodes that can start; ``filled < n`` means the rest wait on a cycle.

    Ready nodes are taken in first-in first-out order starting from ascending ids, so the
    order is deterministic.
    """
    cdef Py_ssize_t n = dep_ptr.shape[0] - 1
    cdef Py_ssize_t m = dep_idx.shape[0]
    cdef int64_t[::1] indeg = np.empty(n, dtype=np.int64)
    cdef int64_t[::1] cptr = np.zeros(n + 1, dtype=np.int64)
    cdef int64_t[::1] cidx = np.empty(m, dtype=np.int64)
    cdef int64_t[::1] fill = np.empty(n, dtype=np.int64)
    order_arr = np.empty(n, dtype=np.int64)
    cdef int64_t[::1] order = order_arr
    cdef Py_ssize_t i, j, head = 0, tail = 0
    cdef int64_t p, c
    with nogil:
        for i in range(n):
            indeg[i] = dep_ptr[i + 1] - dep_ptr[i]
        for j in range(m):
            cptr[dep_idx[j] + 1] += 1
        for i in range(n):
            cptr[i + 1] += cptr[i]
            fill[i] = cptr[i]
        for i in range(n):  # children CSR, children in ascending id per parent
            for j in range(dep_ptr[i], dep_ptr[i + 1]):
                p = dep_idx[j]
                cidx[fill[p]] = i
                fill[p] += 1
        for i in range(n):
            if indeg[i] == 0:
                order[tail] = i
                tail += 1
        while head < tail:
            p = order[head]
            head += 1
            for j in range(cptr[p], cptr[p + 1]):
                c = cidx[j]
                indeg[c] -= 1
                if indeg[c] == 0:
                    order[tail] = c
                    tail += 1
    return order_arr, tail
