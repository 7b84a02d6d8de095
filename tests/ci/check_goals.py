#!/usr/bin/env python3
"""The goals the descriptors declare (dsv4h list --json), judged by ci/goals.py, against a record
judged by the hand-written judges they replaced: reports/gpu/2026-12-05-4def3bf-h100-bench.json's
114 goals come out with the same texts, values (to the record's rounding), verdicts, floors and
measurements; and a goal whose numbers are missing is left out, never judged on nothing.

usage: check_goals.py DSV4H
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "ci"))
import dsv4h_components  # noqa: E402
import goals  # noqa: E402

RECORD = os.path.join(ROOT, "reports", "gpu", "2026-12-05-4def3bf-h100-bench.json")


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def close(new, old):
    """Equal to the old value's rounding (it kept 2 to 4 decimals)."""
    decimals = len(repr(float(old)).split(".")[1]) if "." in repr(float(old)) else 0
    return abs(new - old) <= 0.5 * 10 ** -decimals + 1e-9


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    components = dsv4h_components.load(sys.argv[1])
    with open(RECORD) as f:
        record = json.load(f)
    judged = {g["goal"]: g for g in goals.judge(record, components)}
    old = record["goals"]
    if len(judged) != len(old):
        missing = sorted({g["goal"] for g in old} - set(judged))
        extra = sorted(set(judged) - {g["goal"] for g in old})
        fail(f"{len(judged)} goals judged, the record has {len(old)}; missing {missing[:5]}, extra {extra[:5]}")
    for o in old:
        n = judged[o["goal"]]
        if not close(n["value"], o["value"]) or n["met"] != o["met"]:
            fail(f"{o['goal']}: value {n['value']} met {n['met']}, the record {o['value']} met {o['met']}")
        if ("floor" in o) != ("floor" in n) or ("floor" in o and (not close(n["floor"], o["floor"]) or
                                                                  n["floor_meets_goal"] != o["floor_meets_goal"])):
            fail(f"{o['goal']}: floor {n.get('floor')} ({n.get('floor_meets_goal')}), the record {o.get('floor')} "
                 f"({o.get('floor_meets_goal')})")
        for key in ("ratio_measured", "value_by_process"):
            if key in o and n.get(key) != o[key]:
                fail(f"{o['goal']}: {key} {n.get(key)}, the record {o[key]}")
        if not n["component"] in components or not n["unit"]:
            fail(f"{o['goal']}: no component or unit: {n}")
    # Without the benchmarks, nothing is judged.
    if goals.judge(dict(record, benchmarks=[]), components):
        fail("goals judged without their benchmarks")
    print(f"goals: the descriptors' {len(judged)} goals judge {os.path.basename(RECORD)} as its own judges did")


if __name__ == "__main__":
    main()
