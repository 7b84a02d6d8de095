#!/usr/bin/env python3
"""ci/gpu-suite's perturb phase without a GPU, on stand-in binaries: the perturbed real kernels' runs
land in the record's tests, and a race mutant leaves a verdict for each of its checks (plain runs,
racecheck of the plain build, perturbed runs), which gpu-report.py merge counts.

usage: check_perturb_phase.py DSV4H
"""
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from check_mutant_verdicts import fail, fake  # noqa: E402

# compute-sanitizer as racecheck answers a missing barrier: its arguments, a hazard, exit 3.
FAKE_SANITIZER = """#!/bin/sh
echo "sanitizer args: $*"
echo "========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)"
exit 3
"""
RUNS = 2


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory() as work:
        repo = os.path.join(work, "repo")
        shutil.copytree(os.path.join(ROOT, "ci"), os.path.join(repo, "ci"))
        dist = os.path.join(repo, "build", "gpu-dist")
        os.makedirs(dist)
        shutil.copy(sys.argv[1], os.path.join(dist, "dsv4h"))  # what the suite reads the components from
        fake(os.path.join(dist, "test_gpu_perturb"), "pass")
        fake(os.path.join(dist, "test_gpu_race_meta_missing_barrier"), "pass")
        fake(os.path.join(dist, "test_gpu_race_meta_missing_barrier_perturb"), "mismatch")
        tools = os.path.join(work, "bin")
        os.makedirs(tools)
        sanitizer = os.path.join(tools, "compute-sanitizer")
        with open(sanitizer, "w") as f:
            f.write(FAKE_SANITIZER)
        os.chmod(sanitizer, os.stat(sanitizer).st_mode | stat.S_IXUSR)
        out = os.path.join(work, "out")
        env = dict(os.environ, OUT=out, DSV4H_PERTURB_RUNS=str(RUNS), CUDA_VISIBLE_DEVICES="0", PATH=tools + os.pathsep + os.environ["PATH"])
        proc = subprocess.run(["bash", os.path.join(repo, "ci", "gpu-suite"), "perturb"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, env=env)
        if proc.returncode != 0 or not os.path.exists(os.path.join(out, "results.json")):
            fail(f"gpu-suite perturb exited {proc.returncode} without results.json: {proc.stdout}")
        with open(os.path.join(out, "results.json")) as f:
            part = json.load(f)
        binaries = sorted({t["binary"] for t in part["tests"]})
        if binaries != [f"test_gpu_perturb.run{r}" for r in range(1, RUNS + 1)] or any(t["status"] != "pass" for t in part["tests"]):
            fail(f"each run of the perturbed tests must be in the record's tests: {part['tests']}")
        got = sorted((v["mutant"], v["check"], v["run"], v["status"]) for v in part["perturb"])
        want = sorted([("meta_missing_barrier", "racecheck", 1, "caught")] +
                      [("meta_missing_barrier", check, r, status) for r in range(1, RUNS + 1)
                       for check, status in (("plain", "survived"), ("perturbed", "caught"))])
        if got != want:
            fail(f"race mutant verdicts {got}, expected {want}")
        racecheck = next(v for v in part["perturb"] if v["check"] == "racecheck")
        if racecheck["hazards"] != 2 or racecheck["exit"] != 3:
            fail(f"racecheck's verdict must carry its hazards and exit: {racecheck}")
        with open(os.path.join(out, "suite.log")) as f:
            log = f.read()
        if "test_gpu_race_meta_missing_barrier --gtest_filter=*attn_metadata*" not in log:
            fail("racecheck must run the plain build on the metadata checks: " + log)
        merged = subprocess.run([sys.executable, os.path.join(ROOT, "ci", "gpu-report.py"), "merge",
                                 os.path.join(out, "results.json"), "--out", os.path.join(work, "record.json"),
                                 "--commit", "0" * 40], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in (f"plain     caught in 0 of {RUNS} runs", "racecheck caught in 1 of 1 runs",
                     f"perturbed caught in {RUNS} of {RUNS} runs"):
            if merged.returncode != 0 or line not in merged.stdout:
                fail(f"gpu-report merge must print '{line}': {merged.stdout}")
    print("gpu-suite perturb: perturbed runs in the tests, a verdict per race mutant check, merged and printed")


if __name__ == "__main__":
    main()
