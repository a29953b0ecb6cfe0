"""stream_tensors: file order, bounded window, errors, early close.

Checkpoints are written by the real safetensors package; the order of
reference is read from the files' own headers (sorted by data offset)."""

import json
import os
import struct

import pytest
import safetensors.torch
import torch
from conftest import needs_cuda, random_tensor, raw_bytes

import weightlift
from weightlift._stream import plan_windows


def _file_order(paths):
    """Tensor names in (file, data offset) order, from the raw headers."""
    names = []
    for p in paths:
        with open(p, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
        header.pop("__metadata__", None)
        names += sorted(header, key=lambda k: header[k]["data_offsets"][0])
    return names


@pytest.fixture
def sharded(tmp_path, gen):
    """Two shards with an index; tensors of 0 B to 64 KiB, mixed dtypes."""
    shards = [
        {"a.embed": random_tensor(torch.bfloat16, (64, 256), gen),   # 32 KiB
         "a.bias": random_tensor(torch.float32, (7,), gen),
         "a.empty": torch.zeros(0, 3),
         "a.scalar": torch.tensor(1.5, dtype=torch.float64),
         "a.w": random_tensor(torch.float16, (128, 64), gen)},
        {"b.big": random_tensor(torch.float32, (128, 128), gen),     # 64 KiB
         "b.ids": random_tensor(torch.int64, (33,), gen),
         "b.mask": random_tensor(torch.bool, (5, 5), gen),
         "b.w": random_tensor(torch.bfloat16, (48, 40), gen)},
    ]
    weight_map, paths = {}, []
    for i, tensors in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-00002.safetensors"
        path = str(tmp_path / fname)
        safetensors.torch.save_file(tensors, path)
        paths.append(path)
        weight_map.update({k: fname for k in tensors})
    with open(tmp_path / "model.safetensors.index.json", "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
    return str(tmp_path), paths


def _reference(paths):
    ref = {}
    for p in paths:
        ref.update(safetensors.torch.load_file(p))
    return ref


@pytest.mark.parametrize("window", [1 << 20, 64 << 10, 8 << 10, 512])
def test_stream_is_file_order_and_equals_safetensors(sharded, window):
    root, paths = sharded
    ref = _reference(paths)
    stream = weightlift.stream_tensors(root, window=window)
    got = list(stream)
    assert [n for n, _ in got] == _file_order(paths)
    for name, t in got:
        assert t.dtype == ref[name].dtype and t.shape == ref[name].shape
        assert torch.equal(raw_bytes(t), raw_bytes(ref[name])), name
    assert stream.report.tensors == len(ref)
    assert stream.report.bytes == sum(t.numel() * t.element_size()
                                      for t in ref.values())
    assert weightlift.last_report() is stream.report
    # One entry per file however many windows read it.
    assert sorted(os.path.basename(f.path) for f in stream.report.files) == \
        sorted(os.path.basename(p) for p in paths)
    assert all(f.path_taken != "none" for f in stream.report.files)
    assert stream.peak_bytes <= stream.bound_bytes
    if window >= 2 * 64 * 1024 + 1024:  # every tensor fits half a window
        assert stream.peak_bytes <= window
    if window <= 8 << 10:
        assert stream.windows >= 6  # really cut up, not one load


def test_windows_hold_at_most_half_unless_one_tensor_is_larger():
    infos = [(f"t{i}", "U8", (s,), "f", 0, s)
             for i, s in enumerate([100, 100, 100, 5000, 10, 10])]
    ws = plan_windows(infos, 1024)
    assert [[i[0] for i in w.infos] for w in ws] == [
        ["t0", "t1"], ["t2"], ["t3"], ["t4", "t5"]]
    for w in ws:
        assert w.nbytes <= 512 or len(w.infos) == 1


def test_peak_counts_what_the_consumer_still_holds(sharded):
    """The for loop keeps its last tensor while asking for the next: the
    stream's count includes that window, and still stays within the bound
    of two neighbouring windows."""
    root, paths = sharded
    stream = weightlift.stream_tensors(root, window=16 << 10)
    for _name, _t in stream:
        pass
    sizes = [w.nbytes for w in stream._windows]
    assert stream.bound_bytes == max(
        sizes + [a + b for a, b in zip(sizes, sizes[1:])])
    assert 0 < stream.peak_bytes <= stream.bound_bytes


def test_names_subset_keeps_file_order(sharded):
    root, paths = sharded
    want = ["b.w", "a.bias", "b.big"]
    got = [n for n, _ in weightlift.stream_tensors(root, names=want,
                                                   window=4096)]
    order = _file_order(paths)
    assert got == sorted(want, key=order.index)
    with pytest.raises(weightlift.TensorNotFoundError, match="nope"):
        weightlift.stream_tensors(root, names=["a.w", "nope"])
    # A string is not a list of names (set("a.w") would be its letters).
    with pytest.raises(TypeError, match="the string 'a.w'"):
        weightlift.stream_tensors(root, names="a.w")
    # A bad framework is the documented InvalidArgumentError (a ValueError).
    for call in (weightlift.stream_tensors, weightlift.iter_tensors):
        with pytest.raises(weightlift.InvalidArgumentError, match="'jax'"):
            call(root, framework="jax")


def test_numpy_framework(sharded):
    root, paths = sharded
    ref = _reference(paths)
    try:
        import ml_dtypes  # noqa: F401
    except ImportError:
        # numpy has no bf16 without it: refused before anything loads.
        with pytest.raises(weightlift.UnsupportedError, match="BF16"):
            weightlift.stream_tensors(root, framework="np")
    plain = [n for n, t in ref.items() if t.dtype != torch.bfloat16]
    got = dict(weightlift.stream_tensors(root, names=plain, framework="np",
                                         window=8192))
    assert set(got) == set(plain)
    for name, arr in got.items():
        assert arr.tobytes() == raw_bytes(ref[name]).numpy().tobytes()


def test_file_shrunk_mid_stream_raises_and_yields_no_bad_tensor(sharded):
    """The second shard loses its tail after the stream opened: the window
    that reads it fails with the load's error; what came before is good."""
    root, paths = sharded
    ref = _reference(paths)
    stream = weightlift.stream_tensors(root, window=4096)
    first_name, first = next(stream)
    assert torch.equal(raw_bytes(first), raw_bytes(ref[first_name]))
    os.truncate(paths[1], os.path.getsize(paths[1]) - 4096)
    seen = [first_name]
    with pytest.raises(weightlift.WeightliftError) as e:
        for name, t in stream:
            seen.append(name)
            assert torch.equal(raw_bytes(t), raw_bytes(ref[name])), name
    assert "model-00002-of-00002" in str(e.value)
    assert stream.report is None  # nothing reported as loaded
    # The stream ends there and its loader is usable again.
    assert list(stream) == []
    assert len(weightlift.load_checkpoint(paths[0])) == 5


def test_early_close_and_bad_arguments(sharded):
    root, _ = sharded
    stream = weightlift.stream_tensors(root, window=4096)
    next(stream)
    stream.close()
    with pytest.raises(StopIteration):
        next(stream)
    with pytest.raises(ValueError, match="window"):
        weightlift.stream_tensors(root, window=100)
    with pytest.raises(ValueError, match="window"):
        weightlift.stream_tensors(root, window="lots")
    with pytest.raises(TypeError, match="bogus"):
        weightlift.stream_tensors(root, bogus=1)


@pytest.mark.parametrize("world, plan", [
    (2, None), (3, None),
    (3, {"a.embed": "colwise", "b.big": "rowwise", "b.w": "colwise"})])
def test_group_mode_ranks_split_the_reading(sharded, tmp_path, world, plan):
    """Separate processes in a gloo group: every rank gets every tensor
    (with a plan: its part of the planned ones), bit-exact and in file
    order, while the ranks' reads add up to the checkpoint once."""
    import socket
    import subprocess
    import sys
    root, paths = sharded
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    worker = os.path.join(os.path.dirname(__file__), "stream_group_worker.py")
    outs = [str(tmp_path / f"r{r}.json") for r in range(world)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    args = [json.dumps(plan)] if plan else []
    procs = [subprocess.Popen([sys.executable, worker, root, str(r),
                               str(world), str(port), str(16 << 10), outs[r]]
                              + args,
                              env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
             for r in range(world)]
    logs = [p.communicate(timeout=300)[0] for p in procs]
    for p, log in zip(procs, logs):
        assert p.returncode == 0, log[-3000:]
    results = [json.load(open(o)) for o in outs]
    total = sum(t.numel() * t.element_size()
                for t in _reference(paths).values())
    for r in results:
        assert r["names"] == _file_order(paths) and r["bad"] == []
        assert (r["bytes"] < total) if plan else (r["bytes"] == total)
        assert r["bytes_read"] < total
        assert r["peak"] <= r["bound"]
        assert any(n.startswith("group: rank") for n in r["notes"])
        # The windows' counted notes are said once for the stream.
        assert sum(n.startswith("slices: ") for n in r["notes"]) <= 1, \
            r["notes"]
        assert sum("bounce buffer" in n for n in r["notes"]) <= 1, r["notes"]
        # Every window's group load ran on the stream's one loader, whose
        # creation the report counts, within its seconds, once the rank
        # read something with it (a rank may read nothing at all here).
        assert r["loaders_made"] == 1
        assert r["setup_seconds"] < r["seconds"]
        assert (r["setup_seconds"] > 0) == (r["bytes_read"] > 0), r
        # The ended stream let go of the group: destroy_process_group()
        # tore it down, not interpreter shutdown (where it aborted workers
        # now and then: "terminate called without an active exception").
        assert r["group_freed"]
    assert sum(r["bytes_read"] for r in results) == total


@pytest.mark.parametrize("rank", [0, 1, 2])
def test_parts_by_tp_plan_are_tensor_split_and_read_alone(sharded, rank):
    """tp_plan: the planned tensors come as this rank's part (bit-exact
    torch.tensor_split, uneven sizes too), the rest whole, in file order;
    only the parts' bytes are read."""
    root, paths = sharded
    ref = _reference(paths)
    plan = {"a.embed": "colwise", "b.big": "rowwise", "b.w": "colwise"}
    stream = weightlift.stream_tensors(root, window=16 << 10, tp_rank=rank,
                                       tp_size=3, tp_plan=plan)
    got = list(stream)
    assert [n for n, _ in got] == _file_order(paths)
    for name, t in got:
        want = ref[name]
        if name in plan:
            dim = 0 if plan[name] == "colwise" else -1
            want = torch.tensor_split(want, 3, dim)[rank]
        assert t.shape == want.shape, name
        assert torch.equal(raw_bytes(t), raw_bytes(want)), name
    assert stream.split_tensors == 3
    full = sum(t.numel() * t.element_size() for t in ref.values())
    assert stream.report.bytes == stream.bytes < full
    assert stream.report.bytes_read < full
    assert stream.peak_bytes <= stream.bound_bytes
    # Several windows, one report: the parts' counts add up over the
    # windows and are said once (not once per window's load).
    rep = stream.report
    assert stream.windows > 2
    parts = {n: t for n, t in got if n in plan}
    assert rep.counts["slices"] == sum(
        1 for n in plan if parts[n].numel() != ref[n].numel())
    assert rep.counts["slice_bytes_selected"] == sum(
        t.numel() * t.element_size() for n, t in parts.items()
        if t.numel() != ref[n].numel())
    assert sum(n.startswith("slices: ") for n in rep.notes) == 1, rep.notes
    assert sum("reads landed" in n or "all reads went" in n
               for n in rep.notes) <= 1, rep.notes
    assert len({f.path for f in rep.files}) == len(rep.files)
    # A file's path said once with its first reason, not a reason a window.
    assert all(f.reason.count("small read") <= 1 for f in rep.files), \
        [f.reason for f in rep.files]
    with pytest.raises(TypeError, match="tp_rank"):
        weightlift.stream_tensors(root, tp_plan=plan)


_REFUSED_RANK = r"""
import datetime, json, sys, time, weakref
import torch.distributed as dist
import weightlift
ckpt, rank, port, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                        rank=rank, world_size=2,
                        timeout=datetime.timedelta(seconds=60))
t0 = time.time()
try:
    list(weightlift.stream_tensors(
        ckpt, process_group=dist.group.WORLD, group_timeout=30,
        names=["no.such.tensor"] if rank == 1 else None))
    got = {"error": None}
except Exception as e:  # noqa: BLE001 - reported to the test
    got = {"type": type(e).__name__, "error": str(e)}
got["seconds"] = time.time() - t0
# The failed stream let go of the group: destroy_process_group() tears it
# down now, not interpreter shutdown (where gloo's threads abort).
group = weakref.ref(dist.group.WORLD)
dist.destroy_process_group()
got["group_freed"] = group() is None
json.dump(got, open(out, "w"))
"""


def test_group_mode_a_refused_rank_fails_the_others_at_once(sharded,
                                                              tmp_path):
    """Rank 1 asks for a tensor the checkpoint lacks: it still joins the
    group's agreement, so rank 0 fails at once naming it (it used to wait
    out the group timeout, 30 s here)."""
    import socket
    import subprocess
    import sys
    root, _ = sharded
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    outs = [str(tmp_path / f"r{r}.json") for r in range(2)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    procs = [subprocess.Popen([sys.executable, "-c", _REFUSED_RANK, root,
                               str(r), str(port), outs[r]], env=env,
                              stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
             for r in range(2)]
    logs = [p.communicate(timeout=120)[0] for p in procs]
    for p, log in zip(procs, logs):
        assert p.returncode == 0, log[-3000:]
    r0, r1 = (json.load(open(o)) for o in outs)
    assert r1["type"] == "TensorNotFoundError", r1
    assert "no.such.tensor" in r1["error"]
    assert "rank 1 could not start the load" in r0["error"], r0
    assert "no.such.tensor" in r0["error"], r0
    assert r0["seconds"] < 15, r0
    assert r0["group_freed"] and r1["group_freed"], (r0, r1)


def test_group_mode_refuses_numpy(sharded):
    root, _ = sharded
    with pytest.raises(ValueError, match="process_group"):
        weightlift.stream_tensors(root, framework="np", process_group=object())


@needs_cuda
@pytest.mark.parametrize("plan", [None, {"a.embed": "colwise",
                                         "b.big": "rowwise"}])
def test_cuda_stream_bounded_device_memory(sharded, plan):
    root, paths = sharded
    ref = _reference(paths)
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    peak = 0
    tp = dict(tp_plan=plan, tp_rank=1, tp_size=2) if plan else {}
    stream = weightlift.stream_tensors(root, device="cuda:0",
                                       window=32 << 10, **tp)
    for name, t in stream:
        assert t.device.type == "cuda"
        want = ref[name]
        if plan and name in plan:
            want = torch.tensor_split(
                want, 2, 0 if plan[name] == "colwise" else -1)[1]
        assert torch.equal(raw_bytes(t), raw_bytes(want)), name
        peak = max(peak, torch.cuda.memory_allocated() - base)
    # torch's allocator sees the windows (LoadSlices' memory is the
    # loader's own, outside it: the stream's count covers both).
    assert peak <= stream.bound_bytes
    assert 0 < stream.peak_bytes <= stream.bound_bytes
