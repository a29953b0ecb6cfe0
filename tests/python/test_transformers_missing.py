"""Without transformers, weightlift.transformers.from_pretrained says which
extra to install (pip install 'weightlift[transformers]'), and the extra
exists in pyproject.toml."""

import os
import subprocess
import sys

from conftest import ROOT

# sys.modules["transformers"] = None makes `import transformers` raise
# ImportError, exactly as on a machine where it is not installed.
HIDE_AND_CALL = """
import sys
sys.modules["transformers"] = None
import weightlift.transformers as wtf
try:
    wtf.from_pretrained(sys.argv[1], device="cpu")
except ImportError as e:
    print(type(e).__name__, e.name)
    print(e)
else:
    print("no error")
"""


def test_from_pretrained_names_the_extra(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", HIDE_AND_CALL, str(tmp_path)],
        capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert proc.returncode == 0, proc.stderr
    kind, message = proc.stdout.split("\n", 1)
    assert kind == "ImportError transformers"
    assert "pip install 'weightlift[transformers]'" in message


def test_pyproject_declares_the_extra():
    import tomllib  # Python 3.11+ (the project venv's)
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    assert "transformers" in extras["transformers"]
    assert "torch" in extras["transformers"]
