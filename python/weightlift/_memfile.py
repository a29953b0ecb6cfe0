"""A path for bytes held in memory (``load(bytes)``): a temporary file on
tmpfs (/dev/shm) where there is one, else in the default temp directory.
The loader copies the tensors out before the file is removed. (A memfd seen
through /proc/self/fd does not work: Checkpoint::Open resolves the path.)"""

from __future__ import annotations

import contextlib
import os
import tempfile


@contextlib.contextmanager
def bytes_path(data: bytes):
    view = memoryview(data).cast("B")
    shm = "/dev/shm"
    where = shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None
    fd, path = tempfile.mkstemp(prefix="weightlift-", suffix=".safetensors",
                                dir=where)
    try:
        done = 0
        while done < len(view):
            done += os.write(fd, view[done:done + (1 << 30)])
        os.close(fd)
        fd = -1
        yield path
    finally:
        if fd >= 0:
            os.close(fd)
        os.unlink(path)
