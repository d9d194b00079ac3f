"""Numba's disk cache keys compiled code by the time stamp of the file that defines it, not by
the files whose functions it inlines. A module whose cached code inlines code from other files
records a hash of them; when they change, this test fails until the hash is updated, and that
edit of the module is what makes Numba recompile it. (Found when an edit of the serving cost
model alone left the cached serving loop pricing with the old one.)"""
import hashlib
from pathlib import Path

import pytest

from netcosim.inference import kv_transfer, loop

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("module", [loop, kv_transfer], ids=lambda m: m.__name__)
def test_recorded_hash_of_inlined_sources_is_current(module):
    h = hashlib.sha1()
    for f in module.INLINED_FROM:
        h.update((ROOT / f).read_bytes())
    assert h.hexdigest()[:16] == module.INLINED_SHA1, (
        f"{', '.join(module.INLINED_FROM)} changed: set INLINED_SHA1 = "
        f"\"{h.hexdigest()[:16]}\" in {module.__file__} (the edit makes Numba recompile it)")
