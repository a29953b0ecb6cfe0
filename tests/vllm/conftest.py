"""The vLLM plugin's tests run in `make test-vllm`'s venv: the real vllm
from PyPI and weightlift installed by pip (not a build tree). vLLM's CUDA
wheel runs on its CPU platform when told to (no GPU here)."""

import os
import sys

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
