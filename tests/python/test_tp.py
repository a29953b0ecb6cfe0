"""Tensor-parallel loading (docs/tensor-parallel.md): slice mode in this
process, group mode over gloo with 1, 2, 3, 4 and 8 ranks as separate
processes (tp_worker.py), each rank bit-exact against torch.tensor_split of
safetensors' full tensors; bytes read per rank; bad input and disagreeing
or missing ranks."""

import json
import os
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file as st_load
from safetensors.torch import save_file

import weightlift
from weightlift import _tp

from conftest import write_sharded

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
WORKER = os.path.join(HERE, "tp_worker.py")

HIDDEN, INTER, VOCAB, KV, LAYERS = 64, 172, 500, 32, 4


def _llama_tensors(seed=0):
    """Llama-shaped (uneven sizes on purpose: 172, 500, 13, 3x5x7) in bf16,
    plus f32 / i64 / 0-d / empty / tiny-dim-0 extras."""
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape, dtype=torch.bfloat16):
        return torch.randn(*shape, generator=g).to(dtype)

    t = {"model.embed_tokens.weight": rnd(VOCAB, HIDDEN)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        t[p + "self_attn.q_proj.weight"] = rnd(HIDDEN, HIDDEN)
        t[p + "self_attn.q_proj.bias"] = rnd(HIDDEN)
        t[p + "self_attn.k_proj.weight"] = rnd(KV, HIDDEN)
        t[p + "self_attn.v_proj.weight"] = rnd(KV, HIDDEN)
        t[p + "self_attn.o_proj.weight"] = rnd(HIDDEN, HIDDEN)
        t[p + "self_attn.o_proj.bias"] = rnd(HIDDEN)
        t[p + "mlp.gate_proj.weight"] = rnd(INTER, HIDDEN)
        t[p + "mlp.up_proj.weight"] = rnd(INTER, HIDDEN)
        t[p + "mlp.down_proj.weight"] = rnd(HIDDEN, INTER)
        t[p + "input_layernorm.weight"] = rnd(HIDDEN, dtype=torch.float32)
    t["model.norm.weight"] = rnd(HIDDEN, dtype=torch.float32)
    t["lm_head.weight"] = rnd(VOCAB, HIDDEN)
    t["extra.odd3d"] = rnd(3, 5, 13, dtype=torch.float32)
    t["extra.ids.bias"] = torch.arange(7, dtype=torch.int64)
    t["extra.scalar"] = torch.tensor(3.5)
    t["extra.empty.bias"] = torch.zeros(0)
    t["extra.two_rows.bias"] = rnd(2)
    return t


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    """Two shard files and an index, as Hugging Face writes them."""
    d = tmp_path_factory.mktemp("tp_ckpt")
    tensors = _llama_tensors()
    names = list(tensors)
    half = len(names) // 2
    return write_sharded(d, [{n: tensors[n] for n in part}
                             for part in (names[:half], names[half:])])


def _file_bytes(path):
    return sum(os.path.getsize(os.path.join(path, f))
               for f in os.listdir(path) if f.endswith(".safetensors"))


def _full(path):
    out = {}
    for f in sorted(os.listdir(path)):
        if f.endswith(".safetensors"):
            out.update(st_load(os.path.join(path, f)))
    return out


# ---- slice mode (this process) -------------------------------------------

def stated_overhead(report):
    """The bytes the loader's report says it read beyond the selected ones
    for slices ("read A bytes for B selected": a covering range read where
    rows are short), or 0 where parts are read run by run."""
    import re
    for note in report.notes:
        m = re.search(r"read (\d+) bytes for (\d+) selected", note)
        if m:
            return int(m.group(1)) - int(m.group(2))
    return 0


@pytest.mark.parametrize("n", [1, 2, 3, 4, 8])
def test_slice_mode_is_tensor_split_bit_for_bit(ckpt, n):
    from tp_reference import TEST_PLAN, split_reference
    full = _full(ckpt)
    for r in range(n):
        got = weightlift.load_checkpoint(ckpt, tp_rank=r, tp_size=n,
                                         tp_plan=TEST_PLAN)
        want = split_reference(full, TEST_PLAN, r, n)
        assert list(got) == list(want.keys()) or set(got) == set(want)
        for name, w in want.items():
            g = got[name]
            assert g.dtype == w.dtype and g.shape == w.shape, name
            assert torch.equal(g, w), name
        # Bytes read: this rank's share of the split tensors plus the
        # replicated ones, plus the granularity overhead the report states.
        share = sum(w.numel() * w.element_size() for w in want.values())
        assert got.report.bytes == share
        note = [x for x in got.report.notes if x.startswith("tp: rank")]
        assert note, got.report.notes
        overhead = got.report.bytes_read - share
        assert 0 <= overhead <= stated_overhead(got.report) + 4096 * 4, (
            got.report.bytes_read, share, got.report.notes)
        assert any(f"for {share} delivered ({overhead:+d} bytes" in x
                   for x in got.report.notes), got.report.notes
        # The split tensors came as slices, counted (report.counts) and
        # said once.
        if n > 1:
            assert got.report.counts["slices"] > 0, got.report.counts
            assert sum(x.startswith("slices: ") for x in got.report.notes) \
                == 1, got.report.notes


def _check_parts(got, want):
    assert list(got) == list(want), (list(got), list(want))
    for name, w in want.items():
        g = got[name]
        assert g.dtype == w.dtype and g.shape == w.shape, name
        assert torch.equal(g.cpu(), w), name


@pytest.mark.parametrize("n", [1, 2, 3, 8])
def test_slice_mode_into_one_block_is_tensor_split(ckpt, n):
    """The CUDA path of slice mode (parts laid out by tp_requests, landing
    through Loader::LoadSlicesInto in one block of torch's, views made
    while the loader runs), run here on host memory: bit-exact parts, every
    non-empty one a view of the one block, the report's bytes the share.
    The first rank's call has no loader pooled (made beside the open)."""
    from tp_reference import TEST_PLAN, split_reference
    full = _full(ckpt)
    weightlift.release_cached_loaders()
    for r in range(n):
        req = _tp.take_tp(dict(tp_rank=r, tp_size=n, tp_plan=TEST_PLAN), ckpt)
        items, report = _tp._load_sliced_into_block(ckpt, "cpu", req, {},
                                                    False)
        got = dict(items)
        want = split_reference(full, TEST_PLAN, r, n)
        _check_parts(got, want)
        blocks = {getattr(t, "untyped_storage", t.storage)().data_ptr()
                  for t in got.values() if t.numel()}
        assert len(blocks) == 1, blocks
        share = sum(w.numel() * w.element_size() for w in want.values())
        assert report.bytes == share and report.tensors == len(want)
        assert any("tensor views" in x for x in report.notes), report.notes


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("n", [1, 2, 3, 8])
def test_slice_mode_on_cuda_is_tensor_split_in_torchs_memory(ckpt, n):
    """Slice mode onto cuda:0: bit-exact parts, in memory torch's caching
    allocator counts (one block per call), for every rank; the first call
    with no loader pooled."""
    from tp_reference import TEST_PLAN, split_reference
    full = _full(ckpt)
    weightlift.release_cached_loaders()
    for r in range(n):
        before = torch.cuda.memory_allocated(0)
        got = weightlift.load_checkpoint(ckpt, device="cuda:0", tp_rank=r,
                                         tp_size=n, tp_plan=TEST_PLAN)
        want = split_reference(full, TEST_PLAN, r, n)
        _check_parts(got, want)
        share = sum(w.numel() * w.element_size() for w in want.values())
        assert got.report.bytes == share
        assert torch.cuda.memory_allocated(0) - before >= share
        del got


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("n", [2, 8])
def test_a_prepared_rank_on_cuda_copies_straight_from_the_page_cache(ckpt, n):
    """prepare(cuda:0, checkpoint=, tp_*, host_register="on") registers the
    rank's pages ahead (forced: auto leaves a row-parallel part, whose pages
    are more than 1.5 times its bytes, to staging); its load copies each file straight from them
    (host-register, bytes read = bytes delivered), bit-exact; the next load
    stages."""
    import time
    from tp_reference import TEST_PLAN, split_reference
    full = _full(ckpt)
    for r in (0, n - 1):
        kw = dict(tp_rank=r, tp_size=n, tp_plan=TEST_PLAN)
        weightlift.prepare("cuda:0", checkpoint=ckpt, host_register="on",
                           **kw)
        time.sleep(1.0)  # a few MB: registered in milliseconds
        got = weightlift.load_checkpoint(ckpt, device="cuda:0", **kw)
        _check_parts(got, split_reference(full, TEST_PLAN, r, n))
        files = got.report.files
        assert files and all(f.path_taken == "host-register" for f in files), \
            [(f.path_taken, f.reason) for f in files]
        assert got.report.bytes_read == got.report.bytes
        assert any(x.startswith("prepare registered") for x in
                   got.report.notes), got.report.notes
        again = weightlift.load_checkpoint(ckpt, device="cuda:0", **kw)
        _check_parts(again, split_reference(full, TEST_PLAN, r, n))
        assert all(f.path_taken.startswith("pinned-staging")
                   for f in again.report.files)
    weightlift.release_cached_loaders()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_a_prepared_rank_of_8_stages_its_row_parts_beside_registered_pages(
        ckpt):
    """prepare(cuda:0, checkpoint=, tp_*) with host_register auto at n = 8
    registers the rank's column-parallel and replicated parts and leaves
    its row-parallel ones (whose pages are 8x their bytes) to staging; the
    load copies the first straight from the page cache and stages the
    rest in the same run, bit-exact, and its report says which and how
    much."""
    import time
    from tp_reference import TEST_PLAN, split_reference
    full = _full(ckpt)
    kw = dict(tp_rank=3, tp_size=8, tp_plan=TEST_PLAN)
    weightlift.prepare("cuda:0", checkpoint=ckpt, **kw)
    time.sleep(1.0)
    got = weightlift.load_checkpoint(ckpt, device="cuda:0", **kw)
    _check_parts(got, split_reference(full, TEST_PLAN, 3, 8))
    paths = [f.path_taken for f in got.report.files]
    assert any(p.startswith("host-register+pinned-staging") for p in paths), \
        [(f.path_taken, f.reason) for f in got.report.files]
    note = [x for x in got.report.notes if x.startswith("prepare registered")]
    assert note and "left to staging" in note[0], got.report.notes
    weightlift.release_cached_loaders()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_a_prepared_rank_on_cuda_loads_into_the_block_prepare_took(ckpt):
    """prepare(cuda:0, checkpoint=, tp_*) takes the rank's device block
    ahead (torch counts it from then on); a load of another rank leaves it;
    the rank's own load lands in it, bit-exact, and says so; the block is
    handed over once."""
    from tp_reference import TEST_PLAN, split_reference
    full = _full(ckpt)
    kw = dict(tp_rank=1, tp_size=4, tp_plan=TEST_PLAN)
    torch.cuda.synchronize(0)
    before = torch.cuda.memory_allocated(0)
    weightlift.prepare("cuda:0", checkpoint=ckpt, **kw)
    block = weightlift._core._prepared_tp[2]
    assert block is not None and block.device == torch.device("cuda:0")
    assert torch.cuda.memory_allocated(0) - before >= block.numel()
    other = weightlift.load_checkpoint(ckpt, device="cuda:0", tp_rank=2,
                                       tp_size=4, tp_plan=TEST_PLAN)
    _check_parts(other, split_reference(full, TEST_PLAN, 2, 4))
    assert weightlift._core._prepared_tp[2] is block  # left for rank 1's load
    start, end = block.data_ptr(), block.data_ptr() + block.numel()
    del block
    got = weightlift.load_checkpoint(ckpt, device="cuda:0", **kw)
    _check_parts(got, split_reference(full, TEST_PLAN, 1, 4))
    assert all(start <= t.data_ptr() < end for t in got.values()
               if t.numel()), "the rank's tensors are not in prepare's block"
    assert weightlift._core._prepared_tp[2] is None
    assert any("device memory (the block prepare took)" in n
               for n in got.report.notes), got.report.notes
    again = weightlift.load_checkpoint(ckpt, device="cuda:0", **kw)
    _check_parts(again, split_reference(full, TEST_PLAN, 1, 4))
    assert not any(start <= t.data_ptr() < end for t in again.values()
                   if t.numel())
    weightlift.release_cached_loaders()


def test_slice_mode_llama_rank_reads_under_0_4_of_the_file(ckpt):
    from tp_reference import TEST_PLAN
    total = _file_bytes(ckpt)
    for r in range(4):
        got = weightlift.load_checkpoint(ckpt, tp_rank=r, tp_size=4,
                                         tp_plan=TEST_PLAN)
        assert got.report.bytes_read < 0.4 * total, (
            f"rank {r} read {got.report.bytes_read} of {total} bytes: a TP "
            f"rank must read about its share (if LoadSlices placed the "
            f"row parts as covering reads, the notes say so: "
            f"{got.report.notes})")


def test_entry_points_take_the_same_keywords(ckpt, tmp_path):
    from tp_reference import TEST_PLAN, split_reference
    want = split_reference(_full(ckpt), TEST_PLAN, 1, 3)
    kw = dict(tp_rank=1, tp_size=3, tp_plan=TEST_PLAN)
    from weightlift.torch import load_file
    got = load_file(ckpt, **kw)
    assert set(got) == set(want)
    assert all(torch.equal(got[n], want[n]) for n in want)
    it = weightlift.iter_tensors(ckpt, **kw)
    got = dict(it)
    assert it.report.bytes_read > 0
    assert all(torch.equal(got[n], want[n]) for n in want)
    targets = {n: torch.zeros_like(w) for n, w in want.items()}
    report = weightlift.load_into(targets, ckpt, **kw)
    assert all(torch.equal(targets[n], want[n]) for n in want)
    assert report.missing_keys == [] and report.unexpected_keys == []
    # tp_plan as a JSON file (what the CLI takes).
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(TEST_PLAN))
    got = weightlift.load_checkpoint(ckpt, tp_rank=1, tp_size=3,
                                     tp_plan=str(plan_file))
    assert all(torch.equal(got[n], want[n]) for n in want)


