"""bench/tp_bench.py runs end to end (on cpu, a small Llama-named
checkpoint): each rank in its own process, bit-exact against safetensors'
get_slice; "together" ranks get LOCAL_WORLD_SIZE and say they share the
cores; --option values reach the ranks with their types. The GPU run
(bench/h200_tp.sh) is this same program with --device cuda:0."""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, write_sharded

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    """2 layers of a Llama layout (hidden 64, MLP 96, vocab 100) in two
    shards, bf16: q/k/v/gate/up/lm_head split on dim 0, o/down on dim 1."""
    g = torch.Generator().manual_seed(3)
    h, m, v = 64, 96, 100

    def t(*shape):
        return torch.randn(*shape, generator=g).to(torch.bfloat16)

    shards = [{"model.embed_tokens.weight": t(v, h)}, {}]
    for i in range(2):
        p = f"model.layers.{i}."
        layer = {p + "self_attn.q_proj.weight": t(h, h),
                 p + "self_attn.k_proj.weight": t(h, h),
                 p + "self_attn.v_proj.weight": t(h, h),
                 p + "self_attn.o_proj.weight": t(h, h),
                 p + "mlp.gate_proj.weight": t(m, h),
                 p + "mlp.up_proj.weight": t(m, h),
                 p + "mlp.down_proj.weight": t(h, m),
                 p + "input_layernorm.weight": t(h)}
        shards[i].update(layer)
    shards[1]["lm_head.weight"] = t(v, h)
    shards[1]["model.norm.weight"] = t(h)
    d = tmp_path_factory.mktemp("llama")
    return write_sharded(d, shards)


def run_bench(llama_dir, tmp_path, *extra):
    out = tmp_path / "tp.json"
    env = dict(os.environ)
    env.pop("LOCAL_WORLD_SIZE", None)
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "tp_bench.py"),
         "--ckpt", llama_dir, "--device", "cpu", "--json", str(out),
         "--work", str(tmp_path / "work"), *extra],
        capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(out.read_text()), proc.stdout


def test_ranks_alone_and_together_bit_exact(llama_dir, tmp_path):
    got, text = run_bench(llama_dir, tmp_path, "--sizes", "2",
                          "--modes", "alone,together")
    assert not got["failures"], got["failures"]
    row = got["rows"][0]
    assert row["n"] == 2 and row["bit_exact"] is True, text
    assert [a["r"] for a in row["alone"]] == [0, 1]
    assert len(row["together"]) == 2
    for rank in row["together"]:
        assert "error" not in rank, rank
        assert any("shared by 2 processes loading on this host" in n
                   for n in rank["notes"]), rank["notes"]
    for rank in row["alone"]:
        assert not any("shared by" in n for n in rank["notes"]), rank["notes"]
    assert "together with LOCAL_WORLD_SIZE" in text
    assert got["ranks_started"] == "fork"
    assert "ranks forked from a server that imported torch" in text
    # Each rank's first call made its loader on the clock.
    assert got["prepared"] is False and "prepared" not in text
    for rank in row["alone"] + row["together"]:
        assert rank["setup_seconds"] > 0, rank


def test_prepared_ranks_pay_no_setup(llama_dir, tmp_path):
    """--prepared: each rank makes its loader (weightlift.prepare) before
    the barrier, so its first call's report counts no setup; it waits
    --construct-seconds between the two, and the output says how long.
    Each rank's report phases come with its results."""
    got, text = run_bench(llama_dir, tmp_path, "--sizes", "2",
                          "--modes", "alone,together", "--prepared",
                          "--construct-seconds", "0.05")
    assert not got["failures"], got["failures"]
    row = got["rows"][0]
    assert got["prepared"] is True and row["bit_exact"] is True
    assert got["construct_seconds"] == 0.05
    assert "loaders prepared 0.05 s before the clock" in text
    assert "ms of its call outside the executor's workers" in text, text
    for rank in row["alone"] + row["together"]:
        assert rank["setup_seconds"] == 0, rank
        phases = (rank["open_seconds"] + rank["alloc_seconds"]
                  + rank["transfer_seconds"])
        assert 0 < phases <= rank["report_seconds"] + 1e-6, rank
        assert any(n.startswith("loader phases: ") for n in rank["notes"])


