"""safe_open on cpu: get_tensor / get_tensors served on the calling thread
from the file the handle holds open (python/src/host_reads.cc), against the
real safetensors package on the same files: the same values, the same
sharing (views of one mapping with framework="pt", fresh copies with "np"),
the file never written, a file changed after open refused, and a
LoadReport that says what happened."""

import os
import subprocess
import sys

import numpy as np
import pytest
import safetensors
import safetensors.numpy
import safetensors.torch
import torch
from conftest import errors_in_threads, random_tensor, storage_nbytes, write_raw
from dropin_util import assert_same_value

import weightlift
from weightlift import _native


@pytest.fixture
def model_file(tmp_path, gen):
    t = {"w": random_tensor(torch.float32, (64, 48), gen),
         "b": random_tensor(torch.bfloat16, (48,), gen),
         "i": random_tensor(torch.int64, (3, 5), gen),
         "s": random_tensor(torch.float16, (), gen),
         "e": torch.zeros((0, 4), dtype=torch.float32)}
    path = str(tmp_path / "m.safetensors")
    safetensors.torch.save_file(t, path)
    return path


def _file_bytes(path):
    with open(path, "rb") as f:
        return f.read()


@pytest.mark.parametrize("framework", ["pt", "np"])
def test_every_tensor_as_safetensors(model_file, framework):
    if framework == "np":
        import ml_dtypes  # noqa: F401 - numpy's BF16 (make deps installs it)
    with weightlift.safe_open(model_file, framework) as f, \
            safetensors.safe_open(model_file, framework) as g:
        for k in g.keys():
            assert_same_value(f.get_tensor(k), g.get_tensor(k), k)
        r = weightlift.last_report()
        assert r.files[0].path_taken == ("mmap-view" if framework == "pt"
                                         else "copy")
        ours = f.get_tensors()
        theirs = {k: g.get_tensor(k) for k in g.offset_keys()}
        assert_same_value(ours, theirs, "get_tensors")
        assert weightlift.last_report().tensors == len(theirs)


def test_pt_views_share_memory_as_safetensors_and_never_write_the_file(
        model_file):
    before = _file_bytes(model_file)
    with weightlift.safe_open(model_file, "pt") as f, \
            safetensors.safe_open(model_file, "pt") as g:
        a, b = f.get_tensor("i"), f.get_tensor("i")
        sa, sb = g.get_tensor("i"), g.get_tensor("i")
        # safetensors hands out views of one mapping per handle: so do we.
        assert (a.data_ptr() == b.data_ptr()) == (sa.data_ptr() ==
                                                  sb.data_ptr())
        assert a.data_ptr() == b.data_ptr()
        want = a.clone()
        a.add_(1)  # copy-on-write: the process's copy, not the file
        assert torch.equal(b, want + 1)
    with weightlift.safe_open(model_file, "pt") as f:  # a new mapping
        assert torch.equal(f.get_tensor("i"), want)
    assert _file_bytes(model_file) == before


def test_np_and_zero_copy_false_return_fresh_copies(model_file):
    with weightlift.safe_open(model_file, "np") as f, \
            safetensors.safe_open(model_file, "np") as g:
        a, b = f.get_tensor("i"), f.get_tensor("i")
        sa, sb = g.get_tensor("i"), g.get_tensor("i")
        assert np.shares_memory(a, b) == np.shares_memory(sa, sb) is False
        assert a.flags.writeable and sa.flags.writeable
        a += 1
        assert np.array_equal(b, sb)
    with weightlift.safe_open(model_file, "pt", zero_copy=False) as f:
        a, b = f.get_tensor("w"), f.get_tensor("w")
        assert a.data_ptr() != b.data_ptr()
        assert a.data_ptr() % 64 == 0
        r = weightlift.last_report()
        assert r.files[0].path_taken == "copy"
        assert r.bytes_read == r.bytes == 64 * 48 * 4
    with weightlift.safe_open(model_file, "np", zero_copy=True) as f:
        a, b = f.get_tensor("i"), f.get_tensor("i")
        assert np.shares_memory(a, b) and a.flags.writeable
        assert weightlift.last_report().files[0].path_taken == "mmap-view"


