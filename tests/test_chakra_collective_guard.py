"""A Chakra trace's COMM_COLL_NODE becomes the collective's full schedule; the memory guard
now checks it before it is built. An ALL_REDUCE over 16,384 ranks (a 537 M-transfer ring)
died of MemoryError after 46 s and 12 GB, or was killed, instead of the one-line exit 2."""
from netcosim import memory_guard
from netcosim.cli import main


def _traces(d, n, size):
    from netcosim.interop import chakra_pb2 as pb
    from netcosim.interop.chakra_writer import SCHEMA_VERSION, _attr_int, frame

    d.mkdir()
    for r in range(n):
        gm = pb.GlobalMetadata(version=SCHEMA_VERSION,
                               attr=[pb.AttributeProto(name="schema", string_val="netcosim")])
        coll = pb.Node(id=1, name="ar", type=pb.COMM_COLL_NODE,
                       attr=[_attr_int("comm_type", pb.ALL_REDUCE), _attr_int("comm_size", size),
                             pb.AttributeProto(name="pg_name", string_val="0")])
        (d / f"t.{r}.et").write_bytes(frame([gm, coll]))


def test_trace_collective_is_guarded(tmp_path, monkeypatch, capsys):
    _traces(tmp_path / "tr", 64, 1 << 20)
    sc = tmp_path / "s.toml"
    sc.write_text(f'[topology]\nkind = "two_tier"\nnodes = 8\n[workload]\nkind = "chakra"\n'
                  f'path = "{tmp_path / "tr"}"\n')
    # the ring over 64 ranks is 8,064 transfers: about 8 MB beyond the 400 MiB base
    monkeypatch.setenv(memory_guard.BUDGET_ENV, "404MiB")
    assert main(["run", str(sc), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "over 64 ranks" in err[0] and "of memory" in err[0], err
    assert not (tmp_path / "o").exists()
    monkeypatch.setenv(memory_guard.BUDGET_ENV, "2GiB")
    assert main(["run", str(sc), "--out", str(tmp_path / "o")]) == 0
