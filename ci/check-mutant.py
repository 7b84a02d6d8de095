#!/usr/bin/env python3
"""Runs a test binary linked with a mutant kernel and requires the suite to catch the mutant.

A mutant is caught when at least one test fails on a wrong result that the comparison names, or on
a graph capture that the launch sequence broke (not on another error or a crash). The `noop`
mutant (a kernel that does nothing) must fail every test that ran: no test may pass with the kernel
replaced by a no-op. Exit 0 caught, 1 survived (or crashed), 77 skipped because no GPU was found.
Every outcome writes its verdict to --json ("status": caught, survived, crashed or skipped), so a
record never lacks a mutant that ran.
Shrunk counterexamples go to $DSV4H_REGRESSION_DIR (a temporary folder unless set), never into
fixtures/regressions/ of the source tree.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

# What harness/compare.cpp writes when a result is wrong (also for the graph replay).
MISMATCH_MARK = "MISMATCH"
# A launch sequence that broke its graph capture (a host sync, e.g. the .item() of review finding
# 1): graph_replay.cpp's message names the capture, and the runtime's error is a stream-capture one
# (cudaErrorStreamCapture*, hipErrorStreamCapture*) or the end of capture failed. Another error
# inside a capture (a launch wrapper refusing its arguments) is not a catch.
CAPTURE_MARK = "graph capture of"
CAPTURE_CAUSES = ("StreamCapture", "failed at hipStreamEndCapture")


def broke_capture(failure):
    return CAPTURE_MARK in failure and any(cause in failure for cause in CAPTURE_CAUSES)


def write_verdict(path, verdict):
    if path:
        with open(path, "w") as f:
            json.dump(verdict, f, indent=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mutant", required=True)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--json", help="write the verdict here")
    parser.add_argument("--shards", type=int, default=1,
                        help="run the binary as this many gtest shards side by side (noop runs every test)")
    args = parser.parse_args()
    if args.shards < 1:
        parser.error(f"--shards must be >= 1, got {args.shards}")

    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        env.setdefault("DSV4H_REGRESSION_DIR", os.path.join(tmp, "regressions"))
        procs = []
        for i in range(args.shards):
            gtest_json = os.path.join(tmp, f"gtest.{i}.json")
            shard_env = dict(env, GTEST_TOTAL_SHARDS=str(args.shards), GTEST_SHARD_INDEX=str(i)) if args.shards > 1 else env
            log = open(os.path.join(tmp, f"log.{i}"), "w+")
            procs.append((subprocess.Popen([args.binary, f"--gtest_output=json:{gtest_json}"], env=shard_env,
                                           stdout=log, stderr=subprocess.STDOUT, text=True), gtest_json, log))
        output, reports = "", []
        for proc, gtest_json, log in procs:
            proc.wait()
            log.seek(0)
            output += log.read()
            log.close()
            if proc.returncode < 0 or not os.path.exists(gtest_json):
                print(output[-4000:])
                print(f"mutant {args.mutant}: the suite crashed (exit {proc.returncode}) instead of reporting a mismatch")
                write_verdict(args.json, {"mutant": args.mutant, "caught": False, "status": "crashed", "exit": proc.returncode})
                return 1
            with open(gtest_json) as f:
                reports.append(json.load(f))

    tests = [(suite["name"] + "." + t["name"], t) for report in reports for suite in report["testsuites"]
             for t in suite["testsuite"]]
    skipped = [name for name, t in tests if t.get("result") == "SKIPPED"]
    failed = [name for name, t in tests if t.get("failures")]
    # A catch is a wrong result the comparison names, or a capture the sequence broke; not another
    # error (a crash, a bad launch).
    mismatched = [name for name, t in tests
                  if any(MISMATCH_MARK in f.get("failure", "") or broke_capture(f.get("failure", ""))
                         for f in t.get("failures", []))]
    passed = [name for name, t in tests if name not in skipped and name not in failed]
    if "GPU test skipped: " in output and not failed:
        print(f"[  SKIPPED ] mutant {args.mutant}: no GPU found, the mutant was not exercised")
        write_verdict(args.json, {"mutant": args.mutant, "caught": False, "status": "skipped"})
        return 77
    caught = bool(mismatched) and (args.mutant != "noop" or not passed)
    write_verdict(args.json, {"mutant": args.mutant, "caught": caught, "status": "caught" if caught else "survived",
                              "tests": len(tests), "failed": len(failed), "passed": len(passed), "skipped": len(skipped),
                              "failed_tests": failed, "passed_tests": passed})
    print(f"mutant {args.mutant}: {len(failed)} of {len(tests)} tests failed, {len(passed)} passed, {len(skipped)} skipped")
    for name in failed:
        print(f"  caught by {name}")
    if not caught:
        why = ("tests passed with a no-op kernel" if mismatched else
               "tests failed, but none on a mismatch" if failed else "no test failed")
        print(f"mutant {args.mutant} SURVIVED: {why}: {', '.join(passed) or '-'}")
        return 1
    print(f"mutant {args.mutant} is caught")
    return 0


if __name__ == "__main__":
    sys.exit(main())
