"""link_series.csv is made block by block: a 65,536-GPU step records about 196 M load changes,
and building its five columns at once ran out of memory at 12.7 GB. The streamed file must be
the same text as the columns built whole, and writing it must hold only a block or so."""
import tracemalloc
import types

import numpy as np

from netcosim import outputs


def _fake(n_links: int, per_link: np.ndarray, seed: int = 3):
    rng = np.random.default_rng(seed)
    topo = types.SimpleNamespace(
        dlink_src=rng.integers(0, 10_000, n_links), dlink_dst=rng.integers(0, 10_000, n_links),
        dlink_bw=rng.choice([50e9, 100e9, 400e9 / 8 * 1.0], n_links))
    ptr = np.concatenate([[0], np.cumsum(per_link)])
    n = int(ptr[-1])
    res = types.SimpleNamespace(link_extra={
        "series_ptr": ptr, "series_t": np.sort(rng.random(n)) * 1e-3,
        "series_rate": rng.random(n) * 50e9})
    return topo, res


def _eager(topo, res):
    """The columns built whole (how link_series.csv was made before)."""
    ex = res.link_extra
    d = np.repeat(np.arange(len(ex["series_ptr"]) - 1), np.diff(ex["series_ptr"]))
    return [topo.dlink_src[d], topo.dlink_dst[d], ex["series_t"] * 1e6,
            ex["series_rate"] * 8 / 1e9, ex["series_rate"] / topo.dlink_bw[d]]


def test_streamed_series_is_the_same_text(tmp_path, monkeypatch):
    # links with no change, one, and many; blocks that end inside a link's rows
    per_link = np.array([0, 1, 7, 0, 0, 13, 2, 0, 40, 1, 0])
    topo, res = _fake(len(per_link), per_link)
    monkeypatch.setattr(outputs, "BLOCK_ROWS", 5)
    header, cols = outputs.link_series_table(topo, res)
    outputs._write_csv(tmp_path / "streamed.csv", header, cols)
    outputs._write_csv(tmp_path / "eager.csv", header,
                       [outputs._column(c) if c.dtype.kind == "i" else outputs._floats(c)
                        for c in _eager(topo, res)])
    streamed = (tmp_path / "streamed.csv").read_bytes()
    assert streamed == (tmp_path / "eager.csv").read_bytes()
    assert streamed.count(b"\n") == 1 + per_link.sum()


def test_writing_the_series_holds_a_block_not_the_table(tmp_path, monkeypatch):
    # 3 M rows: whole columns would take 5 x 24 MB; a block of 2^15 rows, with its text,
    # about 5 MB
    monkeypatch.setattr(outputs, "BLOCK_ROWS", 1 << 15)
    per_link = np.full(300, 10_000)
    topo, res = _fake(len(per_link), per_link)
    tracemalloc.start()
    try:
        header, cols = outputs.link_series_table(topo, res)
        outputs._write_csv(tmp_path / "s.csv", header, cols)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20e6, f"peak {peak / 1e6:.0f} MB while writing a 3 M-row series"
