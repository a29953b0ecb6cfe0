"""weightlift.transformers.from_pretrained against transformers' own.

A small Llama-architecture model with random weights, saved sharded by
save_pretrained, must load through weightlift bit-identically and generate
exactly the same tokens (greedy) as AutoModelForCausalLM.from_pretrained.
transformers comes with `make deps` (python/requirements-dev.txt); the cuda
case skips without CUDA.
"""

import glob
import os

import pytest
import torch
import transformers
from conftest import HAS_CUDA, TORCH_VERSION

import weightlift
import weightlift.transformers as wtf

_V5 = int(transformers.__version__.split(".")[0]) >= 5
DEVICES = [pytest.param("cpu", id="cpu"),
           pytest.param("cuda:0", id="cuda", marks=pytest.mark.skipif(
               not HAS_CUDA, reason="no CUDA device"))]


def _save_model(path, tied):
    cfg = transformers.LlamaConfig(
        vocab_size=1024, hidden_size=256, intermediate_size=688,
        num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4,
        max_position_embeddings=256, tie_word_embeddings=tied,
        rope_theta=10000.0)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(path, max_shard_size="1MB")
    shards = glob.glob(os.path.join(path, "*.safetensors"))
    assert len(shards) > 1, "the test checkpoint must be sharded"
    assert os.path.exists(os.path.join(path, "model.safetensors.index.json"))


def _reference(path, device):
    kw = {"dtype": torch.bfloat16} if _V5 else {"torch_dtype": torch.bfloat16}
    return transformers.AutoModelForCausalLM.from_pretrained(
        path, **kw).to(device).eval()


@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied"])
@pytest.mark.parametrize("device", DEVICES)
def test_llama_same_weights_same_tokens(tmp_path, device, tied):
    path = str(tmp_path / "llama")
    _save_model(path, tied)
    ref = _reference(path, device)
    ours = wtf.from_pretrained(path, device=device, dtype=torch.bfloat16)

    assert not ours.training
    ref_sd, our_sd = ref.state_dict(), ours.state_dict()
    assert list(ref_sd) == list(our_sd)
    for k in ref_sd:
        assert our_sd[k].device == ref_sd[k].device, k
        assert our_sd[k].dtype == ref_sd[k].dtype, k
        assert torch.equal(our_sd[k], ref_sd[k]), k
    ref_bufs = dict(ref.named_buffers())
    for k, b in ours.named_buffers():  # incl. non-persistent rotary inv_freq
        assert torch.equal(b, ref_bufs[k]), k
    if tied:
        assert (ours.lm_head.weight.data_ptr()
                == ours.model.embed_tokens.weight.data_ptr())

    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 1024, (2, 16), generator=g).to(device)
    mask = torch.ones_like(ids)
    kw = dict(max_new_tokens=24, do_sample=False, attention_mask=mask,
              pad_token_id=0)
    if TORCH_VERSION < (2, 0):
        # generate()'s default probe for FSDP imports torch.distributed.fsdp,
        # which fails on Debian's torch 1.13 under Python 3.11 (a dataclass
        # with a mutable default); this single-process test never syncs.
        kw["synced_gpus"] = False
    with torch.no_grad():
        want = ref.generate(ids, **kw)
        got = ours.generate(ids, **kw)
    assert torch.equal(got, want)
    assert isinstance(ours.weightlift_report, weightlift.LoadReport)
    assert ours.weightlift_report.tensors > 0
