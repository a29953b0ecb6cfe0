"""The ranks of gloo process groups for test_tp.py:
python tp_worker.py WORLDS CKPT SCENARIO OUT_DIR (WORLDS e.g. "1,2,3,4,8").
Imports torch once, then for each world size W forks W rank processes (no
weightlift thread exists in the parent), each writing
OUT_DIR/n<W>/rank<R>.json; the groups run one after another.

Each rank checks its own results against the real safetensors package:
every tensor bit-exact against torch.tensor_split of the full tensor, and
writes what it saw (bytes read, errors, mismatches) to OUT_JSON for the
test to assert on.
"""

import datetime
import json
import os
import socket
import sys
import time
import traceback

WORLDS = [int(x) for x in sys.argv[1].split(",")]
CKPT, SCENARIO, OUT_ROOT = sys.argv[2:5]
RANK = WORLD = PORT = -1  # set for each forked rank
OUT_DIR = ""

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from safetensors.torch import load_file as st_load  # noqa: E402

import weightlift  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tp_reference import TEST_PLAN, split_reference  # noqa: E402


def reference(plan):
    full = {}
    for path in sorted(os.listdir(CKPT)):
        if path.endswith(".safetensors"):
            full.update(st_load(os.path.join(CKPT, path)))
    return split_reference(full, plan, RANK, WORLD)


def compare(got, want):
    bad = [n for n in want if n not in got or got[n].dtype != want[n].dtype
           or tuple(got[n].shape) != tuple(want[n].shape)
           or not torch.equal(got[n], want[n])]
    bad += [n for n in got if n not in want]
    return bad


def failure(fn):
    """What FN raised: type, class names, message (or None)."""
    t0 = time.time()
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - reported to the test
        return {"type": type(e).__name__, "error": str(e),
                "mro": [c.__name__ for c in type(e).__mro__],
                "seconds": time.time() - t0}
    return None


def other_weights():
    """A copy of CKPT with every tensor byte inverted and the headers (so
    the layout) unchanged, in OUT_DIR."""
    import shutil
    import struct
    out = os.path.join(OUT_DIR, "other_weights")
    shutil.copytree(CKPT, out, dirs_exist_ok=True)
    for name in os.listdir(out):
        if not name.endswith(".safetensors"):
            continue
        with open(os.path.join(out, name), "r+b") as f:
            data = bytearray(f.read())
            start = 8 + struct.unpack("<Q", bytes(data[:8]))[0]
            data[start:] = bytes(b ^ 0xFF for b in data[start:])
            f.seek(0)
            f.write(data)
    return out


def group_freed_after_failure(fn):
    """FN(group) on a new group of every rank must fail; then, once the
    caller destroys that group, nothing of weightlift's may still hold it
    (no garbage collection first): a failed load that keeps the group
    alive leaves it to interpreter shutdown, where gloo aborts the
    process."""
    import weakref
    sub = dist.new_group(list(range(WORLD)))
    got = failure(lambda: fn(sub))
    ref = weakref.ref(sub)
    del sub
    dist.destroy_process_group(ref())
    return got is not None and ref() is None


