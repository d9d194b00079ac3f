"""The CLI fuzzing helpers (tests/test_reliability.py, tests/test_reliability_more.py):
mutations of a scenario-like table drawn with Hypothesis, and a CLI run in a forked child that
is killed when it overruns (the modules and compiled kernels are loaded once, in the parent).
"""
import copy
import os
import tomllib

import pytest
from hypothesis import strategies as st

from netcosim.cli import main

LITERALS = ["nan", "inf", "-inf", "0", "-1", "1", "2", "3", "0.5", "-0.0", "1e300", "1e15",
            "9223372036854775807", "18446744073709551616", '""', '"x"', '"1e15B"', '"1PiB"',
            '"0.3B"', '"-5KiB"', "[]", "{}", "true", "[1, 2]", "[0, 0]", "[-1, 1]", '"packet"',
            '"flow"', "{a = 1}", '"ecmp"', '"spray"', '"dor"', '"up"', '"degrade"',
            '"all_to_all"', '"nan"', '"10us"', '"-10us"']
# keys where huge numbers are not memory tests of the fabric or schedule size (another
# issue's guard)
HUGE_OK = {"bytes", "start_us", "at_us", "seed", "latency_us", "link_gbps", "factor",
           "step_latency_us", "name", "description", "mtu", "buffer_packets",
           "reroute_delay_us", "max_time_s", "min_rto_s", "max_rto_s"}
HUGE = {"1e300", "1e15", "9223372036854775807", "18446744073709551616", '"1e15B"', '"1PiB"'}
TIMEOUT_S = 60.0
ADD_KEYS = ["colour", "kind", "k", "bytes", "at_us"]


def fuzz_paths(v, prefix=()):
    """Every path into ``v`` (the first 3 entries of each list)."""
    if prefix:
        yield prefix
    if isinstance(v, dict):
        for k, x in v.items():
            yield from fuzz_paths(x, prefix + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v[:3]):
            yield from fuzz_paths(x, prefix + (i,))


def run_forked(argv, cwd, with_stdout=False):
    """(exit status, stderr[, stdout]) of main(argv) in a forked child; fails the test on
    overrun (TIMEOUT_S)."""
    import contextlib
    import io
    import multiprocessing
    import traceback

    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)

    def child():
        err, out = io.StringIO(), io.StringIO()
        try:
            os.chdir(cwd)
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
                rc = main([str(a) for a in argv])
        except BaseException:  # noqa: BLE001 - whatever escapes main is the finding
            rc = "escaped"
            err.write(traceback.format_exc())
        send.send((rc, err.getvalue(), out.getvalue()))
        os._exit(0)

    p = ctx.Process(target=child)
    p.start()
    try:
        if not recv.poll(TIMEOUT_S):
            pytest.fail(f"no answer within {TIMEOUT_S} s (a hang?): netcosim "
                        f"{' '.join(map(str, argv))}")
        rc, err, out = recv.recv()
        return (rc, err, out) if with_stdout else (rc, err)
    finally:
        p.kill()
        p.join()


def run_clean(argv, cwd, out):
    """Run ``netcosim argv`` forked (``run_forked``) and assert it ended cleanly: exit 0, or
    exit 2 with one ``netcosim: error:`` line and nothing written to ``out``; never a
    traceback. Returns (exit status, stderr, the command line and stderr for messages)."""
    rc, err = run_forked(argv, cwd)
    shown = f"netcosim {' '.join(map(str, argv))}\n{err}"
    assert rc in (0, 2), shown
    assert "Traceback" not in err and "internal error" not in err, shown
    if rc == 2:
        assert err.strip().splitlines()[-1].startswith("netcosim: error: "), shown
        assert not out.exists(), shown
    return rc, err, shown


def mutated(data, draw, literals=LITERALS, huge_ok=HUGE_OK, add_keys=ADD_KEYS, as_sets=True):
    """A copy of ``data`` with up to 2 keys deleted, renamed, added or given another type, and
    up to 3 values replaced by TOML ``literals``: as ``--set PATH=LITERAL`` arguments (the
    second result) when ``as_sets``, else in the copy itself (files of commands without --set,
    whose keys may be dotted paths). A huge literal goes only to a key in ``huge_ok``."""
    d = copy.deepcopy(data)
    for _ in range(draw(st.integers(0, 2))):
        paths = list(fuzz_paths(d))
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        node = d
        for seg in path[:-1]:
            node = node[seg]
        last = path[-1]
        op = draw(st.sampled_from(["delete", "rename", "add", "type"]))
        if op == "delete":
            del node[last]
        elif op == "rename" and isinstance(node, dict):
            node[f"{last}x"] = node.pop(last)
        elif op == "add" and isinstance(node[last], dict):
            node[last][draw(st.sampled_from(add_keys))] = 1
        elif op == "add" and isinstance(node[last], list):
            node[last].append(copy.deepcopy(node[last][0]) if node[last] else 0)
        else:
            node[last] = draw(st.sampled_from([[], {}, "x", -1, 0.5, True, None and 0]))
    sets = []
    for _ in range(draw(st.integers(0, 3))):
        paths = [p for p in fuzz_paths(d) if all(isinstance(s, (str, int)) for s in p)
                 and (not as_sets or all(isinstance(s, int) or (s and "." not in s and
                                                                 "=" not in s) for s in p))]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        lit = draw(st.sampled_from(literals))
        key = str(path[-1]).split(" as ")[0].split(".")[-1]
        if lit in HUGE and key not in huge_ok:
            lit = "-1"
        if as_sets:
            sets += ["--set", ".".join(map(str, path)) + "=" + lit]
            continue
        node = d
        for seg in path[:-1]:
            node = node[seg]
        node[path[-1]] = tomllib.loads(f"v = {lit}")["v"]
    return d, sets
