#!/usr/bin/env python3
"""ci/history-record turns bare Google Benchmark JSONs (two processes of a binary) plus the nvidia-smi CSV, the torch peer
and `dsv4h verify --json` into a history file that `dsv4h report compare` reads, named
<date>-<shortcommit>.json; a file without repetitions is refused (exit 2).

usage: check_history_record.py DSV4H
"""
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def main():
    dsv4h = sys.argv[1]
    work = tempfile.mkdtemp(prefix="dsv4h-history-record-")
    try:
        subprocess.run([sys.executable, os.path.join(ROOT, "tests/report/make_history.py"), work + "/synthetic"], check=True)
        night = json.load(open(os.path.join(work, "synthetic", sorted(os.listdir(work + "/synthetic"))[-1])))
        for field in ("commit", "date", "device", "ceilings", "accuracy"):
            del night[field]
        night["context"]["copy_ceiling_GBps"] = "4165.8"  # as the benchmark adds it
        # One process's output, which carries no process tag.
        night["benchmarks"] = [b for b in night["benchmarks"] if b.pop("process", 0) == 0]
        json.dump(night, open(work + "/bench.json", "w"))
        open(work + "/device.csv", "w").write(
            "name, driver_version, clocks.current.sm [MHz], clocks.max.sm [MHz]\nNVIDIA H200, 580.159.04, 405 MHz, 1980 MHz\n")
        json.dump({"peers": [], "bf16_matmul_TFLOPs": 712.5}, open(work + "/torch.json", "w"))
        json.dump({"cases": [{"case": "filtered_silu_mul(rows=1)", "checks": [{"budget_used": 0.25}, {"budget_used": 0.5}]}]},
                  open(work + "/verify.json", "w"))
        json.dump({"schema_version": 1, "components": [{"component": "mtp_expand", "cases": 412, "replays": 300, "refused": 0,
                                                        "seconds": 60.1, "failures": []}]}, open(work + "/fuzz.json", "w"))
        record = [os.path.join(ROOT, "ci/history-record"), "--bench", work + "/bench.json", "--bench", work + "/bench.json",
                  "--smi", work + "/device.csv",
                  "--torch", work + "/torch.json", "--verify", work + "/verify.json", "--fuzz", work + "/fuzz.json",
                  "--commit", "9d259db0123456789",
                  "--date", "2026-12-02", "--out-dir", work + "/history"]
        out = subprocess.run(record, check=True, stdout=subprocess.PIPE, text=True).stdout.strip()
        if out != work + "/history/2026-12-02-9d259db.json":
            fail("wrote %r" % out)
        doc = json.load(open(out))
        expected = {"commit": "9d259db0123456789", "date": "2026-12-02",
                    "device": {"name": "NVIDIA H200", "driver": "580.159.04",
                               "clocks": {"clocks.current.sm [MHz]": "405 MHz", "clocks.max.sm [MHz]": "1980 MHz"}},
                    "ceilings": {"copy_GBps": 4165.8, "bf16_matmul_TFLOPs": 712.5},
                    "accuracy": [{"case": "filtered_silu_mul(rows=1)", "budget_used": 0.5}],
                    "fuzz": [{"component": "mtp_expand", "cases": 412, "replays": 300, "refused": 0, "seconds": 60.1,
                              "failures": 0}]}
        for field, value in expected.items():
            if doc.get(field) != value:
                fail("field %s: %r, expected %r" % (field, doc.get(field), value))
        # Two processes of one binary (the same file twice here): tagged 0 and 1, each repetition once.
        processes = collections.Counter(b.get("process") for b in doc["benchmarks"] if b.get("run_type") == "iteration")
        if sorted(processes) != [0, 1] or processes[0] != processes[1]:
            fail("processes of the repetitions: %r, expected as many of 0 as of 1" % processes)
        compare = subprocess.run([dsv4h, "report", "compare", out, out], stdout=subprocess.PIPE, text=True)
        if compare.returncode != 0 or "unchanged" not in compare.stdout:
            fail("dsv4h report compare of the recorded night with itself: exit %d\n%s" % (compare.returncode, compare.stdout))
        json.dump({"context": {}, "benchmarks": []}, open(work + "/empty.json", "w"))
        refused = subprocess.run(record[:2] + [work + "/empty.json"] + record[5:], stderr=subprocess.PIPE, text=True)
        if refused.returncode != 2 or "field \"benchmarks\"" not in refused.stderr:
            fail("a benchmark file without repetitions: exit %d, %s" % (refused.returncode, refused.stderr))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("PASS: ci/history-record writes a history file that dsv4h report reads")


if __name__ == "__main__":
    main()
