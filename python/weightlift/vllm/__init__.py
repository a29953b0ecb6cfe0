"""weightlift as a vLLM model loader: ``vllm serve MODEL --load-format
weightlift``.

Installed with ``pip install weightlift[vllm]``; vLLM finds it through the
``vllm.general_plugins`` entry point (pyproject.toml), which calls
:func:`register` in every vLLM process (engine and workers) before a model
is loaded. weightlift itself never imports vLLM: only this subpackage does,
and only when vLLM calls it.

Options: ``--model-loader-extra-config '{"backend": "auto", ...}'``, see
:mod:`weightlift.vllm.options` and docs/vllm.md.
"""

from __future__ import annotations

LOAD_FORMAT = "weightlift"


def register() -> None:
    """Registers load format ``weightlift`` with vLLM's model-loader
    registry. Idempotent: vLLM may load its plugins more than once per
    process."""
    from vllm.model_executor.model_loader import register_model_loader

    from .loader import WeightliftModelLoader

    try:  # the registry's own table, where this vLLM has one
        from vllm.model_executor.model_loader import \
            _LOAD_FORMAT_TO_MODEL_LOADER as table
    except ImportError:
        table = {}
    if table.get(LOAD_FORMAT) is WeightliftModelLoader:
        return
    register_model_loader(LOAD_FORMAT)(WeightliftModelLoader)


__all__ = ["LOAD_FORMAT", "register"]
