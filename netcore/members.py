"""Member sets: one Schedule transfer standing for several identical ones.

A transfer node with ``mset[i] = s >= 0`` stands for the transfers ``(src[k], dst[k])`` for k in
``ptr[s]:ptr[s+1]``, each of ``size[i]`` bytes, that start together and move in lock step (one
rate for all of them). The engines give every member its own path, so the fabric carries the
load of all members; only the rate is shared. That is exact for a group of transfers that wait
on each other (a ring's edges, the same pipeline send of every data-parallel replica on a
symmetric fabric) and is what ``network_detail = "auto"`` builds (docs/scale.md).

Sets are shared: many nodes (every micro-batch's pipeline send between the same two stages) can
name one set, so the members are stored and routed once.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from topo.errors import InputError
from topo.routing import spans


def _hosts(a, name: str) -> np.ndarray:
    """Host ids as a contiguous int32 array; InputError for an id beyond int32 (a cast alone
    wraps: member host 2**32 + 1 became host 1, which exists)."""
    arr = np.asarray(a)
    if arr.size and arr.dtype != np.int32 and arr.dtype.kind in "iu":
        lo, hi = int(arr.min()), int(arr.max())
        if lo < -(2**31) or hi >= 2**31:
            raise InputError(f"member sets: {name} host {hi if hi >= 2**31 else lo} does not "
                             f"exist (beyond the int32 host ids)")
    return np.ascontiguousarray(arr, dtype=np.int32)


@dataclass(eq=False)
class MemberSets:
    ptr: np.ndarray  # int64 (S+1,)
    src: np.ndarray  # int32 (M,) host ids
    dst: np.ndarray  # int32 (M,)

    def __post_init__(self):
        self.ptr = np.ascontiguousarray(self.ptr, dtype=np.int64)
        self.src = _hosts(self.src, "src")
        self.dst = _hosts(self.dst, "dst")
        if (len(self.ptr) < 1 or self.ptr[0] != 0 or self.ptr[-1] != len(self.src)
                or len(self.src) != len(self.dst) or (np.diff(self.ptr) < 1).any()):
            raise InputError("member sets: ptr is not a CSR pointer over src/dst with at least "
                             "one member per set")

    @classmethod
    def empty(cls) -> "MemberSets":
        return cls(np.zeros(1), np.zeros(0), np.zeros(0))

    @property
    def n_sets(self) -> int:
        return len(self.ptr) - 1

    @property
    def n_members(self) -> int:
        return len(self.src)

    @property
    def sizes(self) -> np.ndarray:
        return np.diff(self.ptr)

    def positions(self, sets) -> np.ndarray:
        """Indices into ``src``/``dst`` of the members of ``sets``, set after set."""
        sets = np.asarray(sets, dtype=np.int64)
        return spans(self.ptr[sets], self.sizes[sets])

    @staticmethod
    def concat(parts: list["MemberSets | None"]) -> tuple["MemberSets", np.ndarray]:
        """All sets of ``parts`` (None = no sets) one after another; also the set-id offset of
        each part."""
        offs, ptrs, srcs, dsts = [], [np.zeros(1, np.int64)], [], []
        s_off = m_off = 0
        for p in parts:
            offs.append(s_off)
            if p is None:
                continue
            ptrs.append(p.ptr[1:] + m_off)
            srcs.append(p.src)
            dsts.append(p.dst)
            s_off += p.n_sets
            m_off += p.n_members
        cat = lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt)  # noqa
        return (MemberSets(np.concatenate(ptrs), cat(srcs, np.int32), cat(dsts, np.int32)),
                np.asarray(offs, dtype=np.int64))


class SetBuilder:
    """Collect member sets, deduplicating identical ones (same members in the same order)."""

    def __init__(self):
        self._key: dict[bytes, int] = {}
        self._src: list[np.ndarray] = []
        self._dst: list[np.ndarray] = []

    def add(self, src, dst) -> int:
        src = _hosts(src, "src").ravel()
        dst = _hosts(dst, "dst").ravel()
        if src.size == 0 or src.shape != dst.shape:
            raise ValueError("a member set needs at least one (src, dst) pair")
        key = src.tobytes() + b"|" + dst.tobytes()
        s = self._key.get(key)
        if s is None:
            s = self._key[key] = len(self._src)
            self._src.append(src)
            self._dst.append(dst)
        return s

    def __len__(self) -> int:
        return len(self._src)

    def build(self) -> MemberSets:
        if not self._src:
            return MemberSets.empty()
        cnt = np.array([len(s) for s in self._src], dtype=np.int64)
        return MemberSets(np.concatenate([[0], np.cumsum(cnt)]), np.concatenate(self._src),
                          np.concatenate(self._dst))
