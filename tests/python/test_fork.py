"""A process forked from one that loaded (multiprocessing's fork, a
pre-forking server): the worker threads of every loader it inherited stayed
in the parent. The child's loads make loaders of their own and are
bit-exact, a load that was running in the parent is refused in the child
with a clear error (waiting for it would never end), handles keep working,
and the parent is untouched. Each child runs under a deadline: a hang is a
failure, not a stuck suite."""

import os
import signal
import sys
import time
import traceback

import pytest
import safetensors.torch
import torch

import weightlift

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")

DEADLINE_S = 30


def in_forked_child(body):
    """Runs BODY in a forked child; returns "ok", "failed" (it raised; the
    traceback went to stderr) or "hung" (killed after DEADLINE_S)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            body()
            code = 0
        except BaseException:
            traceback.print_exc()
            sys.stderr.flush()
        os._exit(code)
    end = time.monotonic() + DEADLINE_S
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > end:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "hung"
        time.sleep(0.01)
    return "ok" if os.waitstatus_to_exitcode(status) == 0 else "failed"


@pytest.fixture
def ckpt(tmp_path):
    g = torch.Generator().manual_seed(23)
    tensors = {f"layers.{i}.w": torch.randn(96, 80, generator=g)
               for i in range(6)}
    tensors["norm"] = torch.randn(80, generator=g)
    path = str(tmp_path / "model.safetensors")
    safetensors.torch.save_file(tensors, path)
    return path, tensors


@pytest.fixture(autouse=True)
def no_cached_loaders():
    weightlift.release_cached_loaders()
    yield
    weightlift.release_cached_loaders()


def assert_equal(got, want):
    assert set(got) == set(want)
    for k, t in want.items():
        assert torch.equal(got[k], t), k


def test_a_forked_child_loads_with_loaders_of_its_own(ckpt):
    path, want = ckpt
    # The parent's pooled loader (its workers idle) and prepared checkpoint.
    assert_equal(weightlift.load_checkpoint(path, threads=2), want)
    weightlift.prepare("cpu", checkpoint=path, threads=2)

    def child():
        sd = weightlift.load_checkpoint(path, threads=2)
        assert_equal(sd, want)
        # Its own loader: the parent's could not have run here.
        assert sd.report.setup_seconds > 0
        assert_equal(weightlift.load_checkpoint(path, threads=2), want)

    assert in_forked_child(child) == "ok"
    sd = weightlift.load_checkpoint(path, threads=2)
    assert_equal(sd, want)
    assert sd.report.setup_seconds == 0  # the parent's pool is still there


def test_a_tensor_parallel_rank_prepared_before_the_fork(ckpt):
    path, want = ckpt
    plan = {"layers.*": "rowwise"}
    # Starts filling the row runs' page tables on threads of the parent.
    weightlift.prepare("cpu", checkpoint=path, tp_rank=1, tp_size=3,
                       tp_plan=plan)

    def child():
        sd = weightlift.load_checkpoint(path, tp_rank=1, tp_size=3,
                                        tp_plan=plan)
        for k, t in want.items():
            part = torch.tensor_split(t, 3, -1)[1] if k != "norm" else t
            assert torch.equal(sd[k], part), k

    assert in_forked_child(child) == "ok"


def test_a_load_running_in_the_parent_is_refused_in_the_child(ckpt):
    path, want = ckpt
    it = weightlift.iter_tensors(path, threads=2)

    def child():
        with pytest.raises(weightlift.UnsupportedError,
                           match="forked from its parent"):
            next(iter(it))
        assert_equal(weightlift.load_checkpoint(path), want)

    assert in_forked_child(child) == "ok"
    assert_equal(dict(it), want)


def test_a_handle_opened_before_the_fork_keeps_working(ckpt):
    path, want = ckpt
    with weightlift.safe_open(path, framework="pt") as f:
        assert torch.equal(f.get_tensor("norm"), want["norm"])

        def child():
            for k, t in want.items():
                assert torch.equal(f.get_tensor(k), t), k
            assert torch.equal(f.get_slice("layers.0.w")[2:5],
                               want["layers.0.w"][2:5])

        assert in_forked_child(child) == "ok"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_a_cuda_load_in_a_child_forked_after_cuda_is_an_error_not_a_hang(
        ckpt):
    """CUDA cannot be used in a child forked after the parent initialized
    it (NVIDIA's rule; torch says the same). A CUDA load there must fail
    with an error that says so, promptly, and the child's host loads must
    still work."""
    path, want = ckpt
    assert_equal({k: v.cpu() for k, v in
                  weightlift.load_checkpoint(path, device="cuda:0").items()},
                 want)

    def child():
        with pytest.raises(Exception) as info:
            weightlift.load_checkpoint(path, device="cuda:0")
        text = str(info.value).lower()
        assert "fork" in text or "cuda" in text, text
        assert_equal(weightlift.load_checkpoint(path, device="cpu"), want)

    assert in_forked_child(child) == "ok"
    # The parent's CUDA loads are untouched.
    got = weightlift.load_checkpoint(path, device="cuda:0")
    assert_equal({k: v.cpu() for k, v in got.items()}, want)
