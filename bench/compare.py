#!/usr/bin/env python3
"""weightlift against its peers, in one run: cold, warm and RAM-backed.

For each checkpoint (a directory of .safetensors shards) and each cache
state it times, with every tensor on the device and torch.cuda.synchronize()
before the clock stops:
  weightlift  auto / staging forced / host-register forced
              (cpu: auto, pread, zero-copy views of the file)
  safetensors.torch.load_file(device=...)
  safetensors to cpu, then pinned non_blocking copies (cuda only)
  fastsafetensors (nogds), runai-model-streamer     (skipped when absent)
  InstantTensor, default and buffered mode (cuda only; skipped when absent)
and, end to end, the time from nothing (a fresh process) to the first
generated token with transformers: weightlift.transformers.from_pretrained
vs AutoModelForCausalLM.from_pretrained, on a saved Llama-architecture
checkpoint with random weights (created once with save_pretrained).

Cache states: cold = pages evicted (as root `sync; echo 3 >
/proc/sys/vm/drop_caches`, else posix_fadvise(DONTNEED) on every file);
warm = files read once first; shm = files copied to /dev/shm (tmpfs);
first = the first call of a fresh process, files in the page cache: each
run is a new Python process that imports the method's package and (cuda)
makes its CUDA context before the clock starts, then times one call end to
end, synchronized. weightlift runs there as `weightlift.load_checkpoint`, so
the loader's whole setup (staging allocation, registration, threads) is in
the time. For cuda the table gives each first call's ratio to the pinned
host-to-device copy ceiling measured in the same run.
Each state runs its methods round-robin for --cold-repeat / --repeat rounds
(so drift of a virtual disk falls on every method alike); the best run of
each method is the table's, every run is in the log and the json.

Output: a markdown table (seconds, GB/s, ratio to the best peer) on stdout
and in --md, a bar chart in --png, raw numbers in --json.

GPU machine (H200):
  python3 bench/compare.py --device cuda:0 --layouts llama2-7b,llama2-13b \\
      --md $OUT/compare.md --png $OUT/compare.png --json $OUT/compare.json
  first calls only (bench/h200_run.sh stage first7):
  python3 bench/compare.py --device cuda:0 --layouts llama2-7b \\
      --modes first --repeat 3 --budget 100 --e2e none --md $OUT/first.md
CPU-only smoke run (tiny layout synthesized here):
  python3 bench/compare.py --device cpu --layouts tiny --e2e none \\
      --md /tmp/compare.md --png /tmp/compare.png
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import subprocess
import sys
import time

from bench_common import ROOT, evict, find_cli

# A config sized like a real small Llama model (TinyLlama-1.1B's shape).
E2E_CONFIG = dict(vocab_size=32000, hidden_size=2048, intermediate_size=5632,
                  num_hidden_layers=22, num_attention_heads=32,
                  num_key_value_heads=4, max_position_embeddings=2048,
                  rms_norm_eps=1e-5, tie_word_embeddings=False)
E2E_CONFIG_CPU = dict(E2E_CONFIG, hidden_size=256, intermediate_size=688,
                      num_hidden_layers=4, num_attention_heads=8,
                      num_key_value_heads=4, vocab_size=4096)


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def import_weightlift():
    try:
        import weightlift  # noqa: F401
    except ImportError:
        import glob
        for p in sorted(glob.glob(os.path.join(ROOT, "build*", "python",
                                               "weightlift", "_native*.so")),
                        key=os.path.getmtime, reverse=True):
            sys.path.insert(0, os.path.dirname(os.path.dirname(p)))
            break
    import weightlift
    import weightlift.torch  # noqa: F401
    return weightlift


# ---- checkpoints -----------------------------------------------------------

def synth_tiny_python(path):
    """A small Llama-like layout written with safetensors (when the CLI is
    not built): 2 shards, ~48 MiB of bf16/f32."""
    import torch
    from safetensors.torch import save_file
    os.makedirs(path, exist_ok=True)
    g = torch.Generator().manual_seed(0)
    shards = [{}, {}]
    shards[0]["model.embed_tokens.weight"] = torch.randn(4096, 512,
                                                         generator=g).bfloat16()
    for i in range(8):
        s = shards[i * 2 // 8]
        p = f"model.layers.{i}."
        for n, shape in [("self_attn.q_proj.weight", (512, 512)),
                         ("self_attn.k_proj.weight", (512, 512)),
                         ("self_attn.v_proj.weight", (512, 512)),
                         ("self_attn.o_proj.weight", (512, 512)),
                         ("mlp.gate_proj.weight", (1536, 512)),
                         ("mlp.up_proj.weight", (1536, 512)),
                         ("mlp.down_proj.weight", (512, 1536))]:
            s[p + n] = torch.randn(*shape, generator=g).bfloat16()
        s[p + "input_layernorm.weight"] = torch.ones(512)
    shards[1]["lm_head.weight"] = torch.randn(4096, 512,
                                              generator=g).bfloat16()
    wm = {}
    for i, s in enumerate(shards):
        name = f"model-{i + 1:05d}-of-00002.safetensors"
        save_file(s, os.path.join(path, name), metadata={"format": "pt"})
        wm.update({k: name for k in s})
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": wm}, f)


def get_checkpoint(layout, args):
    """Directory of LAYOUT: given with --dir layout=path, or synthesized
    once under --work (by the weightlift CLI, or in Python for tiny)."""
    given = dict(d.split("=", 1) for d in args.dir)
    if layout in given:
        return given[layout]
    path = os.path.join(args.work, layout)
    if os.path.isdir(path) and any(f.endswith(".safetensors")
                                   for f in os.listdir(path)):
        return path
    cli = find_cli(args.cli)
    if cli:
        log(f"synthesizing {layout} into {path} with {cli}")
        subprocess.run([cli, "synth", "--layout", layout, path], check=True)
    elif layout == "tiny":
        log(f"synthesizing tiny into {path} with safetensors")
        synth_tiny_python(path)
    else:
        raise SystemExit(f"no checkpoint for {layout}: pass --dir "
                         f"{layout}=PATH or build the weightlift CLI")
    return path


def shard_files(path):
    if os.path.isfile(path):
        return [path]
    return sorted(os.path.join(path, f) for f in os.listdir(path)
                  if f.endswith(".safetensors"))


# ---- cache states ----------------------------------------------------------

def warm(files, threads=8, piece=64 << 20):
    """Reads FILES once (into the page cache), THREADS at a time: a
    checkpoint already cached costs a fraction of a second, not the seconds
    of one thread."""
    from concurrent.futures import ThreadPoolExecutor
    pieces = [(p, off) for p in files
              for off in range(0, os.path.getsize(p), piece)]

    def read(work):
        buf = bytearray(piece)
        for p, off in work:
            fd = os.open(p, os.O_RDONLY)
            try:
                os.preadv(fd, [buf], off)
            finally:
                os.close(fd)
    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(read, [pieces[i::threads] for i in range(threads)]))


# ---- methods ---------------------------------------------------------------

def sync(device):
    if device.startswith("cuda"):
        import torch
        torch.cuda.synchronize()


def touch_cpu(tensors):
    """Reads one byte per 4 KiB page of every tensor (safetensors' cpu
    tensors are lazily mapped: make every method really have the bytes)."""
    total = 0
    for t in tensors:
        if t.numel():
            b = t.reshape(-1).view(__import__("torch").uint8)
            total += int(b[::4096].sum())
    return total


def m_weightlift(opts):
    def run(path, device):
        import weightlift
        import weightlift.torch
        d = weightlift.torch.load_file(path, device=device, **opts)
        sync(device)
        if device == "cpu":
            touch_cpu(d.values())
        r = weightlift.last_report()
        how = ",".join(sorted({f.path_taken for f in r.files})) if r else ""
        return d, how
    return run


def m_safetensors(path, device):
    from safetensors.torch import load_file
    d = {}
    for f in shard_files(path):
        d.update(load_file(f, device=device))
    sync(device)
    if device == "cpu":
        touch_cpu(d.values())
    return d, ""


def m_safetensors_pinned(path, device):
    from safetensors.torch import load_file
    out = {}
    for f in shard_files(path):
        for k, t in load_file(f, device="cpu").items():
            out[k] = t.pin_memory().to(device, non_blocking=True)
    sync(device)
    return out, ""


def m_fastsafetensors(path, device):
    from fastsafetensors import SafeTensorsFileLoader, SingleGroup
    loader = SafeTensorsFileLoader(SingleGroup(), device=device, nogds=True)
    try:
        loader.add_filenames({0: shard_files(path)})
        fb = loader.copy_files_to_device()
        out = {k: fb.get_tensor(k).clone() for k in fb.key_to_rank_lidx}
        sync(device)
        fb.close()
    finally:
        loader.close()
    return out, "nogds"


def m_runai(path, device):
    from runai_model_streamer import SafetensorsStreamer
    out = {}
    with SafetensorsStreamer() as s:
        for f in shard_files(path):
            s.stream_file(f)
            for name, t in s.get_tensors():
                out[name] = t.to(device, copy=True)  # views of a reused buffer
    sync(device)
    return out, ""


def m_weightlift_checkpoint(path, device):
    """The call a user times first: weightlift.load_checkpoint(dir)."""
    import weightlift
    d = weightlift.load_checkpoint(path, device=device)
    sync(device)
    if device == "cpu":
        touch_cpu(d.values())
    r = d.report
    return d, ",".join(sorted({f.path_taken for f in r.files})) if r else ""


def m_instanttensor(buffered):
    """InstantTensor's safe_open over every shard at once (its README's
    advice), tensors() copied out (the default copy=True)."""
    def run(path, device):
        import torch
        from instanttensor import BackendPolicy, safe_open
        kw = {"backend": BackendPolicy.BUFFERED} if buffered else {}
        index = torch.device(device).index or 0
        out = {}
        with safe_open(shard_files(path), framework="pt", device=index,
                       **kw) as f:
            for name, t in f.tensors():
                out[name] = t
        sync(device)
        return out, "buffered" if buffered else "default"
    return run


def methods(device):
    ms = [("weightlift auto", m_weightlift({}), True)]
    if device.startswith("cuda"):
        ms += [("weightlift staging", m_weightlift(
                   {"host_register": "off", "gds": "off"}), True),
               ("weightlift host-register", m_weightlift(
                   {"host_register": "on", "gds": "off"}), True)]
    else:
        ms += [("weightlift pread", m_weightlift({"backend": "pread"}), True),
               ("weightlift zero-copy", m_weightlift({"zero_copy": True}),
                True)]
    ms += [("safetensors", m_safetensors, False)]
    if device.startswith("cuda"):
        ms += [("safetensors+pinned", m_safetensors_pinned, False)]
    ms += [("fastsafetensors", m_fastsafetensors, False),
           ("runai-streamer", m_runai, False)]
    if device.startswith("cuda"):
        ms += [("instanttensor", m_instanttensor(False), False),
               ("instanttensor buffered", m_instanttensor(True), False)]
    return ms


# The fresh-process case runs its peers in this order: one process each
# costs seconds (imports, CUDA context, and the slow peers' load itself), so
# the closest peers come first and a --budget or timeout that cuts a round
# short cuts the slowest ones.
FIRST_CALL_ORDER = ["instanttensor", "instanttensor buffered",
                    "safetensors+pinned", "safetensors", "fastsafetensors",
                    "runai-streamer"]


def first_call_methods(device):
    """The fresh-process case: weightlift's load_checkpoint and the peers."""
    peers = [m for m in methods(device) if not m[2]]
    rank = {n: i for i, n in enumerate(FIRST_CALL_ORDER)}
    peers.sort(key=lambda m: rank.get(m[0], len(rank)))
    return ([("weightlift load_checkpoint", m_weightlift_checkpoint, True)] +
            peers)


