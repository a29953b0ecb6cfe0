"""Slices through the C++ loader (Loader.start_load_slices, the data path of
get_slice) against numpy slicing of the same real random data, under every
storage backend, including O_DIRECT, where the planner chooses between row
runs and covering reads placed with strided copies."""

import os
import sys

import numpy as np
import pytest
import safetensors.numpy
import torch

import weightlift
from weightlift import _core, _native, _slice_index, _slices

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "bench"))
from bench_common import evict  # noqa: E402 - the benchmarks' eviction

BACKENDS = ["pread", "direct", "uring", "mmap"]


@pytest.fixture(scope="module")
def big_file(tmp_path_factory):
    rng = np.random.default_rng(5)
    tensors = {
        "wide": rng.integers(-2**15, 2**15, (257, 200), dtype=np.int16),
        "cube": rng.standard_normal((9, 33, 65)).astype(np.float32),
        "tall": rng.integers(-2**31, 2**31, (4099, 5), dtype=np.int32),
        "vec": rng.standard_normal(70001),
        "rows": rng.integers(0, 256, (6, 300000), dtype=np.uint8),
    }
    path = str(tmp_path_factory.mktemp("slices") / "big.safetensors")
    safetensors.numpy.save_file(tensors, path)
    return path, tensors


def _random_index(rng, shape):
    parts = []
    for n in shape[:rng.integers(0, len(shape) + 1)]:
        kind = rng.integers(0, 4)
        if kind == 0:
            parts.append(int(rng.integers(-n, n)))
        elif kind == 1:
            a, b = (int(x) for x in rng.integers(-n - 2, n + 3, 2))
            parts.append(slice(a, b, int(rng.integers(1, 6))))
        elif kind == 2:
            parts.append(slice(None))
        else:
            a = int(rng.integers(0, n))
            parts.append(slice(a, None))
    return tuple(parts)


@pytest.mark.parametrize("backend", BACKENDS)
def test_random_slices_match_torch_indexing(big_file, backend):
    """framework "pt" follows torch's basic indexing (negative and
    out-of-range bounds clamp, steps, ints, Ellipsis), as safetensors."""
    path, tensors = big_file
    rng = np.random.default_rng({"pread": 1, "direct": 2, "uring": 3,
                                 "mmap": 4}[backend])
    with weightlift.safe_open(path, "pt", backend=backend,
                              direct_min_bytes=4096) as f:
        for _ in range(80):
            name = list(tensors)[rng.integers(0, len(tensors))]
            full = torch.from_numpy(tensors[name])
            index = _random_index(rng, full.shape)
            want = full[index]
            got = f.get_slice(name)[index]
            assert got.dtype == want.dtype, (name, index)
            assert got.shape == want.shape, (name, index)
            assert torch.equal(got, want), (name, index)


def test_one_load_many_requests_and_the_report(big_file):
    """Several slices (the same tensor twice, a whole tensor) in one load;
    under O_DIRECT narrow columns of rows shorter than a block (512 or 4096
    bytes, as the file system needs) are one
    covering read per staging chunk with a strided copy, wide row pieces far
    apart are row runs, and the report says which and what it cost."""
    path, tensors = big_file
    ckpt = _core.open_checkpoint(path)
    loader = _core.make_loader({"backend": "direct"})
    requests = [
        ("wide", [(0, 257, 1), (10, 40, 1)], []),     # narrow columns
        ("wide", [(5, 6, 1)], [0]),                   # one row, squeezed
        ("vec", [], []),                              # whole
        ("rows", [(0, 6, 2), (0, 100000, 1)], []),    # rows far apart
    ]
    got = _slices.load_slices(loader, ckpt, requests, "np", "cpu")
    wants = [tensors["wide"][:, 10:40], tensors["wide"][5], tensors["vec"],
             tensors["rows"][::2, :100000]]
    for g, w in zip(got, wants):
        assert g.shape == w.shape and g.tobytes() == w.tobytes()
    notes = " ".join(weightlift.last_report().notes)
    assert "slices: 3 sliced tensors" in notes, notes
    assert "1 strided over 257 rows" in notes, notes
    assert "1 as row runs in 3 reads" in notes, notes
    assert "overhead" in notes
    # The same as numbers (report.counts), for a program to read.
    c = weightlift.last_report().counts
    assert (c["slices"], c["strided_slices"], c["strided_rows"],
            c["row_run_slices"], c["row_run_reads"]) == (3, 1, 257, 1, 3), c
    assert c["slice_bytes_read"] > c["slice_bytes_selected"] > 0, c
    # What Python says of counts (LoadReport.merge) is what C++ said.
    from weightlift import _native
    rep = weightlift.last_report()
    said = _native.counted_notes(rep.as_dict())
    assert said and set(said) <= set(rep.notes), (said, rep.notes)
    with pytest.raises(TypeError, match="'slices' must be a count"):
        _native.counted_notes(dict(rep.as_dict(), counts={"slices": -1}))


