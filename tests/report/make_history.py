#!/usr/bin/env python3
"""Writes a synthetic nightly history (reports/history/README.md format) for the HTML check:
seeded, 12 nights of 3 processes (1% apart) of 10 repetitions at 2% noise, three benchmarks: one 10% slower on the last
night (the regression the page must list first), one with a 15% step at night 6, and the empty
kernel (no bytes, so no fraction of the ceiling).

usage: make_history.py OUT_DIR
"""
import json
import os
import random
import sys

NIGHTS, PROCESSES, REPETITIONS, BETWEEN, NOISE, COPY_GBPS = 12, 3, 10, 0.01, 0.02, 4000.0
REGRESSED = "BM_filtered_silu_mul/rows:3072/kept_permille:1000/manual_time"
STEPPED = "BM_filtered_silu_mul/rows:384/kept_permille:1000/manual_time"
EMPTY = "BM_empty_kernel/manual_time"


def median_us(name, night):
    if name == REGRESSED:
        return 25.0 * (1.10 if night == NIGHTS - 1 else 1.0)
    if name == STEPPED:
        return 8.0 * (1.15 if night >= 6 else 1.0)
    return 4.6


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    rng = random.Random(2026)
    for night in range(NIGHTS):
        commit = "%07x" % (0xabc0000 + night)
        date = "2026-11-%02d" % (night + 1)
        entries = []
        for name, bytes_moved in ((REGRESSED, 37761024.0), (STEPPED, 4720128.0), (EMPTY, 0.0)):
            for process in range(PROCESSES):
                process_us = median_us(name, night) * (1 + rng.gauss(0, BETWEEN))
                for rep in range(REPETITIONS):
                    entries.append({"name": name, "run_name": name, "run_type": "iteration", "repetitions": REPETITIONS,
                                    "repetition_index": rep, "process": process, "iterations": 20, "time_unit": "us",
                                    "real_time": process_us * (1 + rng.gauss(0, NOISE)),
                                    "cpu_time": 10.0, "bytes": bytes_moved, "flops": bytes_moved * 2 / 3,
                                    "copy_ceiling_GBps": COPY_GBPS})
            entries.append({"name": name + "_median", "run_name": name, "run_type": "aggregate",
                            "aggregate_name": "median", "time_unit": "us", "real_time": 1.0})
        doc = {"context": {"date": date, "executable": "bench_filtered_silu_mul"}, "benchmarks": entries,
               "commit": commit, "date": date,
               "device": {"name": "Synthetic GPU", "driver": "0.0", "clocks": {"clocks.max.sm [MHz]": "1980 MHz"}},
               "ceilings": {"copy_GBps": COPY_GBPS, "bf16_matmul_TFLOPs": 700.0},
               "accuracy": [{"case": "filtered_silu_mul(rows=77)", "budget_used": 0.5}]}
        with open(os.path.join(out_dir, "%s-%s.json" % (date, commit)), "w") as f:
            json.dump(doc, f)


if __name__ == "__main__":
    main()
