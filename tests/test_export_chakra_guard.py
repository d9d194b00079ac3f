"""`netcosim export --chakra` holds every rank's protobuf messages before writing them:
about 3 KB per schedule node, three times what the run guard counts. A double-binary-tree
all-reduce on fat_tree k=40 (4.1 M nodes) took 11.6 GB and 105 s; a little larger and the
kernel kills it. The export is now refused with the estimate (exit 2) before anything, the
fabric files included, is written."""
from netcosim import memory_guard
from netcosim.cli import main


def test_chakra_export_refused_when_messages_cannot_fit(tmp_path, monkeypatch, capsys):
    # 32,640 schedule nodes: the build guard wants ~432 MiB, the Chakra messages ~500 MiB
    monkeypatch.setenv(memory_guard.BUDGET_ENV, "460MiB")
    g, d = tmp_path / "f.graphml", tmp_path / "chakra"
    rc = main(["export", "examples/ring_allreduce_fat_tree.toml", "--set",
               "workload.algorithm=double_binary_tree", "--graphml", str(g), "--chakra", str(d)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "32,640 schedule nodes" in err[0], err
    assert not g.exists() and not d.exists()
    # with room, the same export writes both
    monkeypatch.setenv(memory_guard.BUDGET_ENV, "2GiB")
    assert main(["export", "examples/ring_allreduce_fat_tree.toml", "--set",
                 "workload.algorithm=double_binary_tree", "--graphml", str(g),
                 "--chakra", str(d)]) == 0
    assert g.exists() and len(list(d.iterdir())) == 128
