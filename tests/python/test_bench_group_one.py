"""bench/group_one.py runs end to end on cpu (a gloo group of one, a small
two-shard checkpoint): the GPU run (bench/h200_run.sh groupone7) is the
same program with --device cuda:0 over NCCL."""

import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT, small_two_shard_checkpoint

pytest.importorskip("torch")


def test_group_of_one_against_the_plain_load(tmp_path_factory):
    path, _ = small_two_shard_checkpoint(tmp_path_factory, "group_one", 6,
                                         (5, 33, 17), (4, 9))
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "group_one.py"),
         "--ckpt", path, "--device", "cpu", "--rounds", "1", "--threads",
         "1"], capture_output=True, text=True, timeout=300,
        env=dict(os.environ))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line for line in proc.stdout.splitlines()
            if "x the plain load" in line]
    names = [r.split("  ")[0] for r in rows]
    assert names == ["plain", "group, automatic batches",
                     "group, 256 MiB batches", "group, 64 MiB batches"], rows
    assert "1.000x the plain load" in rows[0]
    # A group load says how many batches it ran; the plain one has none.
    assert re.search(r"\s-: median", rows[0]), rows[0]
    for r in rows[1:]:
        assert re.search(r"\d+ batch(es)?: median", r), r
