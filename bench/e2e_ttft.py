#!/usr/bin/env python3
"""Time to the first token, from nothing, split into where it goes.

For each method, a fresh Python process loads a saved Llama-architecture
checkpoint with transformers and generates one token (greedy), and reports:

  startup      interpreter start until the child's first line runs
  imports      `import torch, transformers` (and weightlift's module)
  cuda init    the CUDA context and a first kernel (cuda devices only)
  model build  from_pretrained minus its weight reading: config, building
               the modules, lazy imports of the model's code, tying
  weights      reading the tensors into the model (the wrapped functions
               are named in the output)
  first token  model.generate(max_new_tokens=1), synchronized; includes
               the lazy imports of transformers' generation code
  exit         printing the result and the interpreter's shutdown (not
               part of the time to first token; shown so the phases add up
               to the wall time)

and, for each phase, how much of it was Python imports (from -X importtime,
self times of every module imported during the phase). Methods:

  transformers  AutoModelForCausalLM.from_pretrained(dir, dtype, device_map)
  weightlift    weightlift.transformers.from_pretrained(dir, device)

The checkpoint is `weightlift synth --layout L` (the state-dict names of
LlamaForCausalLM, random bf16 bits) plus the config.json of that layout, so
the Llama-2-7B layout needs no download:

  python3 bench/e2e_ttft.py --layout tiny --device cpu              # here
  python3 bench/e2e_ttft.py --layout llama2-7b --device cuda:0 \\
      --dir /var/tmp/wl_llama2-7b --md $OUT/ttft.md        # H200 (ttft7)

Warm page cache: the files are read once before every run. Runs alternate
between the methods (--runs rounds); the table shows every run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time

from bench_common import ROOT, find_cli

# LlamaConfig fields of the `weightlift synth` layouts (tensor shapes match
# src/format/layouts.cc: num_heads * head_dim = hidden, kv_heads * head_dim
# = the k/v projection rows).
LAYOUT_CONFIGS = {
    "tiny": dict(vocab_size=2048, hidden_size=256, intermediate_size=688,
                 num_hidden_layers=2, num_attention_heads=8,
                 num_key_value_heads=4),
    "tinyllama-1.1b": dict(vocab_size=32000, hidden_size=2048,
                           intermediate_size=5632, num_hidden_layers=22,
                           num_attention_heads=32, num_key_value_heads=4),
    "llama2-7b": dict(vocab_size=32000, hidden_size=4096,
                      intermediate_size=11008, num_hidden_layers=32,
                      num_attention_heads=32, num_key_value_heads=32),
    "llama2-13b": dict(vocab_size=32000, hidden_size=5120,
                       intermediate_size=13824, num_hidden_layers=40,
                       num_attention_heads=40, num_key_value_heads=40),
    "llama3-8b": dict(vocab_size=128256, hidden_size=4096,
                      intermediate_size=14336, num_hidden_layers=32,
                      num_attention_heads=32, num_key_value_heads=8),
}
PHASES = ["startup", "imports", "cuda init", "model build", "weights",
          "first token", "exit"]

# The child: prints "@phase NAME" to stderr at each phase start, so the
# parent can attribute -X importtime's lines (also on stderr) to phases.
CHILD = r"""
import json, sys, time
t_start = time.time()
marks = []
def phase(name):
    marks.append((name, time.perf_counter()))
    print("@phase " + name, file=sys.stderr, flush=True)
method, path, device = sys.argv[1:4]
phase("imports")
import torch, transformers
if method == "weightlift":
    import weightlift.transformers as wtf
if device.startswith("cuda"):
    phase("cuda init")
    torch.ones(1, device=device).add_(1)
    torch.cuda.synchronize()
phase("model build")

# Weight reading inside from_pretrained: the time spent in these functions
# (outermost call only) is "weights"; the rest of from_pretrained is "model
# build".
weights = [0.0]
depth = [0]
wrapped = []
def timed(owner, name):
    fn = getattr(owner, name, None)
    if fn is None:
        return
    def wrapper(*a, **k):
        depth[0] += 1
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            depth[0] -= 1
            if depth[0] == 0:
                weights[0] += time.perf_counter() - t
    setattr(owner, name, wrapper)
    wrapped.append(getattr(owner, "__name__", str(owner)) + "." + name)

