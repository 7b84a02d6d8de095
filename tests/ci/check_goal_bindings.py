#!/usr/bin/env python3
"""Every goal of every descriptor binds to a benchmark: each name a goal gives (its benchmark or
match, over, empty, floors, also) matches a benchmark that its component's bench binary registers
(`--benchmark_list_tests`, which needs no GPU) and that the component's bench filter keeps. A goal
naming no such benchmark is never judged (ci/goals.py skips what a record lacks), so it would
pass silently (ci/goals.py's unbound() says which).

usage: check_goal_bindings.py DSV4H BENCH_DIR   (BENCH_DIR: where the bench_* binaries are)
"""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "ci"))
import dsv4h_components  # noqa: E402
import goals  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    components = dsv4h_components.load_goal_owners(sys.argv[1])  # the model's goals too
    names_by_binary = {}
    for binary in sorted({c["bench"]["binary"] for c in components.values() if c.get("bench", {}).get("binary")}):
        path = os.path.join(sys.argv[2], binary)
        if not os.path.exists(path):
            continue  # unbound() names the goals of a binary that is not there
        proc = subprocess.run([path, "--benchmark_list_tests=true"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
        if proc.returncode != 0:
            sys.exit(f"FAIL: {binary} --benchmark_list_tests exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
        names_by_binary[binary] = [line.strip() for line in proc.stdout.splitlines() if line.startswith("BM_")]
    failures = goals.unbound(components, names_by_binary)
    for failure in failures:
        print("FAIL: " + failure)
    if failures:
        sys.exit(1)
    count = sum(len(c.get("goals", [])) for c in components.values())
    print(f"goals: all {count} goals of the descriptors bind to benchmarks of {len(names_by_binary)} binaries")


if __name__ == "__main__":
    main()
