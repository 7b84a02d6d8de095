#!/usr/bin/env python3
"""ci/check-mutant.py and ci/gpu-suite's mutant phase without a GPU: every outcome of a mutant run
leaves a verdict in the record (caught, survived, crashed, skipped, and a run killed by the step
timeout), so that a record can never show only the mutants that were caught; and a failing run
fails: gpu-suite exits 1 naming the killed mutant, and its tests phase with a stand-in test binary
that reports a mismatch exits 1 naming the test; a run that DSV4H_DEADLINE_S cuts short ends by
then with what finished collected, and fails naming the killed steps and the phases not run.

usage: check_mutant_verdicts.py DSV4H
"""
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# A gtest binary as a mutant run sees it; BEHAVIOUR picks the outcome.
FAKE_TEST = """#!/usr/bin/env python3
import json, os, signal, sys, time
behaviour = {behaviour!r}
print("on the GPU ctest allocated:", os.environ.get("CTEST_RESOURCE_GROUP_0_GPUS"))
out = [a.split(":", 1)[1] for a in sys.argv[1:] if a.startswith("--gtest_output=json:")][0]
if behaviour == "crash":
    os.kill(os.getpid(), signal.SIGSEGV)
if behaviour == "hang":
    time.sleep(10)
case = {{"name": "Case"}}
if behaviour == "mismatch":
    case["failures"] = [{{"failure": "out (bf16): MISMATCH at [0, 0]"}}]
if behaviour == "skip":
    case["result"] = "SKIPPED"
    print("GPU test skipped: no GPU found")
json.dump({{"testsuites": [{{"name": "MemoryPoolGpu", "testsuite": [case]}}]}}, open(out, "w"))
sys.exit(1 if behaviour == "mismatch" else 0)
"""


# The GPUs ci/gpu-resources counts on a machine without one.
TWO_GPUS = {"CUDA_VISIBLE_DEVICES": "0,1"}


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def fake(path, behaviour):
    with open(path, "w") as f:
        f.write(FAKE_TEST.format(behaviour=behaviour))
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


def suite_checkout(work, name, dsv4h):
    """A copy of the repository's ci/ with an empty build/gpu-dist but for dsv4h (what the suite
    reads the components from): (the copy, its gpu-dist)."""
    repo = os.path.join(work, name)
    shutil.copytree(os.path.join(ROOT, "ci"), os.path.join(repo, "ci"))
    dist = os.path.join(repo, "build", "gpu-dist")
    os.makedirs(dist)
    shutil.copy(dsv4h, os.path.join(dist, "dsv4h"))
    return repo, dist


def check_each_outcome(work):
    for behaviour, exit_code, status in (("mismatch", 0, "caught"), ("pass", 1, "survived"),
                                         ("crash", 1, "crashed"), ("skip", 77, "skipped")):
        binary, verdict = os.path.join(work, "test_" + behaviour), os.path.join(work, behaviour + ".json")
        fake(binary, behaviour)
        proc = subprocess.run([sys.executable, os.path.join(ROOT, "ci", "check-mutant.py"), "--mutant", "pool_cached_loc",
                               "--binary", binary, "--json", verdict], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
        if proc.returncode != exit_code:
            fail(f"a {behaviour} run exited {proc.returncode}, expected {exit_code}: {proc.stdout}")
        if not os.path.exists(verdict):
            fail(f"a {behaviour} run wrote no verdict: {proc.stdout}")
        with open(verdict) as f:
            v = json.load(f)
        if v.get("status") != status or v.get("caught") != (status == "caught"):
            fail(f"a {behaviour} run's verdict is {v}, expected status {status}")


def check_shards_join(work):
    # noop in 3 gtest shards: one verdict over every shard's tests (each shard's fake writes one test).
    binary, verdict = os.path.join(work, "test_sharded"), os.path.join(work, "sharded.json")
    fake(binary, "mismatch")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "ci", "check-mutant.py"), "--mutant", "noop", "--shards", "3",
                           "--binary", binary, "--json", verdict], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with open(verdict) as f:
        v = json.load(f)
    if proc.returncode != 0 or (v["status"], v["tests"], v["failed"]) != ("caught", 3, 3):
        fail(f"noop in 3 shards must be caught over 3 tests: exit {proc.returncode}, {v}: {proc.stdout}")