# Imported before the clock starts in a fresh process (the import is not
# the load; bench/e2e_ttft.py measures imports).
FIRST_CALL_IMPORTS = {
    "weightlift": ["weightlift", "weightlift.torch"],
    "safetensors": ["safetensors.torch"],
    "fastsafetensors": ["fastsafetensors"],
    "runai": ["runai_model_streamer"],
    "instanttensor": ["instanttensor"],
}


def first_call_child(name, path, device):
    """One method's first call in this (fresh) process; prints JSON."""
    import importlib
    t0 = time.perf_counter()
    import torch
    if device.startswith("cuda"):
        torch.ones(1, device=device).add_(1)  # the CUDA context, off the clock
        torch.cuda.synchronize()
    t1 = time.perf_counter()
    key = name.split()[0].split("-")[0].split("+")[0]
    try:
        for mod in FIRST_CALL_IMPORTS.get(key, []):
            importlib.import_module(mod)
    except ImportError as e:  # absent, or present but not loadable here
        print(json.dumps({"missing": e.name or mod, "why": str(e)[:300]}))
        return
    t2 = time.perf_counter()
    fn = dict((m[0], m[1]) for m in first_call_methods(device))[name]
    secs, n, how = time_method(fn, path, device)
    print(json.dumps({"seconds": secs, "tensors": n, "how": how,
                      "context_s": t1 - t0, "import_s": t2 - t1}), flush=True)
    # The result is out: skip the interpreter's teardown (the driver frees
    # the context with the process), a second or so per run.
    sys.stderr.flush()
    os._exit(0)