def run_failures(result):
    pg = dist.group.WORLD
    # Every kind of failed group load lets go of the group: disagreeing
    # ranks (refused in C++), a rank that cannot open the checkpoint
    # (refused in Python) or has bad options (refused by the loader), and
    # the iterator.
    bad_plan = {"*": "frobwise"} if RANK == 1 else TEST_PLAN
    missing = os.path.join(OUT_DIR, "no_such_checkpoint") if RANK == 1 \
        else CKPT
    bad_threads = {"threads": -1} if RANK == 1 else {}
    result["group_freed"] = {
        "disagree": group_freed_after_failure(
            lambda g: weightlift.load_checkpoint(
                CKPT, tp_plan={"x": "rowwise"} if RANK == 1 else {},
                process_group=g, group_timeout=20)),
        "bad_plan": group_freed_after_failure(
            lambda g: weightlift.load_checkpoint(
                CKPT, tp_plan=bad_plan, process_group=g, group_timeout=20)),
        "missing": group_freed_after_failure(
            lambda g: weightlift.load_checkpoint(
                missing, process_group=g, group_timeout=20)),
        "bad_option": group_freed_after_failure(
            lambda g: weightlift.load_checkpoint(
                CKPT, process_group=g, group_timeout=20, **bad_threads)),
        "iter": group_freed_after_failure(
            lambda g: list(weightlift.iter_tensors(
                missing, tp_plan=TEST_PLAN, process_group=g,
                group_timeout=20))),
    }
    # Ranks disagree on the plan: both fail before any data moves.
    plan = dict(TEST_PLAN)
    if RANK == 1:
        plan["lm_head.weight"] = "rowwise"
    result["disagree"] = failure(lambda: weightlift.load_checkpoint(
        CKPT, tp_plan=plan, process_group=pg, group_timeout=20))
    # Rank 1 has other weights in the same layout (every data byte changed,
    # headers as they were: a fine-tune of the same model): both fail
    # before any data moves, through load_checkpoint and iter_tensors.
    path = other_weights() if RANK == 1 else CKPT
    result["other_weights"] = failure(lambda: weightlift.load_checkpoint(
        path, tp_plan=TEST_PLAN, process_group=pg, group_timeout=20))
    result["other_weights_iter"] = failure(lambda: list(weightlift.iter_tensors(
        path, process_group=pg, group_timeout=20)))
    # Rank 1 asks for a rank that is not its own: every rank fails.
    kw = {"tp_rank": 5} if RANK == 1 else {}
    result["bad_rank"] = failure(lambda: weightlift.load_checkpoint(
        CKPT, tp_plan=TEST_PLAN, process_group=pg, group_timeout=20, **kw))
    # Rank 1 cannot open the checkpoint: the others learn its reason with
    # its code (NotFound, handed to C++ as a (code, message) pair).
    path = os.path.join(OUT_DIR, "no_such_checkpoint") if RANK == 1 else CKPT
    result["missing_on_one"] = failure(lambda: weightlift.load_checkpoint(
        path, tp_plan=TEST_PLAN, process_group=pg, group_timeout=20))
    # Rank 1's options are refused: it still joins the agreement, so rank 0
    # fails at once naming it (it used to wait out the group timeout).
    kw = {"threads": -1} if RANK == 1 else {}
    result["bad_option"] = failure(lambda: weightlift.load_checkpoint(
        CKPT, tp_plan=TEST_PLAN, process_group=pg, group_timeout=20, **kw))
    # Rank 1's plan file is missing, then it asks for zero_copy: refused in
    # Python before the load, yet the group learns it at once.
    plan_arg = os.path.join(OUT_DIR, "missing_plan.json") if RANK == 1 \
        else TEST_PLAN
    result["missing_plan"] = failure(lambda: weightlift.load_checkpoint(
        CKPT, tp_plan=plan_arg, process_group=pg, group_timeout=20))
    kw = {"zero_copy": True} if RANK == 1 else {}
    result["zero_copy"] = failure(lambda: weightlift.load_checkpoint(
        CKPT, process_group=pg, group_timeout=20, **kw))
    # A gloo group cannot deliver cuda tensors: said before anything moves.
    dev = "cuda:0" if RANK == 1 else "cpu"
    result["wrong_device"] = failure(lambda: weightlift.load_checkpoint(
        CKPT, device=dev, process_group=pg, group_timeout=20))
    # Rank 1 does not join the load in time: rank 0 must fail, not hang.
    # Last: it leaves rank 0's collective pending. Then rank 1 comes late
    # and joins that pending collective: its bytes land in memory rank 0
    # kept for it (weightlift._group._BROKEN), not in freed memory.
    done = os.path.join(OUT_DIR, "timeout_done")
    if RANK == 1:
        # Stay in the group (silent) until rank 0 has failed, so that it
        # sees a collective nobody joins rather than a peer that left.
        deadline = time.time() + 120
        while not os.path.exists(done) and time.time() < deadline:
            time.sleep(0.05)
        result["late"] = failure(lambda: weightlift.load_checkpoint(
            CKPT, process_group=pg, group_timeout=3))
    else:
        result["timeout"] = failure(lambda: weightlift.load_checkpoint(
            CKPT, process_group=pg, group_timeout=2))
        from weightlift import _group
        kept = list(_group._BROKEN)
        result["kept_works"] = len(kept)
        open(done, "w").close()
        # The agreement's records: 2 x 512 bytes; rank 1's status byte (1:
        # could start) arrives at 512 once rank 1 joins late.
        deadline = time.time() + 60
        while time.time() < deadline and not all(
                w.is_completed() for w, _, _ in kept):
            time.sleep(0.05)
        record = kept[-1][2][0] if kept else None
        result["late_record_landed"] = (
            record is not None and record.numel() == 1024
            and int(record[512]) == 1)
        # Once the works ended, weightlift lets go of them and the memory
        # they kept, without another load to prune them.
        deadline = time.time() + 5
        while _group._BROKEN and time.time() < deadline:
            time.sleep(0.01)
        result["broken_reaped"] = not _group._BROKEN


