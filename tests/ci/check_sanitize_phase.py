#!/usr/bin/env python3
"""ci/gpu-suite's sanitize phase without a GPU, on stand-in binaries: test_gpu runs in gtest shards
under each tool (the whole binary in one process outran a device call under racecheck), each shard
leaves its exit and what the tool reported, and a test failing under the tool reads apart from a
finding of the tool's in the merged record.

usage: check_sanitize_phase.py DSV4H
"""
import json
import os
import stat
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from check_mutant_verdicts import fail, suite_checkout  # noqa: E402

# compute-sanitizer --tool T [--kernel-name-exclude F] --error-exitcode N BINARY ARGS...: the
# binary's exit, and the tool's summary line as each tool prints it; each run's tool, kernel
# filter and DSV4H_GEMM appended to $SANITIZER_LOG.
FAKE_SANITIZER = """#!/bin/sh
tool=$2
shift 2
exclude=none
if [ "$1" = --kernel-name-exclude ]; then exclude=$2; shift 2; fi
shift 2
echo "$tool $exclude ${DSV4H_GEMM:-unset}" >>"$SANITIZER_LOG"
"$@"
rc=$?
if [ "$tool" = racecheck ]; then echo '========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)'
else echo '========= ERROR SUMMARY: 0 errors'; fi
exit $rc
"""
# A gtest binary whose shard 1 of test_gpu has a failing test; the others pass; it lists 3 tests.
FAKE_TEST = """#!/bin/sh
case "$*" in *--gtest_list_tests*) printf 'Suite.\\n  a\\n  b\\n  c\\n'; exit 0;; esac
if [ "$(basename "$0")" = test_gpu ] && [ "$GTEST_SHARD_INDEX" = 1 ]; then
  echo '[  FAILED  ] Fixtures/ComponentGolden.GoldenOutputs/c4_decode_step'; exit 1
fi
echo "shard $GTEST_SHARD_INDEX of $GTEST_TOTAL_SHARDS"
echo '[  PASSED  ] 2 tests.'
"""


def executable(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory() as work:
        repo, dist = suite_checkout(work, "repo", sys.argv[1])
        for binary in ("test_gpu", "test_gpu_graph"):
            executable(os.path.join(dist, binary), FAKE_TEST)
        tools = os.path.join(work, "bin")
        os.makedirs(tools)
        executable(os.path.join(tools, "compute-sanitizer"), FAKE_SANITIZER)
        out = os.path.join(work, "out")
        log = os.path.join(work, "sanitizer.log")
        env = dict(os.environ, OUT=out, CUDA_VISIBLE_DEVICES="0", PATH=tools + os.pathsep + os.environ["PATH"],
                   SANITIZER_LOG=log)
        proc = subprocess.run(["bash", os.path.join(repo, "ci", "gpu-suite"), "sanitize"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, env=env)
        if proc.returncode != 1 or not os.path.exists(os.path.join(out, "results.json")):
            fail(f"gpu-suite sanitize must fail on the failing shard and still write results.json, exit {proc.returncode}: {proc.stdout}")
        with open(os.path.join(out, "results.json")) as f:
            runs = json.load(f)["sanitizer"]
        shards = sorted((r["tool"], r["binary"], r["shard"]) for r in runs)
        want = sorted([("memcheck", "test_gpu", f"{i}/4") for i in range(4)] +
                      [("racecheck", "test_gpu", f"{i}/12") for i in range(12)] +
                      [(tool, "test_gpu_graph", "0/1") for tool in ("memcheck", "racecheck")])
        if shards != want:
            fail(f"sanitizer runs {shards}, expected {want}")
        # racecheck leaves cuBLAS's GEMM kernels out and runs the model's projections through its
        # plain GEMM (gpu-suite says why); memcheck checks cuBLAS's kernels too.
        with open(log) as f:
            filters = sorted(set(f.read().split("\n")) - {""})
        if filters != ["memcheck none unset", "racecheck kns=nvjet,kns=xmma,kns=gemv,kns=splitKreduce plain"]:
            fail(f"racecheck must exclude cuBLAS's kernels with DSV4H_GEMM=plain, memcheck neither: {filters}")
        # No GPU source of ours names anything with an excluded substring: racecheck would skip
        # such a kernel without a word.
        excluded = [f[len("kns="):] for f in filters[1].split(" ")[1].split(",")]
        for folder in ("kernels", "model/gpu", "tests/bench/floors", "tests/gpu", "harness/gpu"):
            for base, _, files in os.walk(os.path.join(ROOT, folder)):
                for name in files:
                    with open(os.path.join(base, name), errors="replace") as f:
                        text = f.read()
                    hit = [e for e in excluded if e in text]
                    if hit:
                        fail(f"{os.path.join(folder, name)} holds {hit}, which racecheck's cuBLAS exclusion would skip")
        failed = sorted((r["tool"], r["shard"], r["exit"], r["errors"]) for r in runs if r["exit"] != 0)
        if failed != [("memcheck", "1/4", 1, 0), ("racecheck", "1/12", 1, 0)] or any(r["errors"] != 0 for r in runs):
            fail(f"only shard 1 of test_gpu fails, with no sanitizer error: {failed}")
        merged = subprocess.run([sys.executable, os.path.join(ROOT, "ci", "gpu-report.py"), "merge",
                                 os.path.join(out, "results.json"), "--out", os.path.join(work, "record.json"),
                                 "--commit", "0" * 40], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = "FAILED: compute-sanitizer memcheck test_gpu shard 1/4: exit 1 (0 sanitizer errors, a test failed)"
        if merged.returncode != 1 or line not in merged.stdout:
            fail(f"gpu-report merge must fail naming '{line}': {merged.stdout}")
        # DSV4H_COMPONENTS=sparse_attention: test_gpu filtered to its tests (the model's cases still
        # left out), in no more shards than the 3 tests the filter lists; no graph run (filtered_silu_mul's).
        out = os.path.join(work, "out_selected")
        subprocess.run(["bash", os.path.join(repo, "ci", "gpu-suite"), "sanitize"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, env=dict(env, OUT=out, DSV4H_COMPONENTS="sparse_attention"))
        with open(os.path.join(out, "results.json")) as f:
            runs = json.load(f)["sanitizer"]
        shards = sorted((r["tool"], r["binary"], r["shard"], r["filter"]) for r in runs)
        kept = "*sparse_attention*:SparseAttentionGpu.*-Cases/ModelGpu.*:ModelGpuExpertParallel.*:ModelGpuBisection.*"
        want = sorted((tool, "test_gpu", f"{i}/3", kept) for tool in ("memcheck", "racecheck") for i in range(3))
        if shards != want:
            fail(f"DSV4H_COMPONENTS=sparse_attention: sanitizer runs {shards}, expected {want}")
    print("gpu-suite sanitize: test_gpu in shards under each tool, a failed test apart from a sanitizer finding, "
          "racecheck without cuBLAS's kernels and with the plain GEMM, DSV4H_COMPONENTS's filter and shards")


if __name__ == "__main__":
    main()
