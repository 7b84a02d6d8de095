#!/usr/bin/env python3
"""ci/gpu-ab on fake benchmark binaries (no GPU): a change every round agrees on is called faster or
slower; identical builds under a steady drift are "unclear", not a change; --budget-s stops before
a round that would not fit and leaves the complete rounds' JSON (one round: no verdict); a failing
run exits 1, a binary without a GPU 77; bad usage (a missing binary, a single round) exits 2 naming
what is wrong.

usage: check_gpu_ab.py
"""
import json
import os
import stat
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPU_AB = os.path.join(ROOT, "ci", "gpu-ab")

# A stand-in for a Google Benchmark binary: three repetitions of each benchmark of times.json (its
# folder's), in microseconds, plus `drift` times the number of runs so far of any fake (a counter
# file shared by both builds: the machine drifting under both alike), after sleeping times.json's
# "sleep" seconds. Exits with times.json's "exit" when it gives one (3: a failure, 77: no GPU).
FAKE = """#!/usr/bin/env python3
import json, os, sys, time
here = os.path.dirname(os.path.abspath(__file__))
config = json.load(open(os.path.join(here, "times.json")))
time.sleep(config.get("sleep", 0))
if config.get("exit"):
    sys.exit(config["exit"])
out = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--benchmark_out=")][0]
if any(a == "--benchmark_filter=nothing" for a in sys.argv):
    open(out, "w").close()  # what Google Benchmark leaves when the filter matches nothing
    sys.exit(0)
counter = os.path.join(here, "..", "runs")
runs = int(open(counter).read()) if os.path.exists(counter) else 0
open(counter, "w").write(str(runs + 1))
entries = []
for name, us in config["times"].items():
    for k, jitter in enumerate((-0.001, 0.0, 0.001)):
        t = us + config.get("drift", 0) * runs + jitter
        entries.append({"name": name, "run_name": name, "run_type": "iteration", "repetition_index": k,
                        "real_time": t * 1000, "time_unit": "ns"})
    entries.append({"name": name + "_median", "run_name": name, "run_type": "aggregate",
                    "real_time": 99999.0, "time_unit": "ns"})
json.dump({"context": {"timing": "device"}, "benchmarks": entries}, open(out, "w"))
"""


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def make_build(folder, times, drift=0.0, exit_code=0, sleep=0.0):
    os.makedirs(folder)
    path = os.path.join(folder, "bench_fake")
    with open(path, "w") as f:
        f.write(FAKE)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    with open(os.path.join(folder, "times.json"), "w") as f:
        json.dump({"times": times, "drift": drift, "exit": exit_code, "sleep": sleep}, f)