def test_o_direct_weighs_each_read(tmp_path):
    """Under O_DIRECT a read costs more than its bytes (File::read_cost_bytes,
    32 KiB): a tensor-parallel rank's short row runs close together (1 KiB of
    every 8 KiB row, as a row-parallel weight's part at n = 8) are read
    covering and placed strided, not one 4 KiB read per row; buffered reads
    of the same file keep the row runs (only the selected bytes). Both
    bit-exact, and the report says which and why."""
    rng = np.random.default_rng(9)
    w = rng.integers(-2**15, 2**15, (512, 4096), dtype=np.int16)
    path = str(tmp_path / "rows.safetensors")
    safetensors.numpy.save_file({"w": w}, path)
    ckpt = _core.open_checkpoint(path)
    want = w[:, 512:1024]
    for backend, strided in (("direct", True), ("pread", False)):
        loader = _core.make_loader({"backend": backend})
        got = _slices.load_slices(loader, ckpt,
                                  [("w", [(0, 512, 1), (512, 1024, 1)], [])],
                                  "np", "cpu")[0]
        assert got.tobytes() == want.tobytes(), backend
        notes = " ".join(weightlift.last_report().notes)
        if strided:
            assert "1 strided over 512 rows" in notes, notes
            assert "a read weighed as 32 KiB more" in notes, notes
        else:
            assert "1 as row runs in 512 reads" in notes, notes
            assert "weighed" not in notes, notes


def _on_memory_fs(path):
    """Whether PATH lies on tmpfs or ramfs (its pages cannot be evicted):
    the file system of the longest mount point above it."""
    best, fstype = "", ""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, right = line.split(" - ", 1)
            mount = left.split()[4]
            if (path == mount or path.startswith(mount.rstrip("/") + "/")) \
                    and len(mount) > len(best):
                best, fstype = mount, right.split()[0]
    return fstype in ("tmpfs", "ramfs")


def test_cold_buffered_reads_weigh_each_read(tmp_path):
    """backend=pread on a file whose pages are not in the page cache: each
    pread would be a request to storage (env/cold_file.h), so the rank's
    row runs are read covering and placed strided, as under O_DIRECT, and
    the file's reason says why. Once the file is resident again the same
    request keeps its row runs. Bit-exact both ways."""
    rng = np.random.default_rng(10)
    w = rng.integers(-2**15, 2**15, (512, 4096), dtype=np.int16)
    path = str(tmp_path / "cold.safetensors")
    safetensors.numpy.save_file({"w": w}, path)
    if _on_memory_fs(path):
        pytest.skip(f"{tmp_path} is on tmpfs/ramfs: its pages cannot be "
                    "evicted")
    ckpt = _core.open_checkpoint(path)
    want = w[:, 512:1024]
    loader = _core.make_loader({"backend": "pread"})
    for cold in (True, False):
        if cold:
            evict([path])
        got = _slices.load_slices(loader, ckpt,
                                  [("w", [(0, 512, 1), (512, 1024, 1)], [])],
                                  "np", "cpu")[0]
        assert got.tobytes() == want.tobytes(), cold
        rep = weightlift.last_report()
        notes = " ".join(rep.notes)
        reason = rep.files[0].reason
        if cold:
            assert "weighed as a storage request" in reason, reason
            assert "1 strided over 512 rows" in notes, notes
            assert "a read weighed as 32 KiB more" in notes, notes
        else:
            assert "storage request" not in reason, reason
            assert "1 as row runs in 512 reads" in notes, notes


def test_bad_requests_raise_named_errors(big_file):
    path, _ = big_file
    ckpt = _core.open_checkpoint(path)
    loader = _core.make_loader({})
    with pytest.raises(weightlift.WeightliftError, match="'wide' dimension 1"):
        loader.start_load_slices(ckpt, [("wide", [(0, 1, 1), (0, 201, 1)])
                                        ]).finish()
    with pytest.raises(weightlift.WeightliftError, match="'nope' is not in"):
        loader.start_load_slices(ckpt, [("nope", [])]).finish()