def check_killed_run_is_recorded(work, dsv4h):
    # gpu-suite on a copy of the repository whose one mutant hangs past the step timeout.
    repo, dist = suite_checkout(work, "repo", dsv4h)
    fake(os.path.join(dist, "test_gpu_mutant_pool_cached_loc"), "hang")
    out = os.path.join(work, "out")
    proc = subprocess.run(["bash", os.path.join(repo, "ci", "gpu-suite"), "mutants"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, env=dict(os.environ, OUT=out, DSV4H_STEP_TIMEOUT="2", **TWO_GPUS))
    if proc.returncode != 1 or not os.path.exists(os.path.join(out, "results.json")) or \
            "FAILED: mutant pool_cached_loc" not in proc.stdout:
        fail(f"gpu-suite mutants with a killed mutant must exit 1 naming it, results.json written: "
             f"exit {proc.returncode}: {proc.stdout}")
    with open(os.path.join(out, "results.json")) as f:
        mutants = json.load(f)["mutants"]
    if [(m["mutant"], m["caught"]) for m in mutants] != [("pool_cached_loc", False)] or "killed" not in mutants[0]["status"]:
        fail(f"a mutant run killed by the step timeout must stay in the record as not caught: {mutants}")


def check_failing_test_fails_the_suite(work, dsv4h):
    repo, dist = suite_checkout(work, "repo-tests", dsv4h)
    fake(os.path.join(dist, "test_cpu"), "pass")
    fake(os.path.join(dist, "test_gpu"), "mismatch")
    out = os.path.join(work, "out-tests")
    # One run at a time per GPU: the five runs (test_cpu, four shards of test_gpu) take both GPUs.
    proc = subprocess.run(["bash", os.path.join(repo, "ci", "gpu-suite"), "tests"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, env=dict(os.environ, OUT=out, DSV4H_JOBS="1", **TWO_GPUS))
    if proc.returncode != 1 or "FAILED: test MemoryPoolGpu.Case (test_gpu)" not in proc.stdout:
        fail(f"gpu-suite tests with a failing test must exit 1 naming it: exit {proc.returncode}: {proc.stdout}")
    listed = json.loads(subprocess.run([dsv4h, "list", "--json"], stdout=subprocess.PIPE, text=True, check=True).stdout)
    unverified = [c["name"] for c in listed["components"] if f"dsv4h_verify_{c['name']} " not in proc.stdout]
    if unverified:  # c4_decode_step was, 2026-12-06: a pattern of letters missed the digit in its name
        fail(f"gpu-suite tests must run dsv4h verify of every listed component, not of {unverified}: {proc.stdout}")
    with open(os.path.join(out, "suite.log")) as f:
        log = f.read()
    for gpu in ("id:0,slots:1", "id:1,slots:1"):
        if "on the GPU ctest allocated: " + gpu not in log:
            fail(f"gpu-suite's runs must be spread over both GPUs by ctest ({gpu} ran nothing): {log}")
    proc = subprocess.run(["bash", os.path.join(repo, "ci", "gpu-suite"), "tests"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, env=dict({k: v for k, v in os.environ.items() if k != "OUT"}, **TWO_GPUS))
    if "results: " not in proc.stdout:
        fail(f"gpu-suite without OUT must say where its results went: {proc.stdout}")


def check_deadline_cuts_the_run(work, dsv4h):
    repo, dist = suite_checkout(work, "repo-deadline", dsv4h)
    fake(os.path.join(dist, "test_cpu"), "pass")
    fake(os.path.join(dist, "test_gpu"), "hang")  # 10 s, past the deadline
    out = os.path.join(work, "out-deadline")
    t0 = time.monotonic()
    proc = subprocess.run(["bash", os.path.join(repo, "ci", "gpu-suite"), "tests", "mutants"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True,
                          env=dict(os.environ, OUT=out, DSV4H_DEADLINE_S="3", DSV4H_JOBS="16", **TWO_GPUS))
    elapsed = time.monotonic() - t0
    if proc.returncode != 1 or "phase_not_run.mutants (exit 124)" not in proc.stdout or \
            "test_gpu.shard0 (exit 124)" not in proc.stdout:
        fail(f"gpu-suite cut by DSV4H_DEADLINE_S must exit 1 naming the killed steps and the phase not run: "
             f"exit {proc.returncode}: {proc.stdout}")
    if elapsed > 9:
        fail(f"gpu-suite with DSV4H_DEADLINE_S=3 took {elapsed:.1f} s: the deadline must cut the 10 s steps")
    with open(os.path.join(out, "results.json")) as f:
        tests = json.load(f)["tests"]
    if not any(t["binary"] == "test_cpu" and t["status"] == "pass" for t in tests):
        fail(f"what finished before the deadline must be collected (test_cpu passed): {tests}")
    proc = subprocess.run(["bash", os.path.join(repo, "ci", "gpu-suite"), "tests"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, env=dict(os.environ, OUT=out, DSV4H_DEADLINE_S="soon"))
    if proc.returncode != 2 or "DSV4H_DEADLINE_S must be whole seconds" not in proc.stdout:
        fail(f"a malformed DSV4H_DEADLINE_S must exit 2 naming it: exit {proc.returncode}: {proc.stdout}")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: check_mutant_verdicts.py DSV4H")
    with tempfile.TemporaryDirectory() as work:
        check_each_outcome(work)
        check_shards_join(work)
        check_killed_run_is_recorded(work, os.path.abspath(sys.argv[1]))
        check_failing_test_fails_the_suite(work, os.path.abspath(sys.argv[1]))
        check_deadline_cuts_the_run(work, os.path.abspath(sys.argv[1]))
    print("check-mutant and gpu-suite: caught, survived, crashed, skipped and killed runs all leave a verdict; "
          "a killed mutant, a failing test and a deadline's cut fail the suite, named")


if __name__ == "__main__":
    main()