def free_device():
    gc.collect()
    try:
        import torch
        if torch.cuda.is_available():
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    except ImportError:
        pass


def time_in_fresh_process(name, path, device):
    """NAME's first call in a new Python process (see first_call_child)."""
    import weightlift
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [
        os.path.dirname(os.path.dirname(weightlift.__file__)),
        env.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, os.path.abspath(__file__),
                        "--first-call-child", name, path, device],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"exit {r.returncode}: {r.stderr[-600:]}")
    rec = json.loads(r.stdout.strip().splitlines()[-1])
    if "missing" in rec:
        raise ImportError(rec["why"], name=rec["missing"])
    return rec["seconds"], rec["tensors"], rec["how"]


def time_method(fn, path, device):
    free_device()
    t0 = time.perf_counter()
    out, how = fn(path, device)
    secs = time.perf_counter() - t0
    n = len(out)
    del out
    free_device()
    return secs, n, how


# ---- end to end: time to first token -----------------------------------------

E2E_CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
import torch, transformers
method, path, device, root = sys.argv[1:5]
sys.path[:0] = [p for p in sys.argv[5:] if p]
dtype = torch.bfloat16
t1 = time.perf_counter()
note = ""
if method == "weightlift":
    import weightlift.transformers as wtf
    model = wtf.from_pretrained(path, device=device, dtype=dtype)