def test_options_reach_the_ranks(llama_dir, tmp_path):
    """threads=1 arrives as an int (a string would be a TypeError in the
    rank); --no-local-world-size leaves the together ranks alone; --spawn
    starts them as new interpreters, and the output says so."""
    got, text = run_bench(llama_dir, tmp_path, "--sizes", "2", "--modes",
                          "together", "--option", "threads=1",
                          "--option", "backend=pread", "--no-local-world-size",
                          "--spawn")
    assert not got["failures"], got["failures"]
    assert got["ranks_started"] == "spawn"
    assert "ranks in new interpreters" in text
    for rank in got["rows"][0]["together"]:
        assert not any("shared by" in n for n in rank["notes"])


def test_rank_bytes_from_headers_match_the_loaded_parts(llama_dir, tmp_path):
    """The copies mode sizes each process's pinned copy with rank_bytes:
    it must be what a rank really delivers (uneven splits included: MLP 96
    and vocab 100 over 3 ranks); on cpu the mode itself is skipped."""
    got, text = run_bench(llama_dir, tmp_path, "--sizes", "3",
                          "--modes", "alone,copies", "--no-verify")
    assert not got["failures"], got["failures"]
    row = got["rows"][0]
    assert row["copies"] == [] and row["copies_together_gb_per_s"] == 0.0
    assert "pinned copies" not in text
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    try:
        import tp_bench
    finally:
        sys.path.pop(0)
    delivered = {a["r"]: a["bytes"] for a in row["alone"]}
    assert sorted(delivered) == [0, 1, 2]
    for r, nbytes in delivered.items():
        assert tp_bench.rank_bytes(llama_dir, 3, r) == nbytes, r
    assert len(set(delivered.values())) > 1  # the split is uneven


def test_a_second_run_in_the_same_folder_starts_its_ranks_together(
        llama_dir, tmp_path):
    """The first run leaves ready files in --work; the second must not
    take them for its own ranks' (its barrier would open at once and the
    ranks would start apart, as a second H200 run in session 11 did)."""
    run_bench(llama_dir, tmp_path, "--sizes", "2", "--modes", "together",
              "--no-verify")
    work = tmp_path / "work" / "together-2"
    assert (work / "ready0").exists() and (work / "ready1").exists()
    stamp = (work / "ready0").stat().st_mtime_ns
    got, _ = run_bench(llama_dir, tmp_path, "--sizes", "2", "--modes",
                       "together", "--no-verify")
    ranks = got["rows"][0]["together"]
    assert len(ranks) == 2 and all("error" not in r for r in ranks)
    # This run's barrier opened only once both ranks had written their new
    # ready files (with the stale ones taken for theirs, it opens first).
    go = (work / "go").stat().st_mtime_ns
    for r in (0, 1):
        assert go >= (work / f"ready{r}").stat().st_mtime_ns, r


def test_tp_phases_prepared_times_each_step(llama_dir):
    """bench/tp_phases.py --prepared: each call is prepared first (the kept
    request and checkpoint), call 0 is load_checkpoint with its report's
    phases and "loader phases" note, and later calls are timed step by step
    against the C++ report and the job thread's own times."""
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "tp_phases.py"),
         "--ckpt", llama_dir, "--n", "2", "--r", "1", "--device", "cpu",
         "--calls", "2", "--prepared", "--wait", "0"],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "prepared 0 s ahead call 0 (load_checkpoint)" in out, out
    assert "call 0: loader phases: resolving the request" in out, out
    assert "prepared 0 s ahead call 1: wall" in out, out
    assert "C++ report: seconds" in out and "tp_requests" in out, out
    # Job.times: the job's thread began after the start call, and its load
    # returned before the wait woke (both non-negative).
    began = float(out.split("job thread began ")[1].split(" ms")[0])
    woke = float(out.split("load returned ")[1].split(" ms")[0])
    assert 0 <= began < 1000 and 0 <= woke < 1000, out


def test_a_bad_option_stops_the_bench_before_any_rank(llama_dir, tmp_path):
    for option, said in (("staging_bytes=1GiB", "unexpected keyword "
                          "argument 'staging_bytes'"),
                         ("staging", "NAME=VALUE"),
                         ("staging=lots", "staging")):
        out = tmp_path / "tp.json"
        proc = subprocess.run(
            [sys.executable, os.path.join(ROOT, "bench", "tp_bench.py"),
             "--ckpt", llama_dir, "--device", "cpu", "--json", str(out),
             "--work", str(tmp_path / "work"), "--sizes", "2",
             "--option", option],
            capture_output=True, text=True, timeout=120)
        assert proc.returncode != 0, option
        assert said in proc.stderr, (option, proc.stderr)
        assert "ceiling" not in proc.stdout, proc.stdout
        assert not out.exists()