def test_load_checkpoint_knows_every_tp_keyword():
    # load_checkpoint imports _tp only when one of these is given; a keyword
    # added to _tp but not there would be passed on as an unknown option.
    from weightlift import _tp
    assert weightlift._TP_KEYWORDS == _tp.TP_KEYWORDS


def test_load_into_tp_strict_names_missing_and_unexpected(ckpt):
    from tp_reference import TEST_PLAN, split_reference
    want = split_reference(_full(ckpt), TEST_PLAN, 0, 2)
    targets = {n: torch.zeros_like(w) for n, w in want.items()}
    dropped = sorted(targets)[0]
    del targets[dropped]
    targets["not.in.ckpt"] = torch.zeros(3)
    with pytest.raises(weightlift.InvalidArgumentError) as e:
        weightlift.load_into(targets, ckpt, tp_rank=0, tp_size=2,
                             tp_plan=TEST_PLAN, strict=True)
    msg = str(e.value)
    assert "(strict)" in msg and "not.in.ckpt" in msg and dropped in msg
    assert "missing from the checkpoint" in msg and "not in the target" in msg


def test_iter_tensors_yields_parts_as_batches_land(ckpt, monkeypatch):
    """iter_tensors in slice mode hands out the first batch's parts while
    later batches are not read yet, in checkpoint order, bit-exact; a
    consumer that stops early leaves nothing running."""
    from tp_reference import TEST_PLAN, split_reference
    want = split_reference(_full(ckpt), TEST_PLAN, 2, 4)
    monkeypatch.setattr(_tp, "ITER_BATCH_BYTES", 8 << 10)
    kw = dict(tp_rank=2, tp_size=4, tp_plan=TEST_PLAN)
    it = weightlift.iter_tensors(ckpt, **kw)
    first = next(it)
    assert it.batches > 3
    assert it.batches_loaded == 1, "the first part waited for later reads"
    assert it.report is None
    got = dict([first] + list(it))
    assert it.batches_loaded == it.batches
    order = [t[0] for t in weightlift._core.open_checkpoint(ckpt).tensors()]
    assert list(got) == order
    assert set(got) == set(want)
    assert all(torch.equal(got[n], want[n]) for n in want)
    share = sum(w.numel() * w.element_size() for w in want.values())
    assert it.report.bytes == share and it.report.bytes_read >= share
    # Stopped after one tensor: the load in flight is waited for, and the
    # next load (reusing the pooled loader) is fine.
    it = weightlift.iter_tensors(ckpt, **kw)
    next(it)
    it.close()
    assert torch.equal(dict(weightlift.iter_tensors(ckpt, **kw))[order[0]],
                       want[order[0]])