else:
    major = int(transformers.__version__.split(".")[0])
    kw = {"dtype": dtype} if major >= 5 else {"torch_dtype": dtype}
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            path, device_map=device, **kw)
        note = "device_map"
    except (ImportError, ValueError) as e:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            path, **kw).to(device)
        note = "cpu then .to()"
    model.eval()
ids = torch.tensor([[1, 450, 1000, 2000, 3000]], device=device)
t2 = time.perf_counter()
with torch.no_grad():
    out = model.generate(ids, attention_mask=torch.ones_like(ids),
                         max_new_tokens=1, do_sample=False, pad_token_id=0)
if device.startswith("cuda"):
    torch.cuda.synchronize()
t3 = time.perf_counter()
print(json.dumps({"total": t3 - t0, "imports": t1 - t0, "load": t2 - t1,
                  "first_token": t3 - t2, "token": int(out[0, -1]),
                  "note": note}))
"""


def make_e2e_model(path, device):
    if os.path.exists(os.path.join(path, "config.json")):
        return path
    import torch
    import transformers
    cfg = transformers.LlamaConfig(
        **(E2E_CONFIG if device.startswith("cuda") else E2E_CONFIG_CPU))
    log(f"creating the end-to-end model in {path} (random weights)")
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(path, max_shard_size="1GB")
    del model
    return path


def run_e2e(args, results):
    try:
        import transformers  # noqa: F401
    except ImportError:
        results["notes"].append("end to end skipped: transformers absent")
        return
    path = make_e2e_model(os.path.join(args.work, "e2e-llama"), args.device)
    files = shard_files(path)
    wl_path = os.path.dirname(os.path.dirname(
        import_weightlift().__file__))
    for state in [s for s in args.modes if s in ("cold", "warm")]:
        for method in ("transformers", "weightlift"):
            if state == "cold":
                evict(files, whole_cache=True)
            else:
                warm(files)
            r = subprocess.run(
                [sys.executable, "-c", E2E_CHILD, method, path, args.device,
                 ROOT, wl_path], capture_output=True, text=True)
            if r.returncode != 0:
                results["notes"].append(
                    f"e2e {method} {state} failed: {r.stderr[-500:]}")
                continue
            rec = json.loads(r.stdout.strip().splitlines()[-1])
            rec.update(method=method, state=state)
            results["e2e"].append(rec)
            log(f"e2e {state:5s} {method:12s} total {rec['total']:.2f} s "
                f"(load {rec['load']:.2f} s) token {rec['token']}")


# ---- report ----------------------------------------------------------------

def markdown(results):
    lines = [f"# weightlift vs peers ({results['when']})", "",
             f"Machine: {results['machine']}", "",
             f"Command: `{results['command']}`", "",
             "| checkpoint | state | method | s | GB/s | vs best peer | "
             "vs pinned copy | path |",
             "|---|---|---|---|---|---|---|---|"]
    ceiling = results.get("pinned_copy_gbps")
    for r in results["runs"]:
        ratio = f"{r['ratio']:.2f}x" if r.get("ratio") else ""
        vs_ceiling = (f"{r['gbps'] / ceiling:.2f}x"
                      if ceiling and r["state"] == "first" else "")
        lines.append(f"| {r['layout']} ({r['gb']:.2f} GB) | {r['state']} | "
                     f"{r['method']} | {r['seconds']:.3f} | "
                     f"{r['gbps']:.2f} | {ratio} | {vs_ceiling} | "
                     f"{r.get('how', '')} |")
    if ceiling:
        lines += ["", f"Pinned host-to-device copy ceiling in this run "
                  f"(bench/ceiling.py: 2 GiB, best of 3): {ceiling:.2f} GB/s."]
    if results["e2e"]:
        lines += ["", "Time from a fresh process to the first generated "
                  "token (transformers, Llama-architecture model):", "",
                  "| state | method | total s | imports s | load s | "
                  "first token s | note |", "|---|---|---|---|---|---|---|"]
        for e in results["e2e"]:
            lines.append(f"| {e['state']} | {e['method']} | {e['total']:.2f}"
                         f" | {e['imports']:.2f} | {e['load']:.2f} | "
                         f"{e['first_token']:.3f} | {e['note']} |")
    if results["notes"]:
        lines += ["", "Notes:", ""] + [f"- {n}" for n in results["notes"]]
    return "\n".join(lines) + "\n"


def chart(results, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    layouts = list(dict.fromkeys(r["layout"] for r in results["runs"]))
    if not layouts:
        return
    fig, axes = plt.subplots(1, len(layouts), squeeze=False,
                             figsize=(7 * len(layouts), 4.5))
    for ax, layout in zip(axes[0], layouts):
        runs = [r for r in results["runs"] if r["layout"] == layout]
        states = list(dict.fromkeys(r["state"] for r in runs))
        meths = list(dict.fromkeys(r["method"] for r in runs))
        width = 0.8 / max(1, len(meths))
        for i, m in enumerate(meths):
            vals = [next((r["gbps"] for r in runs if r["state"] == s
                          and r["method"] == m), 0) for s in states]
            ax.bar([j + i * width for j in range(len(states))], vals, width,
                   label=m)
        ax.set_xticks([j + width * (len(meths) - 1) / 2
                       for j in range(len(states))])
        ax.set_xticklabels(states)
        ax.set_ylabel("GB/s")
        ax.set_title(f"{layout} ({runs[0]['gb']:.1f} GB) to "
                     f"{results['device']}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=120)


def machine():
    parts = [platform.node(), f"{os.cpu_count()} cpus"]
    try:
        import torch
        parts.append(f"torch {torch.__version__}")
        if torch.cuda.is_available():
            parts.append(torch.cuda.get_device_name(0))
    except ImportError:
        pass
    return ", ".join(parts)


def measure_state(layout, state, path, files, nbytes, reps, wanted, args,
                  results):
    """Every method on one checkpoint in one state, REPS rounds.

    Rounds go round-robin over the methods (round 1 runs every method, then
    round 2 ...), so a disk or machine whose speed drifts over minutes drifts
    under all methods alike instead of favouring whoever ran first. Each
    round starts one method later than the one before (round 2 starts with
    the second method ...), so no method always runs first after another
    method's memory was given back. Each method keeps its best run; every
    run's seconds and its place in its round go to the log and json.
    """
    best, every, places, how_evicted, dropped = {}, {}, {}, {}, set()
    listed = (first_call_methods if state == "first" else methods)(args.device)
    ms = [m for m in listed if not wanted or m[0] in wanted]
    cost = {}  # seconds the last run of each method took, all in
    for rnd in range(reps):
        shift = rnd % len(ms) if ms else 0
        if state == "first":
            # Nothing evicts between fresh processes (each method only
            # reads the files): warm once per round, not once per run.
            warm(files)
        for place, (name, fn, ours) in enumerate(ms[shift:] + ms[:shift]):
            if name in dropped:
                continue
            if args.budget and rnd > 0 and (
                    time.perf_counter() - args.t_start + cost.get(name, 0)
                    > args.budget):
                note = (f"{layout} {state}: round {rnd + 1} of {reps} not run "
                        f"for {name} (--budget {args.budget:.0f} s)")
                results["notes"].append(note)
                log(note)
                continue
            t_run = time.perf_counter()
            try:
                if state == "cold":
                    how_evicted[name] = evict(files, whole_cache=True)
                elif state == "warm":
                    warm(files)
                if state == "first":
                    secs, n, path_how = time_in_fresh_process(
                        name, path, args.device)
                else:
                    secs, n, path_how = time_method(fn, path, args.device)
                cost[name] = time.perf_counter() - t_run
                log(f"{layout} {state} round {rnd + 1} {name}: {secs:.3f} s "
                    f"({cost[name]:.1f} s with its process and warming)")
            except ImportError as e:
                note = (f"{name}: skipped, not importable ({e.name}: "
                        f"{str(e)[:200]})")
                if note not in results["notes"]:
                    results["notes"].append(note)
                dropped.add(name)
                continue
            except Exception as e:  # noqa: BLE001 - report and go on
                results["notes"].append(
                    f"{layout} {state} {name}: failed: "
                    f"{type(e).__name__}: {str(e)[:300]}")
                free_device()
                dropped.add(name)
                continue
            every.setdefault(name, []).append(secs)
            places.setdefault(name, []).append(place + 1)
            if name not in best or secs < best[name][0]:
                best[name] = (secs, n, path_how)
            if args.flush:  # the table so far, in case the run is cut short
                args.flush(collect(ms, best, every, places, how_evicted,
                                   dropped, layout, state, nbytes))
    runs = collect(ms, best, every, places, how_evicted, dropped, layout,
                   state, nbytes)
    for rec in runs:
        log(f"{layout} {state:5s} {rec['method']:26s} {rec['seconds']:8.3f} s "
            f"{rec['gbps']:7.2f} GB/s {rec['how']} (runs: "
            + " ".join(f"{x:.3f}" for x in rec["every_seconds"])
            + " s; places: "
            + " ".join(str(p) for p in rec["every_place_in_round"]) + ")")
    return runs


def collect(ms, best, every, places, how_evicted, dropped, layout, state,
            nbytes):
    """The table rows of one state: each method's best run."""
    runs = []
    for name, _, ours in ms:
        if name in dropped or name not in best:
            continue
        secs, n, path_how = best[name]
        rec = {"layout": layout, "state": state, "method": name,
               "ours": ours, "seconds": secs, "tensors": n, "bytes": nbytes,
               "gb": nbytes / 1e9, "gbps": nbytes / secs / 1e9,
               "how": path_how, "every_seconds": every[name],
               "every_place_in_round": places[name]}
        if state == "cold":
            rec["evicted_by"] = how_evicted[name]
        runs.append(rec)
    return runs


