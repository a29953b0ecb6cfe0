"""`import weightlift` works in the project venv after `make`, with no
PYTHONPATH: `make` writes weightlift-build.pth into the venv's
site-packages, naming <build>/python (the compiled module next to links to
python/weightlift's sources)."""

import os
import subprocess
import sys
import sysconfig

import pytest

PTH = os.path.join(sysconfig.get_paths()["purelib"], "weightlift-build.pth")
# Set by `make test-python`: the build tree this run's `make` built.
BUILT = os.environ.get("WL_BUILD_PYTHON_DIR")


def fresh_import(code):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True,
                          text=True, env=env, cwd="/", timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()


# Outside `make test-python` (a worktree's own pytest run with a shared
# venv, the GPU machine's system python) there is no `make` to check.
@pytest.mark.skipif(not BUILT, reason="checks what `make` leaves in the "
                    "venv: runs under `make test-python`")
def test_venv_imports_weightlift_without_pythonpath():
    assert os.path.isfile(PTH), f"{PTH} missing: run `make build`"
    with open(PTH) as f:
        named = f.read().strip()
    native, pkg, loaded = fresh_import(
        "import weightlift, weightlift._native as n;"
        "print(n.__file__); print(weightlift.__file__);"
        "print(sorted(weightlift.default_options())[:1])")
    # The compiled module comes from the build tree the .pth names, and the
    # package's sources are this build's links to python/weightlift.
    assert os.path.dirname(native) == os.path.join(named, "weightlift")
    assert os.path.dirname(pkg) == os.path.join(named, "weightlift")
    assert os.path.realpath(pkg).endswith(
        os.path.join("python", "weightlift", "__init__.py"))
    assert loaded.startswith("['")  # the native module answered
    assert os.path.realpath(named) == os.path.realpath(BUILT)
