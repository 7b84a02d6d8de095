#!/usr/bin/env python3
"""ci/gpu-experiment without a GPU: every mutant the kernels define is declared by a component's
descriptor (dsv4h list --json) and gets its checks (noop all of them); pack collects a component's binaries from a build tree; run exits 77 where no GPU
is found, and on a stand-in GPU machine (fake nvidia-smi, compute-sanitizer, test, mutant and
benchmark binaries) times the builds only when every check passed, leaving its transcript, gpu-ab's
JSON and the logs; a failing check stops it with exit 1 before any timing, and one killed by its
timeout says so.

usage: check_gpu_experiment.py DSV4H
"""
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "ci", "gpu-experiment")

# A gtest binary: passes (exit 0) unless its folder holds "fail-<name>", then fails like a mismatch,
# or "hang-<name>", then exits as `timeout` does when it kills a check (124, the log saying nothing).
FAKE_TEST = """#!/usr/bin/env python3
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
name = os.path.basename(sys.argv[0])
if os.path.exists(os.path.join(here, "hang-" + name)):
    sys.exit(124)
failing = os.path.exists(os.path.join(here, "fail-" + name)) or name.startswith("test_gpu_mutant_")
if "--gtest_list_tests" in sys.argv:
    print("Fake.\\n  Case0\\n  Case1\\n  Case2")
    sys.exit(0)
out = [a.split(":", 1)[1] for a in sys.argv[1:] if a.startswith("--gtest_output=json:")]
failure = [{"failure": "MISMATCH at element 0"}] if failing else []
if out:
    json.dump({"testsuites": [{"name": "Fake", "testsuite": [{"name": "Case", "failures": failure}]}]}, open(out[0], "w"))
print("[  FAILED  ] 1 test." if failing else "[  PASSED  ] 1 test.")
sys.exit(1 if failing else 0)
"""
# A Google Benchmark binary: one benchmark, three repetitions of `us` microseconds.
FAKE_BENCH = """#!/usr/bin/env python3
import json, sys
us = {us}
out = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--benchmark_out=")][0]
entries = [{{"name": "BM_fake", "run_name": "BM_fake", "run_type": "iteration", "real_time": (us + j) * 1000,
             "time_unit": "ns"}} for j in (-0.001, 0.0, 0.001)]
json.dump({{"context": {{}}, "benchmarks": entries}}, open(out, "w"))
"""
FAKE_SMI = "#!/bin/sh\necho 'GPU 0: Fake'\n"
FAKE_SANITIZER = "#!/bin/sh\n# compute-sanitizer --tool T --error-exitcode N BINARY ARGS...\nshift 4\n\"$@\"\nrc=$?\necho '========= ERROR SUMMARY: 0 errors'\nexit $rc\n"


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