def with_ratios(state_runs):
    """STATE_RUNS with each one's ratio to the best peer of the state."""
    peers = [r["gbps"] for r in state_runs if not r["ours"]]
    for r in state_runs:
        r["ratio"] = r["gbps"] / max(peers) if peers else None
    return state_runs


def write_outputs(results, args, extra=()):
    """The markdown table (--md) and --json, with EXTRA rows (a state still
    being measured) after the finished ones."""
    full = dict(results, runs=results["runs"] + with_ratios(list(extra)))
    with open(args.md, "w") as f:
        f.write(markdown(full))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(full, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--layouts", default="llama2-7b,llama2-13b",
                    help="comma list; each synthesized unless --dir gives it")
    ap.add_argument("--dir", action="append", default=[],
                    metavar="LAYOUT=PATH", help="an existing checkpoint dir")
    ap.add_argument("--modes", default="cold,warm,shm",
                    help="comma list of cold, warm, shm, first")
    ap.add_argument("--methods", default="",
                    help="comma list of method names to run (default all)")
    ap.add_argument("--repeat", type=int, default=2,
                    help="rounds per warm/shm measurement (best is kept)")
    ap.add_argument("--cold-repeat", type=int, default=2,
                    help="rounds per cold measurement, each after eviction")
    ap.add_argument("--work", default=os.path.expanduser(
        "~/.cache/weightlift/compare"))
    ap.add_argument("--cli", default=None, help="the weightlift binary")
    ap.add_argument("--e2e", default="auto", choices=["auto", "none"])
    ap.add_argument("--md", default="compare.md")
    ap.add_argument("--png", default="compare.png")
    ap.add_argument("--json", default=None)
    ap.add_argument("--keep-shm", action="store_true")
    ap.add_argument("--budget", type=float, default=0,
                    help="seconds: after the first round, a run that would "
                         "end past this (by the method's last run) is left "
                         "out, and the table says so (0: no limit)")
    args = ap.parse_args()
    args.t_start = time.perf_counter()
    args.flush = None
    args.modes = args.modes.split(",")
    os.makedirs(args.work, exist_ok=True)
    weightlift = import_weightlift()
    if args.device.startswith("cuda"):
        import torch
        torch.zeros(1, device=args.device)  # CUDA context outside the clock
        if "first" in args.modes:
            sys.path.insert(0, os.path.join(ROOT, "bench"))
            from ceiling import pinned_copy_ceiling  # bench/ceiling.py
            results_ceiling = pinned_copy_ceiling(args.device)
            log(f"pinned host->device copy ceiling: {results_ceiling:.2f} GB/s")

    results = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "machine": machine(), "device": args.device,
               "command": " ".join(sys.argv), "runs": [], "e2e": [],
               "notes": [], "weightlift": weightlift.__version__}
    if args.device.startswith("cuda") and "first" in args.modes:
        results["pinned_copy_gbps"] = results_ceiling
    wanted = set(filter(None, args.methods.split(",")))
    for layout in filter(None, args.layouts.split(",")):
        src = get_checkpoint(layout, args)
        ckpt = weightlift._core.open_checkpoint(src)
        nbytes = ckpt.total_bytes
        for state in args.modes:
            path = src
            if state == "shm":
                st = os.statvfs("/dev/shm")
                if st.f_bavail * st.f_frsize < nbytes * 1.1:
                    results["notes"].append(f"{layout}: shm skipped, /dev/shm "
                                            "too small")
                    continue
                path = os.path.join("/dev/shm", "weightlift-compare", layout)
                if not os.path.isdir(path):
                    shutil.copytree(src, path)
            files = shard_files(path)
            reps = args.cold_repeat if state == "cold" else args.repeat
            args.flush = lambda runs: write_outputs(results, args, runs)
            state_runs = measure_state(layout, state, path, files, nbytes,
                                       reps, wanted, args, results)
            results["runs"] += with_ratios(state_runs)
            if state == "shm" and not args.keep_shm:
                shutil.rmtree(path, ignore_errors=True)
    if args.e2e != "none":
        run_e2e(args, results)

    print(markdown(results))
    write_outputs(results, args)
    try:
        chart(results, args.png)
    except ImportError:
        log("matplotlib absent: no chart")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--first-call-child":
        sys.path.insert(0, ROOT)
        first_call_child(*sys.argv[2:])
    else:
        main()