def run_ab(work, base, new, *extra):
    out = os.path.join(work, "ab.json")
    proc = subprocess.run([sys.executable, GPU_AB, "--base", base, "--new", new, "--binary", "bench_fake",
                           "--json", out, *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    verdicts = {}
    if proc.returncode == 0:
        verdicts = {r["benchmark"]: r["verdict"] for r in json.load(open(out))["results"]}
    return proc, verdicts


def main():
    with tempfile.TemporaryDirectory() as work:
        # A real change of 0.2 us either way under a small drift: every round agrees.
        make_build(os.path.join(work, "a", "base"), {"BM_fast": 3.0, "BM_slow": 3.0, "BM_same": 2.0}, drift=0.01)
        make_build(os.path.join(work, "a", "new"), {"BM_fast": 2.8, "BM_slow": 3.2, "BM_same": 2.0}, drift=0.01)
        proc, verdicts = run_ab(work, os.path.join(work, "a", "base"), os.path.join(work, "a", "new"), "--rounds", "4")
        if proc.returncode != 0:
            fail(f"gpu-ab exited {proc.returncode}: {proc.stdout}")
        expected = {"BM_fast": "faster", "BM_slow": "slower", "BM_same": "unclear"}
        if verdicts != expected:
            fail(f"verdicts {verdicts}, expected {expected}")
        if "round 4/4" not in proc.stdout:
            fail("no progress line per run: " + proc.stdout)

        # Identical builds under a drift larger than the threshold: the alternating order makes the
        # rounds disagree, so no change is claimed.
        make_build(os.path.join(work, "b", "base"), {"BM_x": 3.0}, drift=0.1)
        make_build(os.path.join(work, "b", "new"), {"BM_x": 3.0}, drift=0.1)
        proc, verdicts = run_ab(work, os.path.join(work, "b", "base"), os.path.join(work, "b", "new"))
        if proc.returncode != 0 or verdicts != {"BM_x": "unclear"}:
            fail(f"identical builds under drift: exit {proc.returncode}, verdicts {verdicts}: {proc.stdout}")

        # Runs of 0.4 s against a budget of 1.2 s: the first round (0.8 s and more) leaves no room
        # for a second, so it stops after one, with its JSON and no verdict from a single round.
        make_build(os.path.join(work, "e", "base"), {"BM_x": 3.0}, sleep=0.4)
        make_build(os.path.join(work, "e", "new"), {"BM_x": 2.0}, sleep=0.4)
        proc, verdicts = run_ab(work, os.path.join(work, "e", "base"), os.path.join(work, "e", "new"), "--budget-s", "1.2")
        rounds = json.load(open(os.path.join(work, "ab.json")))["rounds"] if proc.returncode == 0 else None
        if proc.returncode != 0 or "stopping with 1 of 4 rounds done" not in proc.stdout or rounds != 1 or verdicts != {"BM_x": "unclear"}:
            fail(f"a budget for one round: exit {proc.returncode}, rounds {rounds}, verdicts {verdicts}: {proc.stdout}")
        proc, _ = run_ab(work, os.path.join(work, "e", "base"), os.path.join(work, "e", "new"), "--budget-s", "0")
        if proc.returncode != 1 or "no round fits" not in proc.stdout:
            fail(f"a budget for no round: expected exit 1 saying so, got {proc.returncode}: {proc.stdout}")

        make_build(os.path.join(work, "c", "new"), {"BM_x": 3.0}, exit_code=3)
        proc, _ = run_ab(work, os.path.join(work, "b", "base"), os.path.join(work, "c", "new"))
        if proc.returncode != 1 or "exited 3" not in proc.stdout:
            fail(f"a failing run: expected exit 1 naming its exit code, got {proc.returncode}: {proc.stdout}")

        make_build(os.path.join(work, "d", "new"), {"BM_x": 3.0}, exit_code=77)
        proc, _ = run_ab(work, os.path.join(work, "b", "base"), os.path.join(work, "d", "new"))
        if proc.returncode != 77 or "found no GPU" not in proc.stdout:
            fail(f"a binary without a GPU: expected exit 77 saying so, got {proc.returncode}: {proc.stdout}")

        proc, _ = run_ab(work, os.path.join(work, "b", "base"), os.path.join(work, "missing"))
        if proc.returncode != 2 or "bench_fake is not an executable file" not in proc.stdout:
            fail(f"a missing binary: expected exit 2 naming it, got {proc.returncode}: {proc.stdout}")
        proc, _ = run_ab(work, os.path.join(work, "b", "base"), os.path.join(work, "b", "new"), "--filter", "nothing")
        if proc.returncode != 2 or "--filter 'nothing' matches no benchmark of bench_fake" not in proc.stdout:
            fail(f"a filter matching nothing: expected exit 2 saying so, got {proc.returncode}: {proc.stdout}")
        proc, _ = run_ab(work, os.path.join(work, "b", "base"), os.path.join(work, "b", "new"), "--rounds", "1")
        if proc.returncode != 2 or "--rounds must be at least 2" not in proc.stdout:
            fail(f"one round: expected exit 2, got {proc.returncode}: {proc.stdout}")
    print("ci/gpu-ab: verdicts, drift, budget, failures and usage errors as expected")


if __name__ == "__main__":
    main()
