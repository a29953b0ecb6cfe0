"""What weightlift pulls in on the way to a first load, which is what a
fresh process pays before its first token (bench/e2e_ttft.py): `import
weightlift` loads neither torch, numpy nor transformers, nor the modules of
the calls that are imported on first use; and weightlift's from_pretrained
builds the model without running torch.nn.init's initializers (on torch 2.x
each one on a meta tensor imports torch._dynamo, about 370 modules, and the
checkpoint overwrites every parameter anyway).
"""

import json
import subprocess
import sys

import torch
import transformers

import weightlift.transformers as wtf

# Imported on first use (PEP 562 __getattr__, or inside the call).
LAZY = ["weightlift._iter", "weightlift._load_into", "weightlift._load_model",
        "weightlift._safe_open", "weightlift._stream", "weightlift._tp",
        "weightlift._group", "weightlift.transformers"]
HEAVY = ["torch", "numpy", "transformers"]


def _modules_after(code):
    out = subprocess.run(
        [sys.executable, "-c",
         code + "\nimport json, sys; print(json.dumps(sorted(sys.modules)))"],
        check=True, capture_output=True, text=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_import_weightlift_loads_only_its_core():
    loaded = _modules_after("import weightlift")
    assert "weightlift" in loaded and "weightlift._native" in loaded
    unexpected = [m for m in HEAVY + LAZY if m in loaded]
    assert unexpected == [], f"`import weightlift` imported {unexpected}"


def test_a_lazy_name_imports_its_module_on_first_use():
    loaded = _modules_after("import weightlift\nweightlift.iter_tensors")
    assert "weightlift._iter" in loaded
    assert "weightlift._tp" not in loaded


def test_from_pretrained_runs_no_initializer(tmp_path):
    cfg = transformers.LlamaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=64)
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(cfg).save_pretrained(str(tmp_path))

    init = torch.nn.init
    names = [n for n in ("normal_", "uniform_", "zeros_", "ones_",
                         "trunc_normal_", "kaiming_uniform_",
                         "xavier_uniform_") if hasattr(init, n)]
    calls = []
    originals = {n: getattr(init, n) for n in names}

    def counting(name):
        def f(tensor, *args, **kwargs):
            calls.append(name)
            return originals[name](tensor, *args, **kwargs)
        return f

    counters = {n: counting(n) for n in names}
    try:
        for n in names:
            setattr(init, n, counters[n])
        # The counters do count: building the model plainly calls them.
        transformers.LlamaForCausalLM(cfg)
        assert calls, "building a Llama model ran no initializer"
        calls.clear()
        model = wtf.from_pretrained(str(tmp_path), device="cpu")
        assert calls == [], f"from_pretrained ran {sorted(set(calls))}"
        # ... and left torch.nn.init as it found it.
        assert {n: getattr(init, n) for n in names} == counters
        # The weights are the checkpoint's, not an initializer's.
        assert torch.equal(model.lm_head.weight.float(),
                           transformers.LlamaForCausalLM.from_pretrained(
                               str(tmp_path)).lm_head.weight.float())
    finally:
        for n in names:
            setattr(init, n, originals[n])
