"""Sizes, size ranges, bandwidth and time parsing (netcosim.units)."""
import pytest
from hypothesis import assume, given, strategies as st

from netcosim.units import (MAX_BYTES, Bps_to_gbps, format_bytes, gbps_to_Bps, parse_bytes, parse_gbps,
                            parse_size_range, parse_us)
from topo.errors import InputError


@pytest.mark.parametrize("text,expected", [
    ("256MiB", 256 * 2**20), ("1.5GB", 1_500_000_000), ("1.5KiB", 1536), ("4096", 4096),
    (" 64 KiB ", 65536), ("1e3", 1000), ("2TiB", 2 * 2**40), ("7B", 7), ("0", 0),
    (4096, 4096), (4096.0, 4096), ("1kB", 1000), (".5KiB", 512),
])
def test_parse_bytes(text, expected):
    assert parse_bytes(text) == expected
    assert isinstance(parse_bytes(text), int)


@pytest.mark.parametrize("bad", ["0.3B", "1.5Mb", "-1", -1, True, None, "abc", "1.5.3KiB",
                                 float("inf"), float("nan"), 1.5, "1e30", 2**70, [1], "",
                                 "1e-9999999999", "1e9999999999"])
def test_parse_bytes_refuses_with_field_and_value(bad):
    with pytest.raises(InputError) as e:
        parse_bytes(bad, "workload.bytes")
    assert str(e.value).startswith(f"workload.bytes = {bad!r}")


def test_zero_refused_when_asked():
    with pytest.raises(InputError, match="> 0"):
        parse_bytes(0, "x", allow_zero=False)


def test_size_ranges():
    assert parse_size_range("1KiB..8KiB") == [1024, 2048, 4096, 8192]
    assert parse_size_range("1MiB..1GiB x4") == [2**20 * 4**i for i in range(6)]
    assert parse_size_range("1KiB..1000KiB") == [2**10 * 2**i for i in range(10)]  # stops at 512KiB
    assert parse_size_range("4KiB..4KiB") == [4096]
    assert parse_size_range(["1KiB", 7]) == [1024, 7]
    assert parse_size_range("2MiB") == [2 * 2**20]
    assert len(parse_size_range("1KiB..8GiB")) == 24


@pytest.mark.parametrize("bad", ["8KiB..1KiB", "1KiB..8KiB x1", "0..8KiB", "1KiB..", "..4KiB",
                                 [], "1KiB..8KiB x", "1KiB..2Mb"])
def test_size_range_refusals(bad):
    with pytest.raises(InputError) as e:
        parse_size_range(bad, "sweep.bytes")
    assert "sweep.bytes" in str(e.value)


@given(st.integers(min_value=0, max_value=2**62))
def test_format_then_parse_roundtrip(n):
    assert parse_bytes(format_bytes(n)) == n


@given(st.integers(1, 2**30), st.integers(2, 16), st.integers(0, 20))
def test_range_is_geometric_and_bounded(lo, factor, steps):
    hi = lo * factor ** (steps + 1) - 1  # just below the next grid point
    assume(hi <= MAX_BYTES)
    sizes = parse_size_range(f"{lo}..{hi} x{factor}")
    assert sizes[0] == lo and len(sizes) == steps + 1
    assert all(b == a * factor for a, b in zip(sizes, sizes[1:]))
    assert sizes[-1] <= hi < sizes[-1] * factor


def test_bandwidth_and_time():
    assert gbps_to_Bps(400) == 50e9
    assert Bps_to_gbps(50e9) == 400
    assert parse_gbps(400) == 400.0
    assert parse_gbps("3.2Tbps") == 3200.0
    assert parse_gbps("50GB/s") == 400.0
    assert parse_us(1.5) == 1.5
    assert parse_us("500ns") == 0.5
    assert parse_us("2ms") == 2000.0
    for bad, fn in ((0, parse_gbps), (-1, parse_gbps), ("fast", parse_gbps), (-1, parse_us),
                    ("1 fortnight", parse_us), (float("inf"), parse_us), (True, parse_us)):
        with pytest.raises(InputError, match="^field = "):
            fn(bad, "field")