def test_large_copies_use_their_own_memory(tmp_path, gen):
    """From 4 MiB a copy is read with pread into fresh pages (np and
    zero_copy=False); the bytes are the file's."""
    t = {"big": random_tensor(torch.float32, (1 << 20,), gen)}  # 4 MiB
    path = str(tmp_path / "big.safetensors")
    safetensors.torch.save_file(t, path)
    with weightlift.safe_open(path, "np") as f, \
            safetensors.safe_open(path, "np") as g:
        assert_same_value(f.get_tensor("big"), g.get_tensor("big"), "big")
    with weightlift.safe_open(path, "pt", zero_copy=False) as f:
        got = f.get_tensor("big")
        assert torch.equal(got.view(torch.int32), t["big"].view(torch.int32))
        assert got.data_ptr() % 4096 == 0


def test_report_says_what_happened(model_file):
    with weightlift.safe_open(model_file, "pt") as f:
        f.get_tensor("w")
        r = weightlift.last_report()
    assert (r.tensors, r.bytes, r.bytes_read, r.threads) == (
        1, 64 * 48 * 4, 0, 0)
    assert r.device == "cpu" and r.seconds >= 0
    assert r.files[0].path == model_file
    assert "private (copy-on-write) mapping" in r.files[0].reason
    assert any("no loader job" in n for n in r.notes)
    assert r.options["zero_copy"] is True
    assert "mmap-view" in str(r)
    # A backend named: the loader serves it, as asked.
    with weightlift.safe_open(model_file, "pt", backend="pread") as f:
        f.get_tensor("w")
        r = weightlift.last_report()
    assert r.files[0].path_taken != "mmap-view"
    assert not any("no loader job" in n for n in r.notes)