def run_dies(result):
    """The last rank dies (os._exit) at its first batch of collectives,
    mid-load (after the agreement); the others must each fail with a clear
    error within the timeout."""
    if RANK == WORLD - 1:
        from weightlift import _group

        def die(self, items):
            result["died"] = True
            result["ok"] = True
            with open(os.path.join(OUT_DIR, f"rank{RANK}.json"), "w") as f:
                json.dump(result, f)
            os._exit(17)

        _group.TorchGroupTransport.run_all = die
    result["dies"] = failure(lambda: weightlift.load_checkpoint(
        CKPT, process_group=dist.group.WORLD, group_timeout=10))


def run_fails_second(result):
    """Rank 0's transport reports its batch's collective 1 as the one that
    failed (after running the batch for real, so rank 1 is not left in a
    collective of that batch): its error must name that collective's
    tensor, as the group plan orders them. Rank 1 ran the same collectives:
    it ends (when a next batch waits for rank 0, at its timeout)."""
    from weightlift import _core, _group, _native
    if RANK == 0:
        run_all = _group.TorchGroupTransport.run_all

        def fail_second(self, items):
            run_all(self, items)
            if len(items) > 1:
                self.failed_at = 1
                raise weightlift.WeightliftIOError("injected: collective 1")

        _group.TorchGroupTransport.run_all = fail_second
    ckpt = _core.open_checkpoint(CKPT)
    rows = ckpt.tensors()
    plan = _native.group_plan(rows, WORLD, False, [],
                              _group.ALLGATHER_MIN_BYTES, True,
                              _group.BATCH_BYTES)
    first_batch = [rows[i][0] for i, st in enumerate(plan["steps"])
                   if st[4] == 0 and st[0] != "local" and rows[i][4] > 0]
    result["expected"] = first_batch[1] if len(first_batch) > 1 else None
    result["fails_second"] = failure(lambda: weightlift.load_checkpoint(
        CKPT, process_group=dist.group.WORLD, group_timeout=3))


