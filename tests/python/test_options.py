"""Options: one size parser, one knob mapping and one Validate, shared with
the C++ library and the `weightlift` command; the report states them."""

import pytest
import safetensors.torch
import torch

import weightlift
import weightlift.torch  # not imported by `import weightlift` (PEP 562)
from weightlift import _native, _options


@pytest.fixture()
def checkpoint(tmp_path):
    path = str(tmp_path / "a.safetensors")
    safetensors.torch.save_file(
        {"w": torch.arange(4096, dtype=torch.float32),
         "b": torch.ones(3, dtype=torch.bfloat16)}, path)
    return path


@pytest.mark.parametrize("text, want", [
    ("8M", 8 << 20), ("8MiB", 8 << 20), ("8mi", 8 << 20), ("8MB", 8_000_000),
    ("16k", 16 << 10), ("16KB", 16_000), ("1.5G", 3 << 29), ("4096", 4096),
    (" 2 GiB ", 2 << 30), ("0", 0),
])
def test_parse_size_is_the_cpp_parser(text, want):
    assert _options.parse_size(text) == want
    assert _native.parse_size(text) == want


@pytest.mark.parametrize("text, why", [
    ("lots", "no number"), ("8X", "unknown unit"),
    ("1.1K", "not a whole number of bytes"),
    ("99999999999999999999", "too large"),
])
def test_bad_sizes_name_the_text_and_why(text, why):
    with pytest.raises(weightlift.InvalidArgumentError) as ei:
        _options.parse_size(text)
    assert f"'{text}'" in str(ei.value) and why in str(ei.value)


def test_size_keyword_means_what_the_command_means(checkpoint):
    """"8MB" is 8,000,000 bytes in Python too (it used to be 8 MiB)."""
    for text, want in (("8MB", 8_000_000), ("8M", 8 << 20),
                       ("8MiB", 8 << 20), (1 << 20, 1 << 20)):
        out = weightlift.torch.load_file(checkpoint, chunk=text)
        assert torch.equal(out["w"], torch.arange(4096, dtype=torch.float32))
        opts = weightlift.last_report().options
        assert opts["chunk"] == want, text
        # One mapping of chunk onto the CUDA staging slot, as the command.
        assert opts["cuda_chunk"] == want, text


def test_report_states_the_options_in_effect(checkpoint):
    weightlift.torch.load_file(checkpoint, backend="pread", threads=2,
                               staging="16MiB", queue_depth=4,
                               resident_threshold=0.5)
    report = weightlift.last_report()
    opts = report.options
    assert opts["device"] == "cpu" and opts["backend"] == "pread"
    assert opts["threads"] == 2 and opts["queue_depth"] == 4
    assert opts["staging"] == 16 << 20
    assert opts["resident_threshold"] == 0.5
    assert report.as_dict()["options"] == opts
    line = next(l for l in str(report).splitlines() if "options:" in l)
    assert "backend pread" in line and "threads 2" in line
    assert "staging 16.00 MiB" in line
    assert set(opts) == set(weightlift.default_options())


def test_every_knob_name_is_accepted_and_defaults_round_trip(checkpoint):
    defaults = weightlift.default_options()
    assert tuple(defaults) == _options.OPTION_NAMES
    # Passing every default back explicitly changes nothing.
    explicit = {k: v for k, v in defaults.items()}
    weightlift.torch.load_file(checkpoint, **explicit)
    assert weightlift.last_report().options == defaults


def test_types_and_ranges_are_checked(checkpoint):
    with pytest.raises(TypeError, match="unexpected keyword"):
        weightlift.torch.load_file(checkpoint, chunk_bytes=4096)
    with pytest.raises(TypeError):
        weightlift.torch.load_file(checkpoint, threads="2")
    with pytest.raises(TypeError):
        weightlift.torch.load_file(checkpoint, chunk=True)
    # Ranges are Validate's: the message names the knob.
    with pytest.raises(weightlift.InvalidArgumentError, match="chunk_bytes"):
        weightlift.torch.load_file(checkpoint, chunk="1K")
    with pytest.raises(weightlift.InvalidArgumentError, match="queue_depth"):
        weightlift.torch.load_file(checkpoint, queue_depth=0)
    with pytest.raises(weightlift.InvalidArgumentError, match="no number"):
        weightlift.torch.load_file(checkpoint, staging="lots")


@pytest.mark.parametrize("value", ["\u00b2", "0", "5000",
                                   "99999999999999999999999", "four"])
def test_a_bad_local_world_size_variable_is_ignored_not_fatal(
        checkpoint, monkeypatch, value):
    """LOCAL_WORLD_SIZE comes from the environment, not the caller: a value
    the option would refuse (a Unicode digit, 0, above 1024, text) is left
    out with a warning naming it, and the load runs as without it."""
    monkeypatch.setenv("LOCAL_WORLD_SIZE", value)
    with pytest.warns(RuntimeWarning, match="LOCAL_WORLD_SIZE"):
        out = weightlift.torch.load_file(checkpoint)
    assert torch.equal(out["w"], torch.arange(4096, dtype=torch.float32))
    assert weightlift.last_report().options["local_world_size"] == 1


def test_co_located_ranks_share_the_cores(checkpoint, monkeypatch):
    """torchrun's LOCAL_WORLD_SIZE (processes on this host) becomes
    local_world_size when not given: the automatic thread count divides the
    cores among them and the report says so; threads= given wins."""
    want = torch.arange(4096, dtype=torch.float32)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "64")
    out = weightlift.torch.load_file(checkpoint)
    assert torch.equal(out["w"], want)
    report = weightlift.last_report()
    assert report.options["local_world_size"] == 64
    assert report.threads == 1
    assert any("shared by 64 processes loading on this host" in n
               for n in report.notes), report.notes
    weightlift.torch.load_file(checkpoint, threads=2)
    assert not any("shared by" in n for n in weightlift.last_report().notes)
    weightlift.torch.load_file(checkpoint, local_world_size=1)
    report = weightlift.last_report()
    assert report.options["local_world_size"] == 1
    assert not any("shared by" in n for n in report.notes)
    monkeypatch.delenv("LOCAL_WORLD_SIZE")
    weightlift.torch.load_file(checkpoint)
    assert weightlift.last_report().options["local_world_size"] == 1
    with pytest.raises(weightlift.InvalidArgumentError,
                       match="local_world_size"):
        weightlift.torch.load_file(checkpoint, local_world_size=0)
