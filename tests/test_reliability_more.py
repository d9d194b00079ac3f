"""Reliability leftovers (branch reliability-4): memory estimates before big inputs are read,
validate on very long fabrics, large sweeps that start at once, fuzzing of the sweep and
fault-study files, and the lower layers' byte-size parser.

Every input is generated on the fly and small; what would be large is made to trip a guard
through its injectable budget (NETCOSIM_MEMORY_BUDGET), and the time checks are hang guards.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_helpers import cli, refused, write

ROOT = Path(__file__).resolve().parent.parent


# =========================================================================== layering: sizes
def test_collectives_parse_sizes_without_the_scenario_layer():
    # collectives/_plan.py read "1MiB" through netcosim.units: an upper layer
    code = ("import sys, collectives._plan as p\n"
            "assert p.check_nbytes('1.5KiB') == 1536\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('netcosim', 'validation'))\n"
            "assert not bad, bad\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr


def test_scenario_layer_reuses_the_one_size_parser():
    import netcore.sizes
    import netcosim.units

    assert netcosim.units.parse_bytes is netcore.sizes.parse_bytes
    assert netcosim.units.MAX_BYTES == netcore.sizes.MAX_BYTES
    from topo.errors import InputError

    with pytest.raises(InputError, match=r"workload.bytes = '0.3B': is 0.3 bytes"):
        netcosim.units.parse_bytes("0.3B", "workload.bytes")