def test_bad_tp_arguments_are_clear_errors(ckpt):
    with pytest.raises(weightlift.InvalidArgumentError,
                       match="tp_rank 4 with tp_size 4"):
        weightlift.load_checkpoint(ckpt, tp_rank=4, tp_size=4)
    with pytest.raises(weightlift.InvalidArgumentError,
                       match="tp_size must be at least 1, got 0"):
        weightlift.load_checkpoint(ckpt, tp_rank=0, tp_size=0)
    with pytest.raises(weightlift.InvalidArgumentError,
                       match="unknown word 'columnwise'.*'\\*.q_proj.weight'"):
        weightlift.load_checkpoint(ckpt, tp_rank=0, tp_size=2,
                                   tp_plan={"*.q_proj.weight": "columnwise"})
    with pytest.raises(weightlift.InvalidArgumentError, match="tp_rank is "
                       "required"):
        weightlift.load_checkpoint(ckpt, tp_size=2)
    with pytest.raises(TypeError, match="tp_rank: expected an int"):
        weightlift.load_checkpoint(ckpt, tp_rank="0", tp_size=2)
    with pytest.raises(weightlift.NotFoundError, match="config.json"):
        weightlift.load_checkpoint(ckpt, tp_rank=0, tp_size=2,
                                   tp_plan="auto")


