"""bench/interleaved.py runs end to end on cpu (a small two-shard
checkpoint): configurations parsed from the command line, round 0 checked
against the first configuration with the same tensor-parallel keywords,
later rounds timed. The GPU runs are the same program with --device cuda:0."""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, small_two_shard_checkpoint

torch = pytest.importorskip("torch")

PROGRAM = os.path.join(ROOT, "bench", "interleaved.py")


@pytest.fixture(scope="module")
def ckpt_dir(tmp_path_factory):
    return small_two_shard_checkpoint(tmp_path_factory, "interleaved", 7,
                                      (4, 32, 16), (3, 10))


def _run(args):
    return subprocess.run([sys.executable, PROGRAM, *args],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ))


def test_configurations_checked_then_timed(ckpt_dir):
    path, nbytes = ckpt_dir
    proc = _run([path, "--device", "cpu", "--rounds", "2", "--json",
                 "--config", "default",
                 "--config", "one thread", "threads=1",
                 "--config", "rank 1 of 2", "tp_rank=1", "tp_size=2",
                 "tp_plan=colwise",
                 "--config", "rank 1 of 2, one thread", "tp_rank=1",
                 "tp_size=2", "tp_plan=colwise", "threads=1"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    # Each tensor-parallel key has its own reference; the others are
    # compared with it and match.
    assert "default: 7 tensors, the reference" in out
    assert "one thread: 7 tensors, 0 differ from the reference" in out
    assert "rank 1 of 2: 7 tensors, the reference" in out
    assert "rank 1 of 2, one thread: 7 tensors, 0 differ" in out
    assert "ceiling 0.0 GB/s; 2 later calls each" in out
    got = json.loads(out.strip().splitlines()[-1])
    assert got["ceiling_gb_per_s"] == 0.0  # no host -> device hop on cpu
    rows = {c["name"]: c for c in got["configs"]}
    assert list(rows) == ["default", "one thread", "rank 1 of 2",
                          "rank 1 of 2, one thread"]
    for c in rows.values():
        assert len(c["wall_seconds"]) == len(c["transfer_seconds"]) == 2
        assert all(w > 0 for w in c["wall_seconds"])
        assert f"{c['name']} " in out  # its line in the table
    assert rows["default"]["bytes"] == nbytes
    assert rows["one thread"]["bytes"] == nbytes
    # colwise, rank 1 of 2: the second half of every tensor's first dim
    # (32 rows of 16 -> 16; 10 -> 5)
    assert rows["rank 1 of 2"]["bytes"] == nbytes // 2


def test_words_outside_a_configuration_are_refused(ckpt_dir):
    path, _ = ckpt_dir
    proc = _run([path, "--device", "cpu", "threads=1", "--config", "x"])
    assert proc.returncode != 0
    assert "options follow a --config NAME" in proc.stderr
    proc = _run([path, "--device", "cpu"])
    assert proc.returncode != 0
    assert "give at least one --config NAME" in proc.stderr
