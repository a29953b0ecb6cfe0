"""weightlift.torch.load_model against safetensors.torch.load_model: two
copies of the same model, the same file, the same results (parameters bit
for bit, missing/unexpected with their types) or the same exception class
and message."""

import copy

import pytest
import safetensors
import safetensors.torch
import torch

import weightlift
import weightlift.torch


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(5, 4)
        self.head = torch.nn.Linear(4, 5, bias=False)
        self.head.weight = self.emb.weight
        self.norm = torch.nn.LayerNorm(4)
        self.register_buffer("scale", torch.arange(4.0))


def _params(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _run_both(make_model, path, **kw):
    """load_model on two equal models; returns (ours, theirs) as
    ((missing, unexpected) or exception, the model's state after)."""
    base = make_model()
    out = []
    for fn in (weightlift.torch.load_model, safetensors.torch.load_model):
        m = copy.deepcopy(base)
        try:
            res = fn(m, path, **kw)
        except Exception as e:  # noqa: BLE001 - compared below
            res = e
        out.append((res, _params(m), m))
    return out


def _assert_same_state(a, b):
    assert list(a) == list(b)
    for k in a:
        assert a[k].dtype == b[k].dtype, k
        assert torch.equal(a[k].contiguous().view(-1).view(torch.uint8),
                           b[k].contiguous().view(-1).view(torch.uint8)), k


def _assert_same_result(ours, theirs):
    (got, got_state, _), (want, want_state, _) = ours, theirs
    if isinstance(want, Exception):
        assert isinstance(got, type(want)), (got, want)
        assert str(got) == str(want)
        return
    assert not isinstance(got, Exception), got
    assert type(got) is type(want) and len(got) == 2
    assert type(got[0]) is type(want[0]) and got[0] == want[0]
    assert type(got[1]) is type(want[1]) and got[1] == want[1]
    _assert_same_state(got_state, want_state)


def _save(tensors, path):
    safetensors.torch.save_file(tensors, str(path))
    return str(path)


@pytest.mark.parametrize("strict", [True, False])
def test_round_trip(tmp_path, strict):
    torch.manual_seed(0)
    src = Tied()
    path = str(tmp_path / "m.safetensors")
    safetensors.torch.save_model(src, path)
    ours, theirs = _run_both(Tied, path, strict=strict)
    _assert_same_result(ours, theirs)
    assert ours[0] == (set(), [])
    _assert_same_state(ours[1], _params(src))
    # Still tied after the load.
    m = ours[2]
    assert m.head.weight.data_ptr() == m.emb.weight.data_ptr()


@pytest.mark.parametrize("strict", [True, False])
def test_missing_and_unexpected(tmp_path, strict):
    torch.manual_seed(1)
    sd = {k: v.clone() for k, v in Tied().state_dict().items()
          if k not in ("norm.bias", "head.weight")}
    del sd["scale"]
    sd["bogus"] = torch.ones(2)
    sd["norm.extra"] = torch.zeros(1)
    path = _save(sd, tmp_path / "m.safetensors")
    ours, theirs = _run_both(Tied, path, strict=strict)
    _assert_same_result(ours, theirs)
    if strict:
        msg = str(ours[0])
        assert isinstance(ours[0], RuntimeError)
        assert 'Missing key(s) in state_dict: "norm.bias", "scale"' in msg
        assert 'Unexpected key(s) in state_dict: "bogus", "norm.extra"' \
            in msg
    else:
        missing, unexpected = ours[0]
        assert isinstance(missing, set)
        assert missing == {"norm.bias", "scale"}


def test_strict_refusal_writes_nothing(tmp_path):
    """An unexpected name is found before any write (safetensors writes
    first and raises after): the model keeps its values."""
    torch.manual_seed(2)
    sd = {k: torch.full_like(v, 7.0) for k, v in Tied().state_dict().items()
          if k != "head.weight"}
    sd["bogus"] = torch.ones(1)
    path = _save(sd, tmp_path / "m.safetensors")
    m = Tied()
    before = _params(m)
    with pytest.raises(RuntimeError, match='Unexpected key.*"bogus"'):
        weightlift.torch.load_model(m, path)
    _assert_same_state(_params(m), before)


@pytest.mark.parametrize("same", [True, False], ids=["equal", "differ"])
@pytest.mark.parametrize("strict", [True, False])
def test_tied_copies_in_the_file(tmp_path, same, strict):
    """A file holding both names of a tied weight: safetensors refuses it in
    strict mode (the second copy is unexpected) and otherwise reports it."""
    w = torch.randn(5, 4)
    other = w.clone() if same else torch.randn(5, 4)
    sd = {k: v.clone() for k, v in Tied().state_dict().items()}
    sd["emb.weight"], sd["head.weight"] = w, other
    path = _save(sd, tmp_path / "m.safetensors")
    ours, theirs = _run_both(Tied, path, strict=strict)
    _assert_same_result(ours, theirs)
    if strict:
        assert isinstance(ours[0], RuntimeError)
        assert 'Unexpected key(s) in state_dict: "head.weight"' in str(
            ours[0])
    else:
        assert ours[0] == (set(), ["head.weight"])


class NonContiguous(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(4, 4).t())
        self.b = torch.nn.Parameter(torch.zeros(3))


def test_non_contiguous_parameter_is_loaded(tmp_path):
    gen = torch.Generator().manual_seed(3)
    sd = {"w": torch.randn(4, 4, generator=gen),
          "b": torch.randn(3, generator=gen)}
    path = _save(sd, tmp_path / "m.safetensors")
    ours, theirs = _run_both(NonContiguous, path)
    _assert_same_result(ours, theirs)
    m = ours[2]
    assert not m.w.is_contiguous()
    assert torch.equal(m.w, sd["w"]) and torch.equal(m.b, sd["b"])


def test_bf16_file_into_fp32_module_is_cast(tmp_path):
    gen = torch.Generator().manual_seed(4)
    sd = {"weight": torch.randn(2, 3, generator=gen).bfloat16(),
          "bias": torch.randn(2, generator=gen).bfloat16()}
    path = _save(sd, tmp_path / "m.safetensors")
    ours, theirs = _run_both(lambda: torch.nn.Linear(3, 2), path)
    _assert_same_result(ours, theirs)
    m = ours[2]
    assert m.weight.dtype == torch.float32
    assert torch.equal(m.weight, sd["weight"].float())


def test_size_mismatch_is_refused_before_any_write(tmp_path):
    sd = {"weight": torch.ones(3, 3), "bias": torch.ones(2)}
    path = _save(sd, tmp_path / "m.safetensors")
    ours, theirs = _run_both(lambda: torch.nn.Linear(3, 2), path)
    _assert_same_result(ours, theirs)
    assert "size mismatch for weight" in str(ours[0])
    # safetensors copied the bias before torch raised; weightlift did not.
    assert torch.equal(theirs[2].bias.detach(), torch.ones(2))
    assert not torch.equal(ours[2].bias.detach(), torch.ones(2))


def test_missing_file(tmp_path):
    ours, theirs = _run_both(lambda: torch.nn.Linear(3, 2),
                             str(tmp_path / "nope.safetensors"))
    _assert_same_result(ours, theirs)
    assert isinstance(ours[0], FileNotFoundError)


@pytest.mark.parametrize("kw", [{"device": "foo"}, {"backend": "foo"}],
                         ids=repr)
def test_invalid_arguments(tmp_path, kw):
    path = str(tmp_path / "m.safetensors")
    safetensors.torch.save_model(torch.nn.Linear(3, 2), path)
    for p in (path, str(tmp_path / "nope")):
        ours, theirs = _run_both(lambda: torch.nn.Linear(3, 2), p, **kw)
        # The argument is checked before the file, by both; the words are
        # weightlift's (they name the accepted values).
        assert isinstance(theirs[0], safetensors.SafetensorError)
        assert isinstance(ours[0], safetensors.SafetensorError)
        assert "foo" in str(ours[0])


def test_plain_model_is_loaded_in_place(tmp_path, monkeypatch):
    """No module hooks, file dtypes and shapes as the model's: the loader
    writes into the parameters' own memory (no state dict on DEVICE, no
    load_state_dict), with safetensors' results."""
    torch.manual_seed(7)
    src = Tied()
    path = str(tmp_path / "m.safetensors")
    safetensors.torch.save_model(src, path)
    m = Tied()
    ptrs = {k: v.data_ptr() for k, v in m.state_dict().items()}

    real = torch.nn.Module.load_state_dict

    def refuse(self, *a, **kw):
        if self is m:
            raise AssertionError("load_state_dict called")
        return real(self, *a, **kw)  # e.g. weightlift asking torch's rules
    monkeypatch.setattr(torch.nn.Module, "load_state_dict", refuse)
    assert weightlift.torch.load_model(m, path) == (set(), [])
    monkeypatch.undo()
    assert {k: v.data_ptr() for k, v in m.state_dict().items()} == ptrs
    _assert_same_state(_params(m), _params(src))


class WithBatchNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.bn = torch.nn.BatchNorm1d(3)


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("drop", [None, "bn.num_batches_tracked",
                                  "bn.running_var"])
def test_module_with_its_own_load_rules(tmp_path, strict, drop):
    """BatchNorm's own _load_from_state_dict supplies num_batches_tracked
    when the file lacks it: torch decides, as in safetensors."""
    torch.manual_seed(8)
    sd = {k: v.clone() for k, v in WithBatchNorm().state_dict().items()
          if k != drop}
    path = _save(sd, tmp_path / "m.safetensors")
    ours, theirs = _run_both(WithBatchNorm, path, strict=strict)
    _assert_same_result(ours, theirs)


def test_size_mismatch_in_a_module_with_its_own_load_rules(tmp_path):
    sd = {k: v.clone() for k, v in WithBatchNorm().state_dict().items()}
    sd["lin.weight"] = torch.ones(2, 3)
    path = _save(sd, tmp_path / "m.safetensors")
    ours, theirs = _run_both(WithBatchNorm, path)
    _assert_same_result(ours, theirs)
    assert "size mismatch for lin.weight" in str(ours[0])


class WithNonPersistent(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(2)
        self.register_buffer("cache", torch.zeros(2), persistent=False)


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("extra", ["cache", "norm", "norm.bogus",
                                   "norm.weight.x", "_extra_state",
                                   "norm._extra_state"])
def test_names_torch_treats_specially(tmp_path, strict, extra):
    """Names whose fate depends on torch's rules (which changed between
    torch 1 and 2: a child module's own name, a name under a parameter), a
    non-persistent buffer's name, _extra_state: as this torch decides."""
    sd = {k: v.clone() for k, v in WithNonPersistent().state_dict().items()}
    sd[extra] = torch.ones(2)
    path = _save(sd, tmp_path / "m.safetensors")
    ours, theirs = _run_both(WithNonPersistent, path, strict=strict)
    _assert_same_result(ours, theirs)


def test_load_model_reports(tmp_path):
    path = str(tmp_path / "m.safetensors")
    safetensors.torch.save_model(torch.nn.Linear(3, 2), path)
    weightlift.torch.load_model(torch.nn.Linear(3, 2), path)
    r = weightlift.last_report()
    assert r is not None and r.tensors == 2 and r.bytes == (6 + 2) * 4


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32],
                         ids=["cast", "in-place"])
@pytest.mark.parametrize("device", ["cpu", "cuda:0"])
def test_cuda_model(tmp_path, device, dtype):
    """On a GPU: a model on cuda:0; BF16 cast into fp32 on the device (the
    file loaded to DEVICE first, as safetensors does), or F32 written
    straight into the parameters on the device."""
    gen = torch.Generator().manual_seed(6)
    sd = {"weight": torch.randn(2, 3, generator=gen).to(dtype),
          "bias": torch.randn(2, generator=gen).to(dtype)}
    path = _save(sd, tmp_path / "m.safetensors")
    ours, theirs = _run_both(lambda: torch.nn.Linear(3, 2).to("cuda:0"),
                             path, device=device)
    _assert_same_result(ours, theirs)
    assert ours[2].weight.device == torch.device("cuda:0")