_BAD_GROUP_TIMEOUTS = r"""
import datetime, os, sys, tempfile
import torch.distributed as dist
import weightlift
# A file store: a free port found by binding and closing can be taken by
# another process before the group binds it (seen under a parallel run).
store = os.path.join(tempfile.mkdtemp(), "store")
dist.init_process_group("gloo", init_method=f"file://{store}",
                        rank=0, world_size=1,
                        timeout=datetime.timedelta(seconds=30))
calls = {"load_checkpoint": lambda t: weightlift.load_checkpoint(
             sys.argv[1], process_group=dist.group.WORLD, group_timeout=t),
         "stream_tensors": lambda t: list(weightlift.stream_tensors(
             sys.argv[1], process_group=dist.group.WORLD, group_timeout=t))}
for name, call in calls.items():
    for bad in (float("inf"), float("nan"), 1e15, 0, -1):
        try:
            call(bad)
        except TypeError as e:
            assert "group_timeout" in str(e), e
        else:
            raise SystemExit(f"{name} accepted group_timeout={bad!r}")
    call(30)  # a good one still loads
# Torn down here, not at interpreter shutdown, where gloo's workers were
# seen to abort now and then ("terminate called without an active
# exception"; see test_stream.py), failing the child after its work.
dist.destroy_process_group()
print("ok")
"""


def test_bad_group_timeouts_are_refused_before_any_collective(ckpt):
    """inf, nan and 1e15 s failed inside the first collective (an
    OverflowError as a WeightliftIOError); stream_tensors took 0 and
    negative values. Both refuse them first, naming group_timeout (a
    one-process gloo group, in a child so the group does not outlive the
    test)."""
    proc = subprocess.run([sys.executable, "-c", _BAD_GROUP_TIMEOUTS, ckpt],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                              sys.path)))
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", \
        proc.stdout + proc.stderr[-3000:]


