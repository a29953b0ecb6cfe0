"""bench/first_call.py and bench/compare.py --modes first run end to end on
cpu (a small two-shard checkpoint): the GPU runs (bench/h200_run.sh
firstcall7 / first7) are these same programs with --device cuda:0."""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, small_two_shard_checkpoint

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def ckpt_dir(tmp_path_factory):
    return small_two_shard_checkpoint(tmp_path_factory, "first", 5,
                                      (5, 33, 17), (4, 9))


def _run(args, timeout=300):
    proc = subprocess.run([sys.executable, *args], capture_output=True,
                          text=True, timeout=timeout, env=dict(os.environ))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_first_call_then_later_calls(ckpt_dir):
    path, nbytes = ckpt_dir
    out = _run([os.path.join(ROOT, "bench", "first_call.py"), path,
                "--device", "cpu", "--later", "free,keep", "--json"])
    got = json.loads(out.strip().splitlines()[-1])
    assert got["ceiling_gb_per_s"] == 0.0  # no host -> device hop on cpu
    assert [c["before"] for c in got["calls"]] == ["first", "free", "keep"]
    for c in got["calls"]:
        assert c["bytes"] == nbytes
        assert c["ratio"] is None
        assert 0 < c["report_seconds"] and 0 < c["seconds"]
    assert "call 1 (first)" in out and "call 3 (keep)" in out
    assert got["prepared_seconds"] is None
    assert "loader prepared" not in out
    assert got["calls"][0]["setup"] > 0  # a fresh process makes its loader


def test_first_call_with_a_prepared_loader(ckpt_dir):
    """--prepared: the loader is made before the clock, so the first call's
    report counts no setup, and the output says call 1 is not a fresh
    process's."""
    path, nbytes = ckpt_dir
    out = _run([os.path.join(ROOT, "bench", "first_call.py"), path,
                "--device", "cpu", "--later", "free", "--prepared",
                "--opt", "threads=2", "--json"])
    got = json.loads(out.strip().splitlines()[-1])
    assert got["prepared_seconds"] > 0
    assert "so call 1 is not a fresh process's" in out
    first = got["calls"][0]
    assert first["bytes"] == nbytes and first["setup"] == 0


def test_compare_first_mode_table_and_budget(ckpt_dir, tmp_path):
    """Fresh-process first calls: every method once in round 1, later
    rounds left out past --budget and the table says so; the markdown and
    json are written."""
    path, nbytes = ckpt_dir
    md, js = tmp_path / "first.md", tmp_path / "first.json"
    _run([os.path.join(ROOT, "bench", "compare.py"), "--device", "cpu",
          "--layouts", "small", "--dir", f"small={path}", "--modes", "first",
          "--methods", "weightlift load_checkpoint,safetensors",
          "--repeat", "3", "--budget", "0.001", "--e2e", "none",
          "--work", str(tmp_path / "work"), "--md", str(md), "--json",
          str(js), "--png", str(tmp_path / "first.png")], timeout=600)
    got = json.loads(js.read_text())
    runs = {r["method"]: r for r in got["runs"]}
    assert set(runs) == {"weightlift load_checkpoint", "safetensors"}
    for r in runs.values():
        assert r["state"] == "first" and r["bytes"] == nbytes
        assert len(r["every_seconds"]) == 1  # round 1 only: the budget
    assert any("round 2 of 3 not run" in n for n in got["notes"])
    text = md.read_text()
    assert "| small (" in text and "weightlift load_checkpoint" in text
