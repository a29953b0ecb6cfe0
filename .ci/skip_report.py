#!/usr/bin/env python3
"""Prints every skipped test of a `make test` run with its reason, and fails
when a skip is not one this machine cannot fix.

    skip_report.py CTEST_JUNIT.xml PYTEST_JUNIT.xml

Inputs are the JUnit files of `ctest --output-junit` and `pytest
--junitxml`. The rule (the team's): a test may skip only for a reason that
cannot be fixed on the machine that runs it, such as the absence of a GPU. A
dependency that `make deps` installs is never such a reason; those tests fail
instead. ALLOWED below lists the accepted reasons; a skip whose reason
matches none of them makes this script exit 1, so a new kind of skip is a
decision made in review, not a silent loss of coverage.
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET

# (pattern searched in the reason, why this machine cannot fix it)
ALLOWED = [
    (r"CUDA device|CUDA driver|cudaErrorNoDevice|no GPU",
     "no GPU on the CI and development machines"),
    (r"needs torch>=|torch has no float|float8 needs torch",
     "Debian's torch 1.13 (python3-torch) predates the dtype; the GPU "
     "machine's torch 2.x runs these tests"),
]


def gtest_reason(output: str) -> str:
    """The message after gtest's 'Skipped' line, or unittest's skip text."""
    m = re.search(r": Skipped\n(.*?)\n\[  SKIPPED \]", output, re.S)
    if m:
        return " ".join(m.group(1).split()) or "(no reason given)"
    reasons = re.findall(r"skipped '(.*?)'", output)
    if reasons:
        return "; ".join(sorted(set(reasons)))
    tail = [l for l in output.strip().splitlines() if l.strip()]
    return tail[-1].strip() if tail else "(no output)"


def ctest_skips(path: str):
    for case in ET.parse(path).getroot().iter("testcase"):
        # A gtest DISABLED_ case is not a skipped test: it is an entry point
        # that another test runs in a child process on purpose (for example
        # CudaLoaderChild.PinnedOomChild under a lowered RLIMIT_AS).
        if case.get("status") != "notrun":
            continue
        out = case.findtext("system-out") or ""
        yield f"ctest {case.get('name')}", gtest_reason(out)


def pytest_skips(path: str):
    for case in ET.parse(path).getroot().iter("testcase"):
        sk = case.find("skipped")
        if sk is None:
            continue
        reason = sk.get("message") or sk.text or "(no reason given)"
        reason = re.sub(r"^Skipped: ", "", reason)
        name = f"{case.get('classname')}.{case.get('name')}"
        yield f"pytest {name}", reason


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    skips = list(ctest_skips(argv[1])) + list(pytest_skips(argv[2]))
    by_reason: dict[str, list[str]] = {}
    for name, reason in skips:
        by_reason.setdefault(reason, []).append(name)
    bad = []
    print(f"\n== skipped tests: {len(skips)} "
          f"(ctest and pytest, {len(by_reason)} reasons)")
    for reason, names in sorted(by_reason.items(), key=lambda kv: -len(kv[1])):
        why = next((w for p, w in ALLOWED if re.search(p, reason)), None)
        print(f"{len(names):5d}  {reason}")
        print(f"       accepted: {why}" if why else
              "       NOT ACCEPTED: fixable here, or an unknown reason")
        if why is None:
            bad.append(reason)
            for n in names:
                print(f"         {n}")
    if bad:
        print(f"skip_report: {len(bad)} reason(s) of skipping are not ones "
              "this machine cannot fix (see .ci/skip_report.py)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
