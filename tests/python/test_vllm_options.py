"""The vLLM plugin's option parsing, which needs no vLLM (the plugin
itself is tested against the real vLLM by `make test-vllm`, tests/vllm)."""

import json

import pytest

import weightlift
from weightlift.vllm import options


def test_defaults_and_values():
    o = options.parse(None)
    assert o.load == {} and o.window == options.DEFAULT_WINDOW
    assert o.progress is False and o.tp_mode == "group" and o.tp_slices
    o = options.parse(json.dumps({"backend": "direct", "threads": 4,
                                  "staging": "64MiB", "gds": "off",
                                  "window": "1GiB", "progress": True,
                                  "tp_mode": "full"}))
    assert o.load == {"backend": "direct", "threads": 4, "staging": "64MiB",
                      "gds": "off"}
    assert o.window == 1 << 30 and o.progress and o.tp_mode == "full"
    # What parse accepted, weightlift's loader accepts too.
    weightlift._core.make_loader(dict(o.load, device="cpu"))


@pytest.mark.parametrize("extra, message", [
    ({"thread": 4}, r"unknown .*\['thread'\]; accepted: backend"),
    ({"threads": "four"}, "threads"),
    ({"staging": "big"}, "staging"),
    ({"gds": 3}, "gds"),
    ({"progress": "yes"}, "progress"),
    ({"tp_mode": "slices"}, "tp_mode"),
    ({"tp_slices": "yes"}, "tp_slices"),
    ({"window": "x"}, "window"),
    # Values, not just types, before vLLM builds the model: these parsed
    # and failed only inside load_weights.
    ({"threads": -1}, "threads"),
    ({"threads": 2 ** 70}, "threads"),
    ({"queue_depth": 0}, "queue_depth"),
    ({"backend": "bogus"}, "bogus"),
    ({"gds": "maybe"}, "GDS mode .maybe.*compat"),
    ({"window": 0}, "window must be at least 512"),
    ({"window": -1}, "window"),
    ({"window": True}, "window"),
    ({"window": 1.5}, "window"),
    ("{not json", "not JSON"),
    ("[1, 2]", "JSON object"),
])
def test_bad_config_is_a_clear_error(extra, message):
    with pytest.raises(ValueError, match=message):
        options.parse(extra)


def test_bad_backend_name_is_refused_when_parsed():
    # Words are checked by the C++ options (InvalidArgument) when the
    # config is parsed, before vLLM builds the model or any file is read.
    with pytest.raises(ValueError, match="floppy") as err:
        options.parse({"backend": "floppy"})
    assert isinstance(err.value.__cause__, weightlift.InvalidArgumentError)
