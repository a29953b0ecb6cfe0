"""Build a Hugging Face transformers model and load its weights in place.

    from weightlift.transformers import from_pretrained
    model = from_pretrained("path/to/model_dir", device="cuda:0")

Steps, and why:
1. The model is built from its config with every *parameter* on the meta
   device (no memory, no random init work) while *buffers* are built for
   real on the CPU, exactly as transformers' own from_pretrained does
   (accelerate's init_empty_weights(include_buffers=False)). Non-persistent
   buffers such as rotary ``inv_freq`` are not in the checkpoint; building
   them normally gives the very values transformers computes.
2. ``to_empty(device=...)`` allocates every parameter and buffer on the
   target device (uninitialized); the CPU-built buffers are copied back in.
3. ``weightlift.load_into`` fills the parameters straight from the
   checkpoint files into their device memory (no second copy).
4. Weights are tied as transformers does (``model.tie_weights()``), the
   generation config is read when present, and the model is set to eval().
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from typing import Any, Optional

from ._load_into import load_into
from ._options import device_string


@contextlib.contextmanager
def _parameters_on_meta():
    """Registers every new nn.Parameter on the meta device; buffers and
    everything else are created normally."""
    import torch

    original = torch.nn.Module.register_parameter

    def register(module, name, param):
        original(module, name, param)
        p = module._parameters.get(name)
        if p is not None and p.device.type != "meta":
            if type(p) is torch.nn.Parameter:
                meta = torch.nn.Parameter(p.to("meta"),
                                          requires_grad=p.requires_grad)
                meta.__dict__.update(p.__dict__)
            else:  # Parameter subclasses take their attributes as kwargs
                kwargs = dict(p.__dict__, requires_grad=p.requires_grad)
                meta = type(p)(p.to("meta"), **kwargs)
            module._parameters[name] = meta

    torch.nn.Module.register_parameter = register
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = original


def _is_object_location(p: str) -> bool:
    return p.lower().startswith(("s3://", "http://", "https://"))


@contextlib.contextmanager
def _config_dir(model_dir: str):
    """MODEL_DIR itself, or for s3:// and http(s):// a temporary directory
    holding its config.json (and generation_config.json when present), which
    is what transformers needs to build the model."""
    if not _is_object_location(model_dir):
        yield model_dir
        return
    from . import _native
    from ._errors import NotFoundError

    d = tempfile.mkdtemp(prefix="weightlift-config-")
    try:
        for name in ("config.json", "generation_config.json"):
            where = model_dir.rstrip("/") + "/" + name
            try:
                data = _native.read_small_object(where, 64 << 20)
            except NotFoundError:
                if name == "config.json":
                    raise
                continue
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@contextlib.contextmanager
def _init_functions_skipped():
    """Makes torch.nn.init's in-place initializers (normal_, uniform_,
    kaiming_uniform_, ...) return their tensor untouched. The parameters
    are on the meta device and overwritten by the checkpoint anyway, and on
    torch 2.x an initializer on a meta tensor goes through torch._refs,
    whose first use imports torch._dynamo: seconds of imports for nothing
    (transformers' own from_pretrained skips the initializers too)."""
    import torch.nn.init as init

    names = [n for n in dir(init)
             if n.endswith("_") and not n.startswith("_")
             and callable(getattr(init, n))]
    saved = {n: getattr(init, n) for n in names}

    def untouched(tensor, *args, **kwargs):
        return tensor

    for n in names:
        setattr(init, n, untouched)
    try:
        yield
    finally:
        for n, fn in saved.items():
            setattr(init, n, fn)


def _checkpoint_path(model_dir: str) -> str:
    if _is_object_location(model_dir):
        return model_dir  # Checkpoint::Open finds the index or the shards
    for name in ("model.safetensors.index.json", "model.safetensors"):
        p = os.path.join(model_dir, name)
        if os.path.exists(p):
            return p
    return model_dir  # a directory of shards: Checkpoint::Open decides


def _resolve_dtype(config, dtype):
    import torch

    if dtype is None or dtype == "auto":
        dtype = getattr(config, "dtype", None) or getattr(
            config, "torch_dtype", None)
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    return dtype or torch.float32


def _build(auto_cls, config, dtype, trust_remote_code):
    import transformers
    import transformers.modeling_utils as mu

    major = int(transformers.__version__.split(".")[0])
    kw = {"dtype": dtype} if major >= 5 else {"torch_dtype": dtype}
    if trust_remote_code:
        kw["trust_remote_code"] = True
    # transformers' own switch for its _init_weights pass (what its
    # from_pretrained uses), where this version has it.
    no_init = getattr(mu, "no_init_weights", None)
    with no_init() if no_init is not None else contextlib.nullcontext():
        return auto_cls.from_config(config, **kw)


def _import_transformers():
    """transformers, or an ImportError that names the extra to install."""
    try:
        import transformers
    except ImportError as e:
        raise ImportError(
            "weightlift.transformers needs the transformers package, which "
            "is not installed: pip install 'weightlift[transformers]' (or "
            f"pip install transformers); the import said: {e}",
            name="transformers") from e
    return transformers


def from_pretrained(model_dir: Any, device: Any = "cuda:0",
                    dtype: Optional[Any] = None, *, auto_class=None,
                    strict: bool = True, progress: bool = False,
                    trust_remote_code: bool = False, **options):
    """Returns the model of MODEL_DIR (a local directory saved with
    save_pretrained), on DEVICE, in DTYPE (default: the config's dtype, else
    float32), weights loaded by weightlift, tied, in eval() mode.

    AUTO_CLASS defaults to AutoModelForCausalLM. Load options (backend,
    threads, ...) are passed to weightlift.load_into; the LoadReport is
    available as ``weightlift.last_report()`` and ``model.weightlift_report``.
    """
    _import_transformers()  # says how to install it when absent

    model_dir = os.fspath(model_dir)
    with _config_dir(model_dir) as config_dir:
        return _from_pretrained(model_dir, config_dir, device, dtype,
                                auto_class, strict, progress,
                                trust_remote_code, options)


def _from_pretrained(model_dir, config_dir, device, dtype, auto_class, strict,
                     progress, trust_remote_code, options):
    transformers = _import_transformers()
    import torch

    dev = device_string(device)
    auto_cls = auto_class or transformers.AutoModelForCausalLM
    config = transformers.AutoConfig.from_pretrained(
        config_dir, trust_remote_code=trust_remote_code)
    dtype = _resolve_dtype(config, dtype)

    with _parameters_on_meta(), _init_functions_skipped():
        model = _build(auto_cls, config, dtype, trust_remote_code)
    cpu_buffers = {name: buf.detach().clone()
                   for name, buf in model.named_buffers()
                   if buf is not None and buf.device.type != "meta"}

    model.to_empty(device=dev)
    with torch.no_grad():
        for name, buf in model.named_buffers():
            src = cpu_buffers.get(name)
            if src is not None:
                buf.copy_(src.to(buf.dtype))

    report = load_into(model, _checkpoint_path(model_dir), strict=False,
                       progress=progress, **options)
    if hasattr(model, "tie_weights"):
        model.tie_weights()
    # After tying, a name whose memory is a loaded tensor's is satisfied.
    state = model.state_dict()
    loaded = {t.data_ptr() for n, t in state.items()
              if n not in report.missing_keys}
    ignore = getattr(model, "_keys_to_ignore_on_load_missing", None) or []
    missing = sorted(n for n in report.missing_keys
                     if n in state and state[n].data_ptr() not in loaded
                     and not any(re.search(p, n) for p in ignore))
    if strict and (missing or report.unexpected_keys):
        from ._errors import InvalidArgumentError
        raise InvalidArgumentError(
            f"from_pretrained {model_dir}: checkpoint and model differ: "
            f"missing {missing[:10]}, unexpected "
            f"{report.unexpected_keys[:10]}", code="InvalidArgument")
    report.missing_keys = missing

    try:
        gen = transformers.GenerationConfig.from_pretrained(config_dir)
        model.generation_config = gen
    except (OSError, ValueError):
        pass
    model.eval()
    model.weightlift_report = report
    return model