dtype = torch.bfloat16
major = int(transformers.__version__.split(".")[0])
note = ""
if method == "weightlift":
    timed(wtf, "load_into")
    model = wtf.from_pretrained(path, device=device, dtype=dtype)
else:
    import transformers.modeling_utils as mu
    for name in ("load_state_dict", "_load_state_dict_into_model",
                 "_load_state_dict_into_meta_model", "load_shard_file",
                 "_load_pretrained_model"):
        timed(mu, name)
    kw = {"dtype": dtype} if major >= 5 else {"torch_dtype": dtype}
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            path, device_map=device, **kw)
        note = "device_map"
    except (ImportError, ValueError) as e:  # device_map needs accelerate
        model = transformers.AutoModelForCausalLM.from_pretrained(
            path, **kw).to(device)
        note = "cpu, then .to(device): " + type(e).__name__
    model.eval()
if device.startswith("cuda"):
    torch.cuda.synchronize()
t1 = time.perf_counter()
phase("first token")
ids = torch.tensor([[1, 450, 1000, 2000, 1500]], device=device) % \
    model.config.vocab_size
gen = dict(attention_mask=torch.ones_like(ids), max_new_tokens=1,
           do_sample=False, pad_token_id=0)
if int(torch.__version__.split(".")[0]) < 2:
    gen["synced_gpus"] = False  # its probe imports fsdp, broken on torch 1.13
with torch.no_grad():
    out = model.generate(ids, **gen)
if device.startswith("cuda"):
    torch.cuda.synchronize()
phase("end")
secs = {marks[i][0]: marks[i + 1][1] - marks[i][1]
        for i in range(len(marks) - 1)}
t0 = dict(marks)["model build"]  # the wrapping's imports count as build
secs["weights"] = weights[0]
secs["model build"] = (t1 - t0) - weights[0]
secs.pop("first token", None)
secs["first token"] = marks[-1][1] - marks[-2][1]
print(json.dumps({"t_start": t_start, "t_end": time.time(), "secs": secs,
                  "wrapped": wrapped,
                  "token": int(out[0, -1]), "note": note,
                  "transformers": transformers.__version__,
                  "torch": torch.__version__}))
"""


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def make_checkpoint(layout, work, cli, given=None):
    """WORK/ttft-LAYOUT (or GIVEN, a `weightlift synth` output of LAYOUT):
    synthesized weights plus the layout's config.json."""
    path = given or os.path.join(work, f"ttft-{layout}")
    config = os.path.join(path, "config.json")
    if os.path.exists(config):
        return path
    if not given:
        log(f"synthesizing {layout} into {path}")
        cli = find_cli(cli)
        if cli is None:
            raise SystemExit("no weightlift CLI: build it or pass --cli")
        subprocess.run([cli, "synth", "--layout", layout, path],
                       check=True, stdout=subprocess.DEVNULL)
    cfg = dict(LAYOUT_CONFIGS[layout], architectures=["LlamaForCausalLM"],
               model_type="llama", max_position_embeddings=4096,
               rms_norm_eps=1e-5, rope_theta=10000.0, hidden_act="silu",
               tie_word_embeddings=False, torch_dtype="bfloat16",
               bos_token_id=1, eos_token_id=2)
    with open(config + ".tmp", "w") as f:
        json.dump(cfg, f, indent=1)
    os.rename(config + ".tmp", config)  # last: marks a finished checkpoint
    return path


def warm(path):
    buf = bytearray(64 << 20)
    for name in sorted(os.listdir(path)):
        if name.endswith(".safetensors"):
            with open(os.path.join(path, name), "rb", buffering=0) as f:
                while f.readinto(buf):
                    pass


def import_seconds_by_phase(stderr):
    """Sums -X importtime's self times (microseconds) between the child's
    @phase marks."""
    out, phase = {}, "startup"
    for line in stderr.splitlines():
        if line.startswith("@phase "):
            phase = line[7:].strip()
            continue
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|", line)
        if m:
            out[phase] = out.get(phase, 0.0) + int(m.group(1)) / 1e6
    return out