def test_first_call_opens_the_checkpoint_beside_the_loader(ckpt, tmp_path):
    """With no loader made yet, slice mode opens the checkpoint on a thread
    while the loader is made: the parts are the same, and an open that
    fails raises its own error on the caller (a missing path, a bad
    shard)."""
    from tp_reference import TEST_PLAN as LLAMA_PLAN
    weightlift.release_cached_loaders()
    got = weightlift.load_checkpoint(ckpt, tp_rank=1, tp_size=2,
                                     tp_plan=LLAMA_PLAN)
    weightlift.release_cached_loaders()
    missing = str(tmp_path / "nope")
    with pytest.raises(weightlift.NotFoundError, match="nope"):
        weightlift.load_checkpoint(missing, tp_rank=0, tp_size=2)
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00{}")
    weightlift.release_cached_loaders()
    with pytest.raises(weightlift.SafetensorError):
        weightlift.load_checkpoint(str(bad), tp_rank=0, tp_size=2)
    again = weightlift.load_checkpoint(ckpt, tp_rank=1, tp_size=2,
                                       tp_plan=LLAMA_PLAN)  # pooled loader
    assert got.keys() == again.keys()
    for k in got:
        assert torch.equal(got[k], again[k]), k


def test_unmatched_pattern_is_a_warning_in_the_report(ckpt):
    got = weightlift.load_checkpoint(
        ckpt, tp_rank=0, tp_size=2,
        tp_plan={"*.q_proj.weight": "colwise", "*.nothing_like_this.*":
                 "rowwise"})
    warn = [n for n in got.report.notes if "warning" in n]
    assert any("'*.nothing_like_this.*' (rowwise) matches no tensor" in n
               for n in warn), got.report.notes
    assert got["model.layers.0.self_attn.q_proj.weight"].shape[0] == HIDDEN // 2