@pytest.mark.parametrize("backend", BACKENDS)
def test_load_slices_into_the_callers_memory(big_file, backend):
    """_native.load_slices_into (get_slice's path to a CUDA device, here
    into host memory): random slices land C-contiguous in memory the caller
    allocated, byte for byte what numpy's slicing gives, several in one
    call; its Report becomes last_report()."""
    path, tensors = big_file
    ckpt = _core.open_checkpoint(path)
    loader = _core.make_loader({"backend": backend, "direct_min_bytes": 4096})
    rng = np.random.default_rng(11)
    for _ in range(30):
        requests, wants, outs = [], [], []
        for _ in range(int(rng.integers(1, 4))):
            name = list(tensors)[rng.integers(0, len(tensors))]
            full = tensors[name]
            index = _random_index(rng, full.shape)
            sel = _slice_index.select(index, full.shape, "pt")
            want = full[tuple(slice(*r) for r in sel.ranges)]
            out = np.full(want.shape, 0x5A, dtype=want.dtype)
            requests.append((name, sel.ranges, out.ctypes.data, out.nbytes))
            wants.append(want)
            outs.append(out)
        report = _native.load_slices_into(loader, ckpt, requests)
        for out, want in zip(outs, wants):
            assert out.tobytes() == want.tobytes(), requests
        _core.set_last_report(report)
        r = weightlift.last_report()
        assert r.bytes == sum(w.nbytes for w in wants)
        assert r.tensors == len(requests)


def test_load_slices_into_refuses_what_does_not_fit(big_file):
    """A destination whose size is not the selection's, a null pointer and
    an unknown tensor are named errors, before anything is read."""
    path, tensors = big_file
    ckpt = _core.open_checkpoint(path)
    loader = _core.make_loader({})
    out = np.zeros((2, 200), dtype=np.int16)
    with pytest.raises(weightlift.WeightliftError,
                       match="tensor 'wide' has 400 bytes but its "
                             "selection has 800"):
        _native.load_slices_into(
            loader, ckpt, [("wide", [(0, 2, 1)], out.ctypes.data, 400)])
    with pytest.raises(weightlift.WeightliftError, match="null pointer"):
        _native.load_slices_into(loader, ckpt, [("wide", [(0, 2, 1)], 0, 800)])
    with pytest.raises(weightlift.NotFoundError, match="'nope' is not in"):
        _native.load_slices_into(loader, ckpt, [("nope", [], 0, 0)])
    assert not out.any()  # nothing was written


def test_row_runs_of_a_resident_file_are_copied_from_a_mapping(tmp_path):
    """A column slice (a row-parallel TP part) of a file in the page cache:
    in auto mode its row runs are copied out of a mapping of the whole file
    (src/env/mapped_rows_file.h), bit-exact, the report says so and counts
    only the selected bytes as read; backend="pread" reads them one pread
    each, with the same bytes."""
    rng = np.random.default_rng(9)
    w = rng.integers(-2**15, 2**15, (2048, 4096), dtype=np.int16)
    path = str(tmp_path / "w.safetensors")
    safetensors.numpy.save_file({"w": w}, path)
    with open(path, "rb") as f:  # resident, whatever the writer did
        while f.read(1 << 24):
            pass
    ckpt = _core.open_checkpoint(path)
    # 2048 runs of 4200 bytes, 8 KiB apart: over half the file, so not a
    # "small read" (open_files.h): the file's residency is sampled.
    part = w[:, 0:2100]
    for backend, mapped in (("auto", True), ("pread", False)):
        loader = _core.make_loader({"backend": backend})
        got = _slices.load_slices(
            loader, ckpt, [("w", [(0, 2048, 1), (0, 2100, 1)], [])],
            "np", "cpu")[0]
        assert got.tobytes() == part.tobytes(), backend
        report = weightlift.last_report()
        assert report.bytes_read == part.nbytes, backend
        notes = " ".join(report.notes)
        assert "1 as row runs in 2048 reads" in notes, notes
        assert ("2048 row runs in" in notes and
                "copied from a mapping of the page cache" in notes) == mapped, \
            (backend, notes)
        assert report.files[0].copied_row_runs == (2048 if mapped else 0)
        assert report.counts["row_run_reads"] == 2048, report.counts