def run_child(method, path, device, pythonpath):
    warm(path)
    env = dict(os.environ, PYTHONPATH=pythonpath)
    t_spawn = time.time()
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", CHILD,
                        method, path, device],
                       capture_output=True, text=True, env=env)
    wall = time.time() - t_spawn
    if r.returncode != 0:
        tail = "\n".join(l for l in r.stderr.splitlines()
                         if not l.startswith(("import time:", "@phase")))
        raise SystemExit(f"{method} failed:\n{tail[-3000:]}")
    rec = json.loads(r.stdout.strip().splitlines()[-1])
    rec["secs"]["startup"] = rec.pop("t_start") - t_spawn
    # After the token: printing the result and the interpreter's exit.
    rec["secs"]["exit"] = t_spawn + wall - rec.pop("t_end")
    rec["imports_in"] = import_seconds_by_phase(r.stderr)
    rec["wall"] = wall
    rec["method"] = method
    return rec


def markdown(results):
    lines = [f"# Time to first token, fresh process ({results['when']})", "",
             f"Machine: {results['machine']}", "",
             f"Command: `{results['command']}`", "",
             f"Checkpoint: {results['layout']} ({results['gb']:.2f} GB, "
             f"warm page cache), device {results['device']}; transformers "
             f"{results['transformers']}, torch {results['torch']}.", "",
             "Seconds. To first token: from the process's spawn to the "
             "token (the wall time less the exit). In brackets, the part of "
             "each phase spent importing Python modules (-X importtime, self "
             "times).", "",
             "| run | method | to first token | " + " | ".join(PHASES) +
             " | token |",
             "|---|---|---|" + "---|" * len(PHASES) + "---|"]
    for i, r in enumerate(results["runs"]):
        cells = []
        for p in PHASES:
            if p not in r["secs"]:
                cells.append("-")
                continue
            imp = r["imports_in"].get(p, 0.0)
            cells.append(f"{r['secs'][p]:.3f} [{imp:.2f}]")
        ttft = r["wall"] - r["secs"]["exit"]
        lines.append(f"| {i // len(results['methods']) + 1} | {r['method']} "
                     f"| **{ttft:.2f}** | " + " | ".join(cells) +
                     f" | {r['token']} |")
    lines += ["", "Weights = time inside: " + "; ".join(
        f"{m}: {', '.join(w) or 'nothing found (all in model build)'}"
        for m, w in results["wrapped"].items())]
    notes = {r["note"] for r in results["runs"] if r["note"]}
    if notes:
        lines.append("Notes: " + "; ".join(sorted(notes)))
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layout", default="tiny", choices=sorted(LAYOUT_CONFIGS))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--methods", default="transformers,weightlift")
    ap.add_argument("--work", default=os.path.expanduser(
        "~/.cache/weightlift/ttft"))
    ap.add_argument("--cli", default=None, help="the weightlift command")
    ap.add_argument("--dir", default=None,
                    help="an existing `weightlift synth --layout LAYOUT` "
                         "output to use (config.json is added to it)")
    ap.add_argument("--md", default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    path = make_checkpoint(args.layout, args.work, args.cli, args.dir)
    gb = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path)
             if f.endswith(".safetensors")) / 1e9
    # The child imports the weightlift this checkout built (build*/python),
    # unless PYTHONPATH already names one.
    pythonpath = os.environ.get("PYTHONPATH", "")
    if not pythonpath:
        builds = sorted((os.path.join(ROOT, d, "python") for d in
                         os.listdir(ROOT) if d.startswith("build")),
                        key=lambda p: os.path.getmtime(p)
                        if os.path.exists(p) else 0, reverse=True)
        pythonpath = os.pathsep.join(b for b in builds if os.path.isdir(b))
    methods = args.methods.split(",")
    results = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "machine": f"{platform.node()}, {os.cpu_count()} cpus, "
                          f"{platform.python_version()}",
               "command": " ".join(sys.argv), "layout": args.layout,
               "gb": gb, "device": args.device, "methods": methods,
               "runs": [], "wrapped": {}}
    for rnd in range(args.runs):
        for method in methods:
            rec = run_child(method, path, args.device, pythonpath)
            results["runs"].append(rec)
            results["wrapped"][method] = rec["wrapped"]
            results["transformers"] = rec["transformers"]
            results["torch"] = rec["torch"]
            log(f"round {rnd + 1} {method:12s} to first token "
                f"{rec['wall'] - rec['secs']['exit']:.2f} s: " +
                ", ".join(f"{p} {rec['secs'][p]:.2f}" for p in PHASES
                          if p in rec["secs"]))
    md = markdown(results)
    print(md)
    if args.md:
        with open(args.md, "w") as f:
            f.write(md)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
