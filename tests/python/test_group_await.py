"""The group transport's completion poll (_group._await_works), which
enforces group_timeout for NCCL collectives: torch's Work.wait(timeout)
only orders the stream there, so without the poll a rank that never joins
a collective would leave the others blocked in a synchronize forever.
NCCL needs two GPUs; the poll is checked here on real gloo works between two
processes: one that completes, and one whose peer joins only after the
deadline."""

import subprocess
import sys
import textwrap

_RANKS = textwrap.dedent("""
    import datetime, os, socket, sys, time
    import torch
    import torch.distributed as dist
    from weightlift import _group

    mode = sys.argv[1]
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
    s.close()
    pid = os.fork()
    rank = 1 if pid == 0 else 0
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=30))
    t = torch.arange(4, dtype=torch.float32) if rank == 1 else torch.zeros(4)
    if rank == 1:
        if mode == "late":
            time.sleep(2.0)
        dist.broadcast(t, src=1)
        dist.destroy_process_group()
        os._exit(0)
    w = dist.broadcast(t, src=1, async_op=True)
    t0 = time.monotonic()
    done = _group._await_works([w], 0.5 if mode == "late" else 20.0)
    took = time.monotonic() - t0
    print(f"done={done} took={took:.3f} got={t.tolist()}", flush=True)
    w.wait()
    dist.destroy_process_group()
    os.waitpid(pid, 0)
""")


def _run(mode):
    p = subprocess.run([sys.executable, "-c", _RANKS, mode],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    line = [x for x in p.stdout.splitlines() if x.startswith("done=")]
    assert line, p.stdout + p.stderr
    return line[0]


def test_a_completed_collective_is_seen_complete():
    out = _run("now")
    assert out.startswith("done=True"), out
    assert "got=[0.0, 1.0, 2.0, 3.0]" in out, out


def test_a_peer_that_never_joins_in_time_is_a_timeout_not_a_hang():
    out = _run("late")
    assert out.startswith("done=False"), out
    took = float(out.split("took=")[1].split()[0])
    assert 0.5 <= took < 1.5, out