@pytest.mark.parametrize("kw", [{}, {"zero_copy": False}, {"np": True}])
def test_file_changed_after_open_is_refused(model_file, kw):
    fw = "np" if kw.pop("np", False) else "pt"
    with weightlift.safe_open(model_file, fw, **kw) as f:
        f.get_tensor("i")
        st = os.stat(model_file)
        os.utime(model_file, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        with pytest.raises(weightlift.WeightliftIOError,
                           match="changed since it was opened"):
            f.get_tensor("i")


def test_file_cut_short_after_open_is_refused(model_file):
    with weightlift.safe_open(model_file, "pt", zero_copy=False) as f:
        size = os.path.getsize(model_file)
        os.truncate(model_file, size // 2)
        with pytest.raises(weightlift.WeightliftIOError, match="size"):
            f.get_tensor("w")


_CUT_AFTER_FIRST_CALL = r"""
import os, sys
import weightlift
path, framework, kind = sys.argv[1:4]
with weightlift.safe_open(path, framework, zero_copy=False) as f:
    f.get_tensor("a")  # the file is prepared (opened, mapped) by this call
    os.truncate(path, 4096)
    try:
        if kind in ("tensor", "small tensor"):
            f.get_tensor("b" if kind == "tensor" else "c")
        elif kind == "small slice":
            f.get_slice("b")[:, :8]
        else:
            f.get_slice("b")[:, :3072]
    except weightlift.WeightliftIOError as e:
        print("refused:", e)
    else:
        print("returned data from a file cut short")
"""


@pytest.mark.parametrize("framework", ["np", "pt"])
@pytest.mark.parametrize(
    "kind", ["tensor", "small tensor", "small slice", "large slice"])
def test_file_cut_short_after_a_copy_call_is_refused(tmp_path, framework,
                                                     kind):
    """Copies (numpy, zero_copy=False) come out of the file's mapping: a
    file truncated after the handle's first call must be an error on the
    next call, not a SIGBUS (a child process, so a crash is a failure here,
    not the end of pytest). The 6 MiB tensor is read with pread; the 64-byte
    one and the small slice are copied from the mapping; the large slice
    (4.5 MiB) is copied from the mapping after a populate."""
    path = write_raw(str(tmp_path / "cut.safetensors"),
                     [("a", "U8", [16], bytes(16)),
                      ("b", "U8", [1536, 4096], bytes(1536 * 4096)),
                      ("c", "U8", [64], bytes(64))])
    proc = subprocess.run([sys.executable, "-c", _CUT_AFTER_FIRST_CALL, path,
                           framework, kind], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.startswith("refused:"), proc.stdout + proc.stderr
    assert "cut.safetensors" in proc.stdout, proc.stdout


def test_misaligned_tensor_is_copied_not_mapped(tmp_path):
    """An F32 tensor at an odd offset: a view would be misaligned for its
    dtype, so it is copied; the values are the file's."""
    want = torch.arange(6, dtype=torch.float32)
    path = write_raw(str(tmp_path / "odd.safetensors"),
                     [("pad", "U8", [1], b"\x07"),
                      ("x", "F32", [6], want.numpy().tobytes())])
    with weightlift.safe_open(path, "pt") as f:
        got = f.get_tensor("x")
        r = weightlift.last_report()
    assert torch.equal(got, want)
    assert got.data_ptr() % 4 == 0
    assert r.bytes_read == 24
    assert any("misaligned" in n for n in r.notes), r.notes


def test_tensors_outlive_the_handle_and_are_freed(model_file):
    base = _native._live_buffers()
    with weightlift.safe_open(model_file, "pt") as f:
        t = f.get_tensor("w")
        ref = t.clone()
    del f
    assert _native._live_buffers() == base + 1
    assert torch.equal(t.view(torch.int32), ref.view(torch.int32))
    del t
    assert _native._live_buffers() == base


def test_sharded_directory(tmp_path, gen):
    a = {"a.w": random_tensor(torch.float32, (8, 4), gen)}
    b = {"b.w": random_tensor(torch.int32, (5,), gen)}
    safetensors.torch.save_file(a, str(tmp_path / "m-1.safetensors"))
    safetensors.torch.save_file(b, str(tmp_path / "m-2.safetensors"))
    with weightlift.safe_open(str(tmp_path), "pt") as f:
        assert torch.equal(f.get_tensor("b.w"), b["b.w"])
        assert weightlift.last_report().files[0].path.endswith(
            "m-2.safetensors")
        assert torch.equal(f.get_tensor("a.w").view(torch.int32),
                           a["a.w"].view(torch.int32))
        got = f.get_tensors()
        assert [fr.path[-15:] for fr in weightlift.last_report().files] == [
            "m-1.safetensors", "m-2.safetensors"]
    assert torch.equal(got["a.w"].view(torch.int32),
                       a["a.w"].view(torch.int32))


def test_threads_share_a_handle(model_file):
    with safetensors.safe_open(model_file, "pt") as g:
        want = {k: g.get_tensor(k).clone() for k in g.keys()}
    with weightlift.safe_open(model_file, "pt", zero_copy=False) as f:
        def work():
            for _ in range(50):
                for k, v in want.items():
                    assert_same_value(f.get_tensor(k), v, k)
        errors = errors_in_threads(work, 4)
    assert errors == []


@pytest.mark.parametrize("framework", ["pt", "np"])
def test_slices_on_cpu_are_copied_out_of_the_mapping(model_file, framework):
    """get_slice(name)[index] on cpu: the selected elements, copied on the
    calling thread out of the handle's mapping (report path "mmap-slice",
    bytes = the slice's), equal to safetensors' and owning just their own
    bytes; a file changed since open is refused here too."""
    with weightlift.safe_open(model_file, framework) as f, \
            safetensors.safe_open(model_file, framework) as g:
        for index in [(slice(1, 9, 3), slice(None, 7)), (5,), (5, 7),
                      (slice(None), 3), (slice(0, 0),)]:
            got = f.get_slice("w")[index]
            assert_same_value(got, g.get_slice("w")[index], str(index))
            r = weightlift.last_report()
            nbytes = got.nbytes if framework == "np" else (
                got.numel() * got.element_size())
            assert r.files[0].path_taken == "mmap-slice", r.files
            assert r.bytes == r.bytes_read == nbytes
            if framework == "pt":
                assert storage_nbytes(got) == nbytes
            else:
                assert got.base is None or got.base.nbytes == nbytes
        st = os.stat(model_file)
        os.utime(model_file, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        with pytest.raises(weightlift.WeightliftIOError,
                           match="changed since it was opened"):
            f.get_slice("w")[1:2]


def test_misaligned_slice_is_copied_out_of_the_mapping(tmp_path):
    """A tensor at an offset that is no multiple of its element size: its
    slices are copied byte for byte out of the mapping into memory of their
    own (aligned), like any other tensor's, on the calling thread."""
    want = torch.arange(6, dtype=torch.float32)
    path = write_raw(str(tmp_path / "odd.safetensors"),
                     [("pad", "U8", [1], b"\x07"),
                      ("x", "F32", [6], want.numpy().tobytes())])
    for framework in ("pt", "np"):
        with weightlift.safe_open(path, framework) as f:
            got = f.get_slice("x")[2:5]
            r = weightlift.last_report()
        assert torch.equal(torch.as_tensor(got), want[2:5]), framework
        assert r.files[0].path_taken == "mmap-slice", framework
        assert r.bytes == 12 and r.threads == 0, framework


@pytest.mark.parametrize("framework", ["pt", "np"])
def test_no_descriptor_is_left_once_the_handle_is_gone(model_file, framework):
    """Neither the tensors handed out (views hold the mapping, not the
    file) nor the last report keep a file descriptor open."""
    fd_dir = f"/proc/{os.getpid()}/fd"
    before = len(os.listdir(fd_dir))
    with weightlift.safe_open(model_file, framework) as f:
        t = f.get_tensor("i")
        f.get_slice("w")[1:3]
    del f
    assert weightlift.last_report() is not None
    assert len(os.listdir(fd_dir)) == before
    with safetensors.safe_open(model_file, framework) as g:
        assert_same_value(t, g.get_tensor("i"), "after close")


def _random_index_part(rng, n):
    kind = int(rng.integers(0, 9))
    if kind <= 2:
        return int(rng.integers(-n - 2, n + 3))
    if kind <= 5:
        def bound():
            return None if rng.random() < 0.3 else int(
                rng.integers(-n - 3, n + 4))
        step = [None, 1, 1, 2, 3, 0, -1][int(rng.integers(0, 7))]
        return slice(bound(), bound(), step)
    if kind == 6:
        return Ellipsis
    return [None, True, np.int64(1), 1.0, [0]][int(rng.integers(0, 5))]


@pytest.mark.parametrize("framework", ["pt", "np"])
def test_slice_index_read_in_cpp_agrees_with_slice_index(tmp_path, framework):
    """HostReads.slice reads the common indices in C++ (host_reads.cc
    ReadIndex / SliceRanges); wherever it answers, it gives exactly what
    weightlift._slice_index's rules and numpy's slicing give (values and
    shape), and whatever those rules refuse it leaves to them (None)."""
    rng = np.random.default_rng({"pt": 21, "np": 22}[framework])
    shapes = {"v": (7,), "m": (5, 6), "e": (3, 0, 2), "c": (4, 1, 3),
              "s": (), "z": (0,)}
    arrays = {k: rng.integers(-1000, 1000, s).astype(np.int32)
              for k, s in shapes.items()}
    path = str(tmp_path / "idx.safetensors")
    safetensors.numpy.save_file(arrays, path)
    answered = 0
    with weightlift.safe_open(path, framework) as f:
        host = f._source.host
        for _ in range(3000):
            name = list(shapes)[int(rng.integers(0, len(shapes)))]
            shape = shapes[name]
            parts = tuple(_random_index_part(rng, shape[min(i, len(shape) - 1)]
                                             if shape else 3)
                          for i in range(int(rng.integers(0, len(shape) + 2))))
            index = parts[0] if len(parts) == 1 and rng.random() < 0.5 \
                else parts
            got = host.slice(name, index, framework == "np")
            try:
                sel = weightlift._slice_index.select(index, shape, framework)
            except Exception as e:  # the rules refuse it: so must C++
                assert got is None, (name, index, e)
                continue
            if got is None:
                continue
            assert sel is not None, (name, index)
            answered += 1
            data, got_shape, _ = got
            want = arrays[name][tuple(slice(*r) for r in sel.ranges)]
            want = want.reshape(weightlift._slice_index.result_shape(sel))
            assert tuple(got_shape) == want.shape, (name, index)
            raw = b"" if data is None else bytes(data)
            assert raw == want.tobytes(), (name, index)
    assert answered > 500, answered  # the C++ reader really was exercised
