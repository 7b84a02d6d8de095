#!/usr/bin/env python3
"""Runs one gtest binary for ctest and turns its result into ctest's terms.

Exit 77 (ctest: skipped) only when no test ran to a verdict and at least one was skipped, e.g. a
GPU binary on a machine without a GPU. Any failure exits non-zero, and a binary where some tests
pass and some skip passes with the skips printed: a skip never hides a failure (ctest's
SKIP_REGULAR_EXPRESSION would mark the whole binary skipped, failures included).
"""
import json
import os
import subprocess
import sys
import tempfile


def main():
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "gtest.json")
        code = subprocess.call([binary, f"--gtest_output=json:{out}"] + sys.argv[2:])
        if code != 0 or not os.path.exists(out):
            return code or 1
        with open(out) as f:
            report = json.load(f)
    tests = [t for suite in report["testsuites"] for t in suite["testsuite"]]
    skipped = sum(t.get("result") == "SKIPPED" for t in tests)
    if tests and skipped == len(tests):
        print(f"[  SKIPPED ] all {skipped} tests of {os.path.basename(binary)} skipped (see the reasons above)")
        return 77
    return 0


if __name__ == "__main__":
    sys.exit(main())