def tool(*args, env=None):
    return subprocess.run([sys.executable, TOOL, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=env)


# The harness's own mutants: noop (every kernel) and the performance mutant work_twice.
HARNESS_MUTANTS = {"noop", "work_twice"}


def check_every_mutant_has_a_component(dsv4h):
    listed = json.loads(subprocess.run([dsv4h, "list", "--json"], stdout=subprocess.PIPE, text=True, check=True).stdout)
    declared = {m["name"]: c["gpu_tests"] for c in listed["components"] for m in c["mutants"]}
    defined = set()
    for name in (n for n in os.listdir(os.path.join(ROOT, "kernels")) if n.endswith((".hip", ".h"))):
        with open(os.path.join(ROOT, "kernels", name)) as f:
            defined |= {m.lower() for m in re.findall(r"DSV4H_MUTANT_([A-Z0-9_]+)", f.read())}
    if len(declared) < 10:
        fail(f"dsv4h list --json declares only {sorted(declared)}")
    undeclared = defined - set(declared) - HARNESS_MUTANTS
    if undeclared:
        fail(f"mutants the kernels define but no descriptor declares: {sorted(undeclared)}")
    for name, checks in declared.items():
        proc = tool("filter", "--components", dsv4h, "--mutant", name)
        if proc.returncode != 0 or proc.stdout.strip() != checks:
            fail(f"mutant {name} must run its component's checks {checks!r}: {proc.stdout}")
    if tool("filter", "--components", dsv4h, "--mutant", "noop").stdout.strip() != "*":
        fail("noop must run every check")
    if tool("filter", "--components", dsv4h, "--mutant", "no_such_mutant").returncode != 2:
        fail("an unknown mutant must be bad usage (exit 2)")


def check_pack(work, dsv4h):
    build = os.path.join(work, "build")
    os.makedirs(os.path.join(build, "harness", "cli"))
    shutil.copy(dsv4h, os.path.join(build, "harness", "cli", "dsv4h"))
    for sub, names in (("gpu", ["test_gpu", "test_gpu_graph", "test_gpu_property", "test_gpu_mutant_mtp_zero_pad",
                                "test_gpu_mutant_noop"]), ("bench", ["bench_attn_metadata"])):
        os.makedirs(os.path.join(build, "tests", sub), exist_ok=True)
        for name in names:
            shutil.copy(shutil.which("true"), os.path.join(build, "tests", sub, name))
    to = os.path.join(work, "packed")
    proc = tool("pack", "--build", build, "--component", "mtp_expand", "--to", to)
    if proc.returncode != 0:
        fail(f"pack exited {proc.returncode}: {proc.stdout}")
    expected = {"test_gpu", "test_gpu_graph", "test_gpu_property", "test_gpu_mutant_mtp_zero_pad", "test_gpu_mutant_noop",
                "bench_attn_metadata", "components.json"}
    if set(os.listdir(to)) != expected:
        fail(f"pack collected {sorted(os.listdir(to))}, expected {sorted(expected)}")
    proc = tool("pack", "--build", build, "--component", "memory_pool", "--to", os.path.join(work, "none"))
    if proc.returncode == 0 or "test_gpu_mutant_pool_cached_loc" not in proc.stdout:
        fail(f"pack without the component's mutants must say which are missing: {proc.stdout}")


def make_build(folder, us, dsv4h, failing=(), hanging=()):
    os.makedirs(folder)
    with open(os.path.join(folder, "components.json"), "w") as f:
        f.write(subprocess.run([dsv4h, "list", "--json"], stdout=subprocess.PIPE, text=True, check=True).stdout)
    for name in ("test_gpu", "test_gpu_graph", "test_gpu_property", "test_gpu_mutant_pool_cached_loc", "test_gpu_mutant_noop"):
        write(os.path.join(folder, name), FAKE_TEST)
    for name in failing:
        write(os.path.join(folder, "fail-" + name), "")
    for name in hanging:
        write(os.path.join(folder, "hang-" + name), "")
    write(os.path.join(folder, "bench_memory_pool"), FAKE_BENCH.format(us=us))


def check_run(work, dsv4h):
    base, new, broken, slow = (os.path.join(work, n) for n in ("base", "new", "broken", "slow"))
    make_build(base, 3.0, dsv4h)
    make_build(new, 2.5, dsv4h)
    make_build(broken, 2.5, dsv4h, failing=["test_gpu_graph"])
    make_build(slow, 2.5, dsv4h, hanging=["test_gpu_graph"])
    bare = dict(os.environ, PATH=os.path.dirname(sys.executable) + ":/usr/bin:/bin")
    if shutil.which("nvidia-smi", path=bare["PATH"]) is None:
        proc = tool("run", "--component", "memory_pool", "--base", base, "--new", new, env=bare)
        if proc.returncode != 77 or "SKIPPED" not in proc.stdout:
            fail(f"run without a GPU must skip (77): exit {proc.returncode}: {proc.stdout}")
    fakes = os.path.join(work, "fake-bin")
    os.makedirs(fakes)
    write(os.path.join(fakes, "nvidia-smi"), FAKE_SMI)
    write(os.path.join(fakes, "compute-sanitizer"), FAKE_SANITIZER)
    gpu = dict(bare, PATH=fakes + ":" + bare["PATH"])

    out = os.path.join(work, "out")
    proc = tool("run", "--component", "memory_pool", "--base", base, "--new", new, "--rounds", "2", "--limit-s", "120",
                env=dict(gpu, OUT=out))
    if proc.returncode != 0:
        fail(f"run of a passing build exited {proc.returncode}: {proc.stdout}")
    verdicts = {r["benchmark"]: r["verdict"] for r in json.load(open(os.path.join(out, "ab.json")))["results"]}
    if verdicts != {"BM_fake": "faster"}:
        fail(f"the A/B should find the new build faster: {verdicts}")
    transcript = open(os.path.join(out, "experiment.txt")).read()
    # Sanitizers in shards, no more than the filter's tests (the fake lists 3): memcheck 2, racecheck 3.
    for expected in ("mutant pool_cached_loc", "mutant noop", "memcheck 2/2", "racecheck 3/3", "test_gpu_graph", "faster"):
        if expected not in transcript:
            fail(f"the transcript lacks {expected!r}: {transcript}")
    with tarfile.open(os.path.join(out, "logs.tgz")) as tar:
        if len(tar.getnames()) != 10:
            fail(f"logs.tgz should hold the 10 checks' logs (3 tests, 2 mutants, 5 sanitizer shards): {tar.getnames()}")

    out = os.path.join(work, "out-broken")
    proc = tool("run", "--component", "memory_pool", "--base", base, "--new", broken, "--limit-s", "120",
                env=dict(gpu, OUT=out))
    if proc.returncode != 1 or "nothing timed" not in proc.stdout or os.path.exists(os.path.join(out, "ab.json")):
        fail(f"a failing check must stop the run before timing (exit 1): exit {proc.returncode}: {proc.stdout}")
    proc = tool("run", "--component", "memory_pool", "--base", base, "--new", slow, "--limit-s", "120",
                env=dict(gpu, OUT=os.path.join(work, "out-slow")))
    if proc.returncode != 1 or not re.search(r"test_gpu_graph +exit 124 +TIMED OUT after [0-9]+ s", proc.stdout):
        fail(f"a check killed by its timeout must say so, with the timeout: exit {proc.returncode}: {proc.stdout}")
    if tool("run", "--component", "memory_pool", "--base", work, "--new", new, env=gpu).returncode != 2:
        fail("a base without the benchmark binary must be bad usage (exit 2)")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    dsv4h = os.path.abspath(sys.argv[1])
    check_every_mutant_has_a_component(dsv4h)
    with tempfile.TemporaryDirectory() as work:
        check_pack(work, dsv4h)
        check_run(work, dsv4h)
    print("ci/gpu-experiment: mutants declared, pack, skip without a GPU, checks before timing: all as expected")


if __name__ == "__main__":
    main()
