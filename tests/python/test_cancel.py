"""Stopping a load early: Job.cancel (LoadCallbacks::cancel) ends a load
in flight with CancelledError after its reads in flight, and every early
stop of the Python API (closing an iterator or a stream, Ctrl-C in a
load) cancels instead of reading the rest of the checkpoint first."""

import pytest
import torch
from safetensors.torch import load_file, save_file

import weightlift
from conftest import needs_cuda
from weightlift import _core

# 16 tensors of 4 MiB: with one reading thread and 256 KiB reads, 256
# reads; the first tensor is in place after 16 of them, the rest take tens
# of milliseconds more, long after a cancel from Python.
N, ELEMS = 16, 1 << 20


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    path = tmp_path_factory.mktemp("cancel") / "model.safetensors"
    g = torch.Generator().manual_seed(5)
    save_file({f"t{i:02d}": torch.randn(ELEMS, generator=g)
               for i in range(N)}, str(path))
    return str(path)


def test_a_cancelled_job_ends_with_cancelled_error(ckpt):
    ck = _core.open_checkpoint(ckpt)
    opts = {"device": "cpu", "threads": 1, "chunk": 256 << 10}
    with _core.pooled_loader(opts) as loader:
        job = loader.start_load(ck, [])
        first = job.next_ready(30)
        assert first >= 0
        job.cancel()
        with pytest.raises(weightlift.CancelledError,
                           match="cancelled by its caller"):
            job.finish()
        # The loader is free again and loads everything, bit-exact.
        again = loader.start_load(ck, [])
        tensors = again.take_tensors(True)  # memoryviews
    want = load_file(ckpt)
    assert len(tensors) == N
    for name, dt, shape, data in tensors:
        got = torch.frombuffer(data, dtype=torch.float32).reshape(shape)
        assert torch.equal(got, want[name]), name


def test_closing_an_iterator_early_cancels_and_the_next_load_works(ckpt):
    it = weightlift.iter_tensors(ckpt, threads=1, chunk="256K")
    name, t = next(it)
    assert t.numel() == ELEMS
    it.close()
    assert list(it) == []
    sd = weightlift.load_checkpoint(ckpt, threads=1, chunk="256K")
    ref = load_file(ckpt)
    assert sd.keys() == ref.keys()
    assert all(torch.equal(sd[k], ref[k]) for k in sd)


def test_stop_cancels_and_waits(ckpt):
    """_core.stop, what Ctrl-C in a load and every early close run: the
    job ends cancelled (not read to its end) before stop returns."""
    ck = _core.open_checkpoint(ckpt)
    with _core.pooled_loader({"device": "cpu", "threads": 1,
                              "chunk": 256 << 10}) as loader:
        job = loader.start_load(ck, [])
        assert job.next_ready(30) >= 0
        _core.stop(job)
        assert job.wait(0)
        with pytest.raises(weightlift.CancelledError):
            job.finish()


@needs_cuda
def test_a_cancelled_cuda_load_ends_and_the_next_one_is_exact(ckpt):
    """Through pinned staging: the cancel ends the job after its copies in
    flight; an iterator closed early cancels as on the host; the next load
    to the device is bit-exact."""
    ck = _core.open_checkpoint(ckpt)
    opts = {"device": "cuda:0", "threads": 1, "chunk": 256 << 10,
            "cuda_chunk": 256 << 10, "staging": 1 << 20}
    with _core.pooled_loader(opts) as loader:
        job = loader.start_load(ck, [])
        assert job.next_ready(30) >= 0
        _core.stop(job)
        with pytest.raises(weightlift.CancelledError):
            job.finish()
    it = weightlift.iter_tensors(ckpt, device="cuda:0", threads=1)
    next(it)
    it.close()
    sd = weightlift.load_checkpoint(ckpt, device="cuda:0")
    want = load_file(ckpt)
    for k, t in want.items():
        assert torch.equal(sd[k].cpu(), t), k
