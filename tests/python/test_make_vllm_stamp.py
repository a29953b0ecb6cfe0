"""The Makefile's vLLM venv (`make test-vllm`) is remade only when the
requirements' content changes, not their mtime: a fresh clone's
requirements file is newer than any stamp made before it, and that made
every CI run re-run pip and need the registry. Checked with `make -n`
(prints the commands, runs none) on a temporary venv path and a copy of
the requirements."""

import hashlib
import os
import shutil
import subprocess
import time

import pytest

from conftest import ROOT

REQS = os.path.join(ROOT, "python", "requirements-vllm.txt")


def _dry_run(venv, reqs):
    if shutil.which("make") is None or shutil.which("sha256sum") is None:
        pytest.fail("make and sha256sum are needed (make deps installs them)")
    out = subprocess.run(
        ["make", "-n", "-C", ROOT, "test-vllm", f"VLLM_VENV={venv}",
         f"VLLM_REQUIREMENTS={reqs}"],
        capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _makes_venv(text, reqs):
    return f"pip install -q -r {reqs}" in text


def test_venv_is_remade_only_when_the_requirements_content_changes(tmp_path):
    venv, reqs = tmp_path / "venv", tmp_path / "requirements-vllm.txt"
    shutil.copy(REQS, reqs)
    # No venv yet: it is made.
    assert _makes_venv(_dry_run(venv, reqs), reqs)
    # A venv made from these requirements (its stamp names their hash) ...
    venv.mkdir()
    digest = hashlib.sha256(reqs.read_bytes()).hexdigest()[:16]
    stamp = venv / f".stamp-{digest}"
    stamp.touch()
    old = time.time() - 3600
    os.utime(stamp, (old, old))
    # ... is kept when the file is newer, as in a fresh clone ...
    assert not _makes_venv(_dry_run(venv, reqs), reqs)
    # ... and remade when the content differs.
    reqs.write_text(reqs.read_text() + "# changed\n")
    assert _makes_venv(_dry_run(venv, reqs), reqs)