def _status_kib(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def _peak_growth(fn):
    """FN's result and how far this process's resident memory rose above
    where it stood before FN (the peak, VmHWM, reset first)."""
    import gc
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current RSS
    before = _status_kib("VmRSS")
    out = fn()
    return out, _status_kib("VmHWM") - before


def run_memory(result):
    """Peak resident memory of a rank in group mode, on a checkpoint many
    times the batch bound (BATCH_BYTES set small here)."""
    from weightlift import _group
    _group.BATCH_BYTES = int(os.environ["TP_BATCH_BYTES"])
    plan = {"big.*": "colwise"}
    pg = dist.group.WORLD
    got, grew = _peak_growth(lambda: dict(weightlift.load_checkpoint(
        CKPT, tp_plan=plan, process_group=pg)))
    result["tp_growth"] = grew
    result["tp_bytes"] = sum(t.numel() * t.element_size()
                             for t in got.values())
    result["tp_bytes_read"] = weightlift.last_report().bytes_read
    result["tp_mismatch"] = compare(got, reference(plan))
    del got
    got, grew = _peak_growth(lambda: dict(weightlift.load_checkpoint(
        CKPT, process_group=pg)))
    result["full_growth"] = grew
    result["full_bytes"] = sum(t.numel() * t.element_size()
                               for t in got.values())
    result["full_mismatch"] = compare(got, reference({}))


def run_nccl(result):
    """Group mode over NCCL on cuda:RANK (one GPU: one rank), full and
    with the plan, each checked bit-exact on the host; the iterator too."""
    device = f"cuda:{RANK}"
    torch.cuda.set_device(device)
    pg = dist.group.WORLD
    got = weightlift.load_checkpoint(CKPT, device=device, process_group=pg)
    result["devices"] = sorted({str(t.device) for t in got.values()})
    result["full_mismatch"] = compare(
        {n: t.cpu() for n, t in got.items()}, reference({}))
    got = weightlift.load_checkpoint(CKPT, device=device, tp_plan=TEST_PLAN,
                                     process_group=pg)
    result["tp_group_mismatch"] = compare(
        {n: t.cpu() for n, t in got.items()}, reference(TEST_PLAN))
    it = weightlift.iter_tensors(CKPT, device=device, tp_plan=TEST_PLAN,
                                 process_group=pg)
    result["iter_mismatch"] = compare({n: t.cpu() for n, t in it},
                                      reference(TEST_PLAN))


def run_rank():
    result = {"rank": RANK, "ok": False}
    dist.init_process_group(
        "nccl" if SCENARIO == "nccl" else "gloo", init_method=f"tcp://127.0.0.1:{PORT}", rank=RANK,
        world_size=WORLD, timeout=datetime.timedelta(seconds=60))
    try:
        if SCENARIO == "modes":
            # Group mode, full tensors.
            got = weightlift.load_checkpoint(CKPT, process_group=dist.group.WORLD)
            result["full_mismatch"] = compare(dict(got), reference({}))
            result["full_bytes_read"] = got.report.bytes_read
            # Group mode with tp.
            got = weightlift.load_checkpoint(CKPT, tp_plan=TEST_PLAN,
                                             process_group=dist.group.WORLD)
            result["tp_group_mismatch"] = compare(dict(got),
                                                  reference(TEST_PLAN))
            result["tp_group_bytes_read"] = got.report.bytes_read
            # Slice mode, no group (each rank on its own).
            got = weightlift.load_checkpoint(CKPT, tp_rank=RANK,
                                             tp_size=WORLD, tp_plan=TEST_PLAN)
            result["slice_mismatch"] = compare(dict(got),
                                               reference(TEST_PLAN))
            result["slice_bytes_read"] = got.report.bytes_read
            result["slice_notes"] = got.report.notes
            # The other entry points, group mode with tp.
            ref = reference(TEST_PLAN)
            it = weightlift.iter_tensors(CKPT, tp_plan=TEST_PLAN,
                                         process_group=dist.group.WORLD)
            result["iter_mismatch"] = compare(dict(it), ref)
            from weightlift.torch import load_file
            result["load_file_mismatch"] = compare(
                load_file(CKPT, tp_plan=TEST_PLAN,
                          process_group=dist.group.WORLD), ref)
            targets = {n: torch.zeros_like(t) for n, t in ref.items()}
            weightlift.load_into(targets, CKPT, tp_plan=TEST_PLAN,
                                 process_group=dist.group.WORLD)
            result["load_into_mismatch"] = compare(targets, ref)
        elif SCENARIO == "failures":
            run_failures(result)
        elif SCENARIO == "nccl":
            run_nccl(result)
        elif SCENARIO == "memory":
            run_memory(result)
        elif SCENARIO == "dies":
            run_dies(result)
        elif SCENARIO == "fails_second":
            run_fails_second(result)
        result["ok"] = True
    except Exception as e:  # noqa: BLE001 - reported to the test
        result["error_type"] = type(e).__name__
        result["error_mro"] = [c.__name__ for c in type(e).__mro__]
        result["error"] = str(e)
        result["traceback"] = traceback.format_exc()
    with open(os.path.join(OUT_DIR, f"rank{RANK}.json"), "w") as f:
        json.dump(result, f)
    sys.stdout.flush()


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main():
    global RANK, WORLD, PORT, OUT_DIR
    for world in WORLDS:
        WORLD, PORT = world, free_port()
        OUT_DIR = os.path.join(OUT_ROOT, f"n{world}")
        os.makedirs(OUT_DIR, exist_ok=True)
        pids = []
        for r in range(world):
            pid = os.fork()
            if pid == 0:
                RANK = r
                try:
                    run_rank()
                finally:
                    # Skip the process group's teardown: after a deliberate
                    # timeout a pending collective would keep it waiting.
                    os._exit(0)
            pids.append(pid)
        for pid in pids:
            os.waitpid(pid, 0)


main()