def test_no_plan_gives_every_rank_whole_tensors_and_says_so(ckpt, tmp_path):
    """tp_size without a plan splits nothing (an unmatched name is
    replicated): each rank loads the whole checkpoint, and the report and
    the command line warn that this is what happened."""
    got = weightlift.load_checkpoint(ckpt, tp_rank=1, tp_size=2)
    full = _full(ckpt)
    assert got.keys() == full.keys()
    for k in full:
        assert torch.equal(got[k], full[k]), k
    total = sum(t.numel() * t.element_size() for t in full.values())
    want = (f"tp: warning: tp_plan is empty: every tensor is replicated, so "
            f"each of the 2 ranks loads the whole checkpoint ({total} bytes)")
    assert any(n.startswith(want) for n in got.report.notes), \
        got.report.notes
    proc = subprocess.run([_cli(), "load", ckpt, "--tp-size", "2",
                           "--tp-rank", "0", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["bytes"] == total
    assert f"warning: {want[len('tp: warning: '):]}" in out["tp"], out["tp"]


def test_auto_plan_maps_transformers_words():
    notes = []
    plan = _tp.plan_from_transformers(
        {"layers.*.self_attn.q_proj": "colwise",
         "layers.*.self_attn.o_proj": "rowwise",
         "layers.*.mlp.gate_proj": "local_colwise",
         "norm": "sequence_parallel"},
        {"lm_head": "colwise_rep"}, "model", notes)
    assert plan[0] == ("lm_head.*", "colwise")
    assert ("model.layers.*.self_attn.q_proj.*", "colwise") in plan
    assert ("model.layers.*.self_attn.o_proj.*", "rowwise") in plan
    assert ("layers.*.mlp.gate_proj.*", "colwise") in plan
    assert ("model.norm.*", "replicate") in plan
    assert any("'sequence_parallel'" in n for n in notes)


# ---- group mode (gloo, separate processes) -------------------------------

def _run_groups(ckpt, worlds, scenario, out_dir, timeout=300, env=None):
    """Runs tp_worker.py: for each world size n, n ranks (forked processes)
    in a gloo group. Returns {n: [rank results]}."""
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
               **(env or {}))
    proc = subprocess.run(
        [sys.executable, WORKER, ",".join(map(str, worlds)), ckpt, scenario,
         str(out_dir)], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, timeout=timeout)
    log = proc.stdout.decode(errors="replace")
    results = {}
    for n in worlds:
        results[n] = []
        for r in range(n):
            out = out_dir / f"n{n}" / f"rank{r}.json"
            assert out.exists(), f"n={n} rank {r} wrote nothing:\n{log}"
            results[n].append(json.loads(out.read_text()))
    return results


WORLDS = (1, 2, 3, 4, 8)


@pytest.fixture(scope="module")
def group_results(ckpt, tmp_path_factory):
    return _run_groups(ckpt, WORLDS, "modes",
                       tmp_path_factory.mktemp("tp_groups"))


@pytest.mark.parametrize("n", WORLDS)
def test_group_modes_every_rank_bit_exact(ckpt, group_results, n):
    results = group_results[n]
    total = _file_bytes(ckpt)
    read_full = []
    for r in results:
        assert r["ok"], r.get("traceback")
        for key in ("full_mismatch", "tp_group_mismatch", "slice_mismatch",
                    "iter_mismatch", "load_file_mismatch",
                    "load_into_mismatch"):
            assert r[key] == [], (r["rank"], key, r[key][:5])
        read_full.append(r["full_bytes_read"])
    # Group mode reads every byte once across the group, about 1/n each.
    tensor_bytes = sum(w.numel() * w.element_size()
                       for w in _full(ckpt).values())
    assert sum(read_full) >= tensor_bytes
    assert sum(read_full) <= tensor_bytes + n * 4096 * 8
    for b in read_full:
        assert b <= tensor_bytes / n * 1.35 + 64 * 1024, (read_full, n)
    if n == 4:
        for r in results:
            assert r["full_bytes_read"] < 0.4 * total
            assert r["tp_group_bytes_read"] < 0.4 * total
            assert r["slice_bytes_read"] < 0.4 * total


def test_disagreeing_failing_and_missing_ranks(ckpt, tmp_path):
    """One 2-rank group runs failing loads in turn: ranks that disagree on
    the plan, a rank with bad arguments, a rank whose checkpoint is missing,
    and a rank that never joins (last: it leaves a collective pending)."""
    r0, r1 = _run_groups(ckpt, (2,), "failures", tmp_path)[2]
    for r in (r0, r1):
        assert r["ok"], r.get("traceback")
        # Each failed load let go of its group (freed at the caller's
        # destroy_process_group, not at the next garbage collection).
        assert r["group_freed"] and all(r["group_freed"].values()), r
        d = r["disagree"]
        assert d["type"] == "InvalidArgumentError", d
        assert "ranks disagree on the plan or the checkpoint" in d["error"]
        assert "ranks [0]" in d["error"] and "ranks [1]" in d["error"]
        for key in ("other_weights", "other_weights_iter"):
            d = r[key]
            assert d is not None, (key, "other weights were loaded")
            assert d["type"] == "InvalidArgumentError", (key, d)
            assert "ranks disagree on the plan or the checkpoint" in \
                d["error"], (key, d)
            assert "a sample of the tensors' bytes" in d["error"], (key, d)
    assert "tp_rank=5" in r1["bad_rank"]["error"]
    assert "rank 1 could not start the load" in r0["bad_rank"]["error"]
    assert "tp_rank=5" in r0["bad_rank"]["error"]
    assert r1["missing_on_one"]["type"] == "NotFoundError", r1
    assert "rank 1 could not start the load: NotFound: " in \
        r0["missing_on_one"]["error"], r0["missing_on_one"]
    assert "threads" in r1["bad_option"]["error"], r1["bad_option"]
    assert "rank 1 could not start the load" in r0["bad_option"]["error"]
    assert "threads" in r0["bad_option"]["error"], r0["bad_option"]
    assert r0["bad_option"]["seconds"] < 15, r0["bad_option"]
    for key, own in (("missing_plan", "missing_plan.json"),
                     ("zero_copy", "zero_copy")):
        assert own in r1[key]["error"], r1[key]
        assert "rank 1 could not start the load" in r0[key]["error"], r0[key]
        assert own in r0[key]["error"], r0[key]
        assert r0[key]["seconds"] < 15, r0[key]
    assert "a gloo group delivers cpu tensors, not cuda:0" in \
        r1["wrong_device"]["error"]
    assert "rank 1 could not start the load" in r0["wrong_device"]["error"]
    t = r0["timeout"]
    assert "GroupTimeoutError" in t["mro"] and "TimeoutError" in t["mro"]
    assert "did not complete within 2 s" in t["error"]
    assert "rank 0 of 2" in t["error"] and "all_gather" in t["error"]
    assert t["seconds"] < 30
    # The timed-out collective was still running: its memory was kept, and
    # rank 1, joining late, wrote its record there. Rank 1's late load then
    # fails at the next exchange (rank 0 does not go on: a timeout, or a
    # peer gone once rank 0 exits).
    assert r0["kept_works"] >= 1
    assert r0["late_record_landed"], r0
    assert r0["broken_reaped"], r0
    late = r1["late"]
    assert late is not None and "WeightliftIOError" in late["mro"], late
    assert "read its bytes of batch 0" in late["error"], late


def test_a_failed_collective_of_a_batch_names_its_tensor(ckpt, tmp_path):
    """A batch's collectives go to the transport as one list
    (run_all); when its collective 1 fails, the error names the tensor the
    group plan puts there, not the batch's first."""
    r0, r1 = _run_groups(ckpt, (2,), "fails_second", tmp_path)[2]
    for r in (r0, r1):
        assert r["ok"], r.get("traceback")
    want = r0["expected"]
    assert want is not None
    got = r0["fails_second"]
    assert got is not None and "injected: collective 1" in got["error"], got
    assert f"group load: tensor '{want}'" in got["error"], (want, got)
    # Rank 1 ran the same collectives: it ends either way, in time.
    assert r1["fails_second"] is None or \
        r1["fails_second"]["seconds"] < 3 + 10, r1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_group_mode_over_nccl_on_each_rank_gpu(ckpt, tmp_path):
    """Group mode through the C++ load with torch's NCCL group as its
    transport: one rank per GPU (one GPU here: one rank), device memory
    handed to NCCL, bit-exact against safetensors."""
    n = min(torch.cuda.device_count(), 8)
    results = _run_groups(ckpt, (n,), "nccl", tmp_path)[n]
    for r in results:
        assert r["ok"], r.get("traceback")
        assert r["devices"] == [f"cuda:{r['rank']}"]
        for key in ("full_mismatch", "tp_group_mismatch", "iter_mismatch"):
            assert r[key] == [], (r["rank"], key, r[key][:5])


def test_a_rank_that_dies_mid_load_fails_the_others_in_time(ckpt, tmp_path):
    """Three real processes; rank 2 exits at its first broadcast, in the
    middle of a group load. Ranks 0 and 1 each get a WeightliftIOError (or
    GroupTimeoutError) naming their rank and the collective, within the
    10 s group_timeout, not a hang."""
    results = _run_groups(ckpt, (3,), "dies", tmp_path)[3]
    assert results[2].get("died"), results[2]
    for r in results[:2]:
        assert r["ok"], r.get("traceback")
        d = r["dies"]
        assert d is not None, "the load succeeded without rank 2"
        assert "WeightliftIOError" in d["mro"], d
        assert f"rank {r['rank']} of 3" in d["error"], d
        assert "broadcast" in d["error"] or "all_gather" in d["error"], d
        # The batch's collectives run as one list (run_all); the one that
        # failed is still named, with its tensor.
        assert "group load: tensor '" in d["error"], d
        assert d["seconds"] < 10 + 5, d


def test_group_mode_memory_stays_bounded(tmp_path):
    """Peak resident memory of each of 4 gloo ranks, on a 136 MiB checkpoint
    with the group's batches cut to 8 MiB (17x the bound): with tp_plan a
    rank's memory rises by its result (its quarter of the split tensors
    plus the replicated ones) plus at most a few batches, far below the
    checkpoint; without, by the full result plus the same."""
    d = tmp_path / "big"
    d.mkdir()
    g = torch.Generator().manual_seed(3)
    tensors = {f"big.{i}.weight": torch.randint(
        -30000, 30000, (2048, 2048), generator=g, dtype=torch.int16)
        for i in range(16)}  # 16 x 8 MiB, colwise
    tensors.update({f"rep.{i}": torch.randint(
        -30000, 30000, (1024, 1024), generator=g, dtype=torch.int16)
        for i in range(4)})  # 4 x 2 MiB, replicated
    save_file(tensors, str(d / "model.safetensors"))
    del tensors
    ckpt_bytes = os.path.getsize(d / "model.safetensors")
    batch = 8 << 20
    results = _run_groups(str(d), (4,), "memory", tmp_path / "out",
                          env={"TP_BATCH_BYTES": str(batch)})[4]
    slack = 2 * batch + (24 << 20)  # the batch in flight, torch and gloo
    for r in results:
        assert r["ok"], r.get("traceback")
        assert r["tp_mismatch"] == [] and r["full_mismatch"] == []
        assert r["tp_bytes"] == (16 * 8 // 4 + 4 * 2) * 2**20
        assert r["tp_growth"] <= r["tp_bytes"] + slack, r
        assert r["tp_growth"] < 0.6 * ckpt_bytes, r
        assert r["tp_bytes_read"] < 0.4 * ckpt_bytes, r
        assert r["full_growth"] <= r["full_bytes"] + slack, r


# ---- the command line ------------------------------------------------------

def _cli():
    from weightlift import _native
    build = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(_native.__file__))))
    path = os.path.join(build, "weightlift")
    if not os.path.exists(path):
        pytest.skip(f"the weightlift command is not built beside this "
                    f"package ({path})")
    return path


