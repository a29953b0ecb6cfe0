"""Exception classes: one per C++ StatusCode, each also a familiar builtin.

Every exception raised by the C++ core carries the C++ Status message
unchanged, plus ``.code`` (the StatusCode name, e.g. ``"Corruption"``) and
``.rule`` (for format violations, the FormatError name such as
``"range_overlap"``; otherwise ``None``). Format errors, missing tensors,
invalid arguments (framework=, device=, backend=, a closed handle) and
unrepresentable dtypes are also ``safetensors.SafetensorError`` (when that
package is installed), as safetensors raises them.
"""

from __future__ import annotations

try:
    # Code written for safetensors catches its SafetensorError; the format
    # and missing-tensor errors below derive from it too, so that code keeps
    # working when the import is switched to weightlift.
    from safetensors import SafetensorError
except ImportError:  # safetensors not installed: a stand-in of the same name
    class SafetensorError(Exception):
        """Stands in for safetensors.SafetensorError (not installed)."""


class WeightliftError(Exception):
    """Base class of every weightlift error."""

    code: str = "Unknown"

    def __init__(self, message: str = "", *, code: str | None = None,
                 rule: str | None = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.rule = rule

    def __str__(self) -> str:
        return self.message


class InvalidArgumentError(WeightliftError, ValueError, SafetensorError):
    """The caller asked for something impossible (bad option, bad target).
    A SafetensorError too: safetensors raises that for an invalid framework,
    device or backend and for a handle used after close."""

    code = "InvalidArgument"


class FormatError(WeightliftError, ValueError, SafetensorError):
    """The bytes break the safetensors format; ``.rule`` names the rule."""

    code = "Corruption"


class WeightliftIOError(WeightliftError, OSError):
    """A system call failed or came back short."""

    code = "IoError"

    def __init__(self, message: str = "", *, code: str | None = None,
                 rule: str | None = None):
        # OSError(msg) alone keeps errno None and str() == msg.
        WeightliftError.__init__(self, message, code=code, rule=rule)

    def __str__(self) -> str:
        return self.message


class NotFoundError(WeightliftIOError, FileNotFoundError):
    """A file, shard or tensor does not exist."""

    code = "NotFound"


class TensorNotFoundError(WeightliftError, KeyError, SafetensorError):
    """A tensor name asked of an open checkpoint is not in it."""

    code = "NotFound"

    def __str__(self) -> str:  # KeyError would repr() the message
        return self.message


class UnsupportedError(WeightliftError, NotImplementedError):
    """A backend or feature is unavailable on this build or machine."""

    code = "Unsupported"


class UnsupportedDtypeError(UnsupportedError, SafetensorError,
                            AttributeError, TypeError):
    """A tensor's dtype has no type in the requested framework (F6 anywhere;
    F4 / F8 in numpy, BF16 there until ml_dtypes is imported; U16.. or F8
    in an old torch).

    safetensors raises SafetensorError ("Dtype not understood") for F6,
    AttributeError where the framework module lacks the type and TypeError
    for numpy's missing bfloat16; this class is each of them, so code that
    catches what safetensors raises keeps catching it."""

    code = "Unsupported"


class UnsupportedDtypeKeyError(UnsupportedDtypeError, KeyError):
    """weightlift.numpy.load(bytes) of a dtype outside numpy's own types:
    safetensors.numpy.load looks dtypes up in a table of those and raises
    KeyError (BF16 too, ml_dtypes or not); this is that KeyError as well."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return self.message


class ResourceExhaustedError(WeightliftError, MemoryError):
    """Out of host or device memory, or a limit was hit."""

    code = "ResourceExhausted"


class CudaError(WeightliftError, RuntimeError):
    """The CUDA runtime or driver failed."""

    code = "CudaError"


class CancelledError(WeightliftError):
    """Stopped because another part of the load failed."""

    code = "Cancelled"


class InternalError(WeightliftError, RuntimeError):
    """A bug in weightlift."""

    code = "Internal"


_BY_CODE = {
    "InvalidArgument": InvalidArgumentError,
    "NotFound": NotFoundError,
    "Corruption": FormatError,
    "IoError": WeightliftIOError,
    "Unsupported": UnsupportedError,
    "ResourceExhausted": ResourceExhaustedError,
    "CudaError": CudaError,
    "Cancelled": CancelledError,
    "Internal": InternalError,
}


def from_status(code: str, rule: str | None, message: str) -> WeightliftError:
    """Builds the exception for a C++ Status (called by the native module)."""
    cls = _BY_CODE.get(code, WeightliftError)
    return cls(message, code=code, rule=rule)
