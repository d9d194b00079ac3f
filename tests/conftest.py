"""Hypothesis profiles for the suite.

The default profile, `reproducible`, derandomizes every property test: each run (the README's
command, CI, a developer's checkout) draws the same examples, so a red run is reproducible
from the commit alone and an unrelated change cannot turn CI red by drawing a new example.
The price is that CI explores no new inputs; explore on purpose with

    pytest --hypothesis-profile=explore           # fresh random examples each run
    HYPOTHESIS_PROFILE=explore pytest ...

and turn what it finds into an explicit `@example` or a regression test.
Per-test `@settings(...)` (max_examples, deadline) still apply on top of either profile.
"""

import os

from hypothesis import settings

settings.register_profile("reproducible", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "reproducible"))