def test_cli_loads_one_rank_and_reports_its_bytes(ckpt, tmp_path):
    from tp_reference import TEST_PLAN, split_reference
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(TEST_PLAN))
    full = _full(ckpt)
    for r in range(3):
        proc = subprocess.run(
            [_cli(), "load", ckpt, "--backend", "pread", "--tp-size", "3",
             "--tp-rank", str(r), "--tp-plan", str(plan_file), "--json"],
            capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
        want = split_reference(full, TEST_PLAN, r, 3)
        share = sum(w.numel() * w.element_size() for w in want.values())
        assert out["tp_rank"] == r and out["tp_size"] == 3
        assert out["bytes"] == share
        assert share <= out["bytes_read"] <= share + 4096 * 8
    proc = subprocess.run([_cli(), "load", ckpt, "--tp-size", "2",
                           "--tp-rank", "2"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "got tp_rank 2 with tp_size 2" in proc.stderr


def test_cli_flag_errors_say_what_is_wrong(ckpt, tmp_path):
    """Values given but out of range are range errors (not "required"); a
    plan with a pattern twice (first match wins: ambiguous) and a plan that
    never ends (/dev/zero) are refused, each in one line."""
    def err(*args):
        proc = subprocess.run([_cli(), "load", ckpt, *args],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stderr.count("\n") == 1, proc.stderr
        return proc.stderr
    assert "tp_size must be at least 1, got 0" in err("--tp-size", "0",
                                                      "--tp-rank", "0")
    assert "got tp_rank -1 with tp_size 2" in err("--tp-size", "2",
                                                  "--tp-rank", "-1")
    assert "--tp-rank is required" in err("--tp-size", "2")
    assert "--tp-size is required" in err("--tp-rank", "0")
    dup = tmp_path / "dup.json"
    dup.write_text('{"*": "colwise", "*": "replicate"}')
    assert "pattern '*' appears twice" in err("--tp-size", "2", "--tp-rank",
                                              "0", "--tp-plan", str(dup))
    assert "longer than 1048576 bytes" in err(
        "--tp-size", "2", "--tp-rank", "0", "--tp-plan", "/dev/zero")


def test_auto_plan_from_config_json(ckpt, tmp_path):
    """tp_plan="auto" from the model's config.json (transformers comes with
    `make deps`: python/requirements-dev.txt)."""
    import transformers
    import shutil
    d = tmp_path / "model"
    shutil.copytree(ckpt, d)
    (d / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": HIDDEN, "intermediate_size": INTER,
        "num_attention_heads": 4, "num_key_value_heads": 2,
        "num_hidden_layers": LAYERS, "vocab_size": VOCAB}))
    got = weightlift.load_checkpoint(str(d), tp_rank=1, tp_size=2,
                                     tp_plan="auto")
    full = _full(ckpt)
    q = "model.layers.0.self_attn.q_proj.weight"
    assert torch.equal(got[q], torch.tensor_split(full[q], 2, 0)[1])
    assert any(f"transformers {transformers.__version__}" in n
               for n in got.report.notes), got.report.notes


def test_positioned_part_reads_match_the_loader(ckpt):
    """_tp.read_part_into (weightlift._stream's path where a native module
    lacks LoadSlices) gives the same bytes as the loader's slice reads."""
    from tp_reference import TEST_PLAN
    c = weightlift._core.open_checkpoint(ckpt)
    parts, _ = _tp.shards(c.tensors(), 1, 3, list(TEST_PLAN.items()))
    got = weightlift.load_checkpoint(ckpt, tp_rank=1, tp_size=3,
                                     tp_plan=TEST_PLAN)
    checked = 0
    for s in parts:
        if not s.split or not s.bytes:
            continue
        buf = torch.empty(s.bytes, dtype=torch.uint8)
        assert _tp.read_part_into(c, s, buf) == s.bytes
        want = got[s.name].contiguous().view(torch.uint8).reshape(-1)
        assert torch.equal(buf, want), s.name
        checked += 1
    assert checked > 10


def test_plan_patterns_mean_what_python_fnmatch_means(tmp_path):
    """The shard rule (C++) reads tp_plan patterns as Python's
    fnmatch.fnmatchcase does, in whatever locale: sets with '!' and ranges,
    '^' and '\\' as plain characters, '?' as one (non-ASCII) character.
    Each tensor's part is compared with tp_reference's, which uses Python's
    fnmatch itself."""
    from tp_reference import part_bounds, word_of
    names = ["a.w", "b.w", "c.w", "x^.w", "x!.w", "x-.w", "x].w", "xé.w",
             "xée.w", "d\\e.w", "[.w", "model.layers.1.q.w", "q-z.w"]
    plans = [
        {"x[^a].w": "colwise", "*": "rowwise"},
        {"x[!a-z].w": "colwise", "?.w": "rowwise"},
        {"x?.w": "colwise", "x??.w": "rowwise"},
        {"[!]a].w": "colwise", "x[]-a].w": "rowwise"},
        {"d\\e.w": "colwise", "[.w": "rowwise", "[c-a].w": "colwise"},
        {"*.[a-q].w": "colwise", "[q-][-z].w": "rowwise"},
    ]
    t = {n: torch.arange(24, dtype=torch.float32).reshape(4, 6) + i
         for i, n in enumerate(names)}
    save_file(t, str(tmp_path / "model.safetensors"))
    path = str(tmp_path / "model.safetensors")
    for plan in plans:
        got = weightlift.load_checkpoint(path, tp_rank=1, tp_size=2,
                                         tp_plan=plan)
        for name in names:
            p = part_bounds(name, [4, 6], plan, 1, 2)
            want = t[name] if p is None else t[name].narrow(
                p[0], p[1], p[2] - p[1])
            assert torch.equal(got[name], want), (plan, name,
                                                  word_of(name, plan))
