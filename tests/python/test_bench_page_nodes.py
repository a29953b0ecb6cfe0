"""bench/page_nodes.py: which NUMA nodes hold a file's cached pages (the
device probes record it beside the tensor-parallel rates)."""

import os
import re
import subprocess
import sys

from conftest import ROOT

SCRIPT = os.path.join(ROOT, "bench", "page_nodes.py")
PAGE = os.sysconf("SC_PAGE_SIZE")


def _run(*paths):
    return subprocess.run([sys.executable, SCRIPT, *paths],
                          capture_output=True, text=True, timeout=60)


def test_counts_every_page_of_each_file_once(tmp_path):
    sizes = {"a.bin": 3 * PAGE + 17, "b.bin": 40 * PAGE}
    for name, size in sizes.items():
        (tmp_path / name).write_bytes(os.urandom(size))
    r = _run(*(str(tmp_path / n) for n in sizes))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2
    for line, (name, size) in zip(lines, sizes.items()):
        m = re.fullmatch(r"page nodes (\S+): ((?:N\d+=[\d.]+% ?)+) "
                         r"\((\d+) pages\)", line)
        assert m, line
        assert m.group(1).endswith(name)
        # Every page of the file, each counted on exactly one node.
        assert int(m.group(3)) == -(-size // PAGE)
        shares = [float(s) for s in re.findall(r"=([\d.]+)%", m.group(2))]
        assert abs(sum(shares) - 100.0) < 0.5


def test_without_files_says_how_to_run_it():
    r = _run()
    assert r.returncode == 2
    assert "NUMA nodes" in r.stderr


def test_a_missing_file_fails_naming_it(tmp_path):
    r = _run(str(tmp_path / "absent.safetensors"))
    assert r.returncode != 0
    assert "absent.safetensors" in r.stderr
