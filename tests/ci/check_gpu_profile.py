#!/usr/bin/env python3
"""ci/gpu-profile with a stand-in ncu and a stand-in benchmark binary (no GPU): the profiled run gets
the filter, short repetitions, the launch window, the kernel regex, the sections and
DSV4H_BENCH_NO_HOLD=1; the summary holds each launch's name, grid, block, registers, local bytes,
shared memory, occupancy, duration, throughputs, GB/s, top stalls and the instructions holding the
most stall samples, parsed from CSV in ncu's real --page details / raw / source layout (n/a where a
metric is missing); --sampling-interval reaches ncu; --help does nothing; --list
prints the selection; exit 2 without ncu, without the binary, on a filter that selects nothing and
when nothing was profiled; ncu's own failure code with a summary saying so.

usage: check_gpu_profile.py
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from check_mutant_verdicts import fail  # noqa: E402
from check_sanitize_phase import executable  # noqa: E402
PROFILE = os.path.join(ROOT, "ci", "gpu-profile")

# A Google Benchmark binary: lists the names of NAMES its --benchmark_filter selects (Google
# Benchmark's message on stderr when none), otherwise records its arguments and environment.
BENCH = r"""#!/usr/bin/env python3
import json, os, re, sys
NAMES = ["BM_sparse_attention/bs:128/ratio:4/ctx:8192/iterations:20/repeats:10/manual_time",
         "BM_sparse_attention/bs:128/ratio:4/ctx:65536/iterations:20/repeats:10/manual_time",
         "BM_empty_kernel/iterations:20/repeats:10/manual_time"]
flt = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--benchmark_filter=")), ".")
if "--benchmark_list_tests=true" in sys.argv:
    chosen = [n for n in NAMES if re.search(flt, n)]
    if not chosen:
        print("Failed to match any benchmarks against regex: " + flt, file=sys.stderr)
    print("\n".join(chosen))
    sys.exit(0)
with open(os.environ["FAKE_RECORD"], "w") as f:
    json.dump({"argv": sys.argv[1:], "no_hold": os.environ.get("DSV4H_BENCH_NO_HOLD")}, f)
"""

# A gtest binary: --gtest_list_tests as gtest prints it ("Suite." then "  Test" lines), filtered.
GTEST = r"""#!/usr/bin/env python3
import fnmatch, json, os, sys
TESTS = {"SparseAttentionGpu.": ["Decode", "Prefill  # GetParam() = 4"], "MemoryPoolGpu.": ["Store"]}
flt = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--gtest_filter=")), "*")
if "--gtest_list_tests" in sys.argv:
    for suite, tests in TESTS.items():
        chosen = [t for t in tests if fnmatch.fnmatch(suite + t.split()[0], flt)]
        if chosen:
            print(suite + "\n" + "\n".join("  " + t for t in chosen))
    sys.exit(0)
with open(os.environ["FAKE_RECORD"], "w") as f:
    json.dump({"argv": sys.argv[1:], "no_hold": os.environ.get("DSV4H_BENCH_NO_HOLD")}, f)
"""

# Nsight Compute: profiling runs the binary after its options and writes the report (the CSV pages
# it will print) when FAKE_NCU says so; --import prints the page asked for.
NCU = r"""#!/usr/bin/env python3
import json, os, shutil, subprocess, sys
args = sys.argv[1:]
here = os.environ["FAKE_DIR"]
if "--import" in args:
    page = args[args.index("--page") + 1]
    report = json.load(open(args[args.index("--import") + 1]))
    sys.stdout.write(report[page])
    sys.exit(0)
with open(os.path.join(here, "ncu_args.json"), "w") as f:
    json.dump(args, f)
i = 0
while not args[i].startswith("/"):
    i += 2 if args[i] not in ("--force-overwrite",) else 1
print("==PROF== Connected to process 1 (" + args[i] + ")")
rc = subprocess.run(args[i:]).returncode
mode = os.environ.get("FAKE_NCU", "ok")
if mode == "fail":
    print("==ERROR== something went wrong")
    sys.exit(3)
if mode == "none":
    print("==WARNING== No kernels were profiled.")
    sys.exit(0)
prefix = args[args.index("--export") + 1]
shutil.copy(os.path.join(here, "report.json"), prefix + ".ncu-rep")
sys.exit(int(os.environ.get("FAKE_NCU_EXIT", rc)))
"""

DETAILS_HEADER = ['ID', 'Process ID', 'Process Name', 'Host Name', 'Kernel Name', 'Context', 'Stream', 'Block Size',
                  'Grid Size', 'Device', 'CC', 'Section Name', 'Metric Name', 'Metric Unit', 'Metric Value', 'Rule Name',
                  'Rule Type', 'Rule Description', 'Estimated Speedup Type', 'Estimated Speedup']
MMA = ("void dsv4h::(anonymous namespace)::sparse_attention_mma<(bool)1>(dsv4h::SparseAttentionArgs, "
       "dsv4h::SparseAttentionRope, long, long, int)")
COMBINE = "void dsv4h::sparse_attention_combine(dsv4h::SparseAttentionArgs, dsv4h::SparseAttentionRope, int)"
# (section, metric, unit, value) of the first launch: ncu's own names and units.
MMA_METRICS = [
    ("GPU Speed Of Light Throughput", "DRAM Frequency", "Ghz", "2.62"),
    ("GPU Speed Of Light Throughput", "Elapsed Cycles", "cycle", "459,531"),
    ("GPU Speed Of Light Throughput", "Memory Throughput", "%", "7.31"),
    ("GPU Speed Of Light Throughput", "DRAM Throughput", "%", "6.52"),
    ("GPU Speed Of Light Throughput", "Duration", "usecond", "248.19"),
    ("GPU Speed Of Light Throughput", "Compute (SM) Throughput", "%", "31.07"),
    ("Launch Statistics", "Block Size", "", "128"),
    ("Launch Statistics", "Grid Size", "", "4,096"),
    ("Launch Statistics", "Registers Per Thread", "register/thread", "168"),
    ("Launch Statistics", "Static Shared Memory Per Block", "byte/block", "0"),
    ("Launch Statistics", "Dynamic Shared Memory Per Block", "Kbyte/block", "73.73"),
    ("Launch Statistics", "Driver Shared Memory Per Block", "Kbyte/block", "1.02"),
    ("Occupancy", "Theoretical Occupancy", "%", "12.50"),
    ("Occupancy", "Achieved Occupancy", "%", "11.87"),
    ("Memory Workload Analysis", "Memory Throughput", "Gbyte/second", "218.31"),
    ("Memory Workload Analysis", "Mem Busy", "%", "9.12"),
    ("Warp State Statistics", "Warp Cycles Per Issued Instruction", "cycle", "21.40"),
]
# The second launch: another ncu's units, no occupancy section at all.
COMBINE_METRICS = [
    ("GPU Speed Of Light Throughput", "Duration", "msecond", "0.0042"),
    ("GPU Speed Of Light Throughput", "Compute (SM) Throughput", "%", "3.10"),
    ("GPU Speed Of Light Throughput", "DRAM Throughput", "%", "40.00"),
    ("Launch Statistics", "Registers Per Thread", "register/thread", "40"),
    ("Memory Workload Analysis", "Memory Throughput", "Tbyte/second", "1.34"),
]
RAW_METRICS = ["gpu__time_duration.sum", "launch__registers_per_thread",
               "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
               "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
               "smsp__average_warps_issue_stalled_selected_per_issue_active.ratio",
               "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio",
               "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio",
               "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum", "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum"]


def quoted(row):
    return ",".join('"' + str(v).replace('"', '""') + '"' for v in row) + "\n"


def report():
    details = quoted(DETAILS_HEADER)
    for launch_id, name, block, grid, metrics in (("0", MMA, "(128, 1, 1)", "(32, 16, 128)", MMA_METRICS),
                                                  ("1", COMBINE, "(256, 1, 1)", "(128, 1, 1)", COMBINE_METRICS)):
        for section, metric, unit, value in metrics:
            details += quoted([launch_id, "4242", "bench_sparse_attention", "127.0.0.1", name, "1", "13", block, grid,
                               "0", "9.0", section, metric, unit, value, "", "", "", "", ""])
        details += quoted([launch_id, "4242", "bench_sparse_attention", "127.0.0.1", name, "1", "13", block, grid, "0",
                           "9.0", "Occupancy", "", "", "", "AchievedOccupancy", "OPT", "low occupancy", "local", "12.3"])
    fixed = DETAILS_HEADER[:11]
    raw = quoted(fixed + RAW_METRICS)
    raw += quoted([""] * len(fixed) + ["nsecond", "register/thread", "", "", "", "", "", "byte", "Kbyte"])
    raw += quoted(["0", "4242", "bench_sparse_attention", "127.0.0.1", MMA, "1", "13", "(128, 1, 1)", "(32, 16, 128)",
                   "0", "9.0", "248,190", "168", "12.10", "3.50", "1.00", "0.20", "1.10", "0", "2.048"])
    raw += quoted(["1", "4242", "bench_sparse_attention", "127.0.0.1", COMBINE, "1", "13", "(256, 1, 1)", "(128, 1, 1)",
                   "0", "9.0", "4,200", "40", "", "", "", "", "", "", ""])
    # The source page as ncu 2025 prints it (H100, 2026-12-07): per launch a "Kernel Name" line, the
    # header (a few of its 68 columns here), a row an SASS instruction.
    columns = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Warp Stall Sampling (Not-issued Samples)",
               "# Samples", "Instructions Executed", "stall_barrier", "stall_long_sb", "stall_wait", "stall_selected",
               "stall_barrier (Not Issued)", "stall_long_sb (Not Issued)"]
    source = quoted(["Kernel Name", MMA]) + quoted(columns)
    for address, text, samples, executed, barrier, long_sb, wait, selected in (
            ("0x7f00", "      LDC R1, c[0x0][0x28]", 0, 160, 0, 0, 0, 0),
            ("0x7f10", "@!P0  BRA 0x7f44f37aeb20", 105, 320, 105, 0, 0, 0),
            ("0x7f20", "      HMMA.16816.F32.BF16 R136, R144, R152, R136", 3, 80, 0, 0, 1, 2),
            ("0x7f30", "      LDL R136, [R1+0x2c]", 12, 320, 0, 12, 0, 0)):
        source += quoted([address, text, samples, samples, samples, executed, barrier, long_sb, wait, selected,
                          barrier * 9, long_sb * 9])
    source += quoted(["Kernel Name", COMBINE]) + quoted(columns)
    source += quoted(["0x8f00", "      EXIT", 0, 0, 0, 128, 0, 0, 0, 0, 0, 0])
    return {"details": "==PROF== nothing to see\n" + details, "raw": raw, "source": source}


def main():
    with tempfile.TemporaryDirectory() as work:
        fake = os.path.join(work, "fake")
        cuda_bin = os.path.join(work, "cuda", "bin")
        os.makedirs(fake)
        os.makedirs(cuda_bin)
        binary = os.path.join(work, "dist", "bench_sparse_attention")
        os.makedirs(os.path.dirname(binary))
        executable(binary, BENCH)
        gtest = os.path.join(work, "dist", "test_gpu")
        executable(gtest, GTEST)
        executable(os.path.join(fake, "ncu"), NCU)
        executable(os.path.join(cuda_bin, "ncu"), NCU)
        with open(os.path.join(fake, "report.json"), "w") as f:
            json.dump(report(), f)
        record = os.path.join(work, "record.json")
        base = {k: v for k, v in os.environ.items() if k not in ("OUT", "CUDA_HOME")}
        base.update(FAKE_DIR=fake, FAKE_RECORD=record)
        with_ncu = dict(base, PATH=fake + os.pathsep + base["PATH"])

        def profile(*extra, env=with_ncu, out=None):
            command = [sys.executable, PROFILE, "--binary", binary, *extra]
            if out:
                command += ["--out", out]
            return subprocess.run(command, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, timeout=60)

        # --help: the header, nothing created ($OUT's folder included).
        proc = subprocess.run([sys.executable, PROFILE, "--help"], cwd=work, env=dict(with_ncu, OUT=os.path.join(work, "o")),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
        if proc.returncode != 0 or "Nsight Compute" not in proc.stdout or os.path.exists(os.path.join(work, "o")):
            fail(f"--help: exit {proc.returncode}, created {os.path.exists(os.path.join(work, 'o'))}: {proc.stdout[:300]!r}")

        # --list: the selection, no ncu needed, nothing run.
        proc = profile("--filter", "BM_sparse_attention/bs:128/ratio:4/", "--list", env=base)
        if proc.returncode != 0 or proc.stdout.count("BM_sparse_attention/bs:128") != 2 or os.path.exists(record):
            fail(f"--list: exit {proc.returncode}: {proc.stdout!r}")

        # The profiled run and its summary.
        out = os.path.join(work, "out")
        proc = profile("--filter", "BM_sparse_attention/bs:128/ratio:4/ctx:8192/", "--kernel-regex", "sparse_attention",
                       "--name", "attn", "--sampling-interval", "0", out=out)
        if proc.returncode != 0:
            fail(f"profile: exit {proc.returncode}: {proc.stdout[-2000:]}")
        ncu_args = json.load(open(os.path.join(fake, "ncu_args.json")))
        run = json.load(open(record))
        joined = " ".join(ncu_args)
        for part in ("--launch-skip 2", "--launch-count 3", "--kill yes", "--clock-control base", "--kernel-name regex:sparse_attention",
                     "--section SpeedOfLight", "--section WarpStateStats", "--section SourceCounters",
                     "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum", "--export " + os.path.join(out, "attn"),
                     "--warp-sampling-interval 0"):
            if part not in joined:
                fail(f"ncu was not given {part!r}: {joined}")
        for part in ("--benchmark_filter=BM_sparse_attention/bs:128/ratio:4/ctx:8192/", "--benchmark_repetitions=1"):
            if part not in run["argv"]:
                fail(f"the benchmark was not given {part!r}: {run['argv']}")
        if run["no_hold"] != "1":
            fail(f"the benchmark ran without DSV4H_BENCH_NO_HOLD=1: {run}")
        for name in ("attn.ncu-rep", "attn.details.csv", "attn.raw.csv", "attn.source.csv", "attn.ncu.log", "attn.summary.txt"):
            if not os.path.exists(os.path.join(out, name)):
                fail(f"no {name} in {sorted(os.listdir(out))}")
        summary = open(os.path.join(out, "attn.summary.txt")).read()
        expected = [
            "2 profiled launch(es)",
            "[0] dsv4h::sparse_attention_mma<(bool)1>\n",
            "grid (32, 16, 128)  block (128, 1, 1)  registers/thread 168  local memory ld 0 B, st 2048 B",
            "shared memory/block static 0 B, dynamic 73730 B, driver 1020 B",
            "occupancy achieved 11.9 % (theoretical 12.5 %)",
            "duration 248.19 us  SM throughput 31.1 %  memory throughput 7.3 %  DRAM throughput 6.5 % (218.3 GB/s)",
            "top stalls: long_scoreboard 12.10, barrier 3.50, wait 1.10 (cycles per issued instruction)",
            "  hottest instructions (of 120 warp samples; 4 instructions):\n"
            "      88%  barrier            x320  @!P0  BRA 0x7f44f37aeb20\n"
            "      10%  long_sb            x320  LDL R136, [R1+0x2c]\n"
            "       2%  issuing            x80  HMMA.16816.F32.BF16 R136, R144, R152, R136\n\n",
            "[1] dsv4h::sparse_attention_combine\n",
            "occupancy achieved n/a (theoretical n/a)",
            "duration 4.20 us  SM throughput 3.1 %  memory throughput n/a  DRAM throughput 40.0 % (1340.0 GB/s)",
            "local memory n/a",
            "top stalls: n/a\n  hottest instructions: no warp samples",
        ]
        for line in expected:
            if line not in summary:
                fail(f"the summary lacks {line!r}:\n{summary}")
        if os.environ.get("SHOW_SUMMARY"):
            print(summary)
        if "selected" in summary:
            fail(f"'selected' (issuing) counted as a stall:\n{summary}")

        # ncu found through $CUDA_HOME/bin when not on the PATH (unless this machine has a CUDA ncu).
        no_ncu = dict(base)
        if not os.path.exists("/usr/local/cuda/bin/ncu"):
            proc = profile("--filter", "BM_empty_kernel", env=dict(no_ncu, CUDA_HOME=os.path.dirname(cuda_bin)), out=out)
            if proc.returncode != 0:
                fail(f"ncu in $CUDA_HOME/bin: exit {proc.returncode}: {proc.stdout[-1000:]}")
            proc = profile("--filter", "BM_empty_kernel", env=no_ncu, out=out)
            if proc.returncode != 2 or "ncu (Nsight Compute) not found" not in proc.stdout:
                fail(f"no ncu: exit {proc.returncode}: {proc.stdout!r}")

        # A gtest binary: its tests listed as Suite.Test, the filter passed as --gtest_filter.
        proc = subprocess.run([sys.executable, PROFILE, "--binary", gtest, "--filter", "SparseAttention*", "--list"], cwd=work,
                              env=base, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
        if proc.returncode != 0 or proc.stdout.split() != ["SparseAttentionGpu.Decode", "SparseAttentionGpu.Prefill"]:
            fail(f"gtest --list: exit {proc.returncode}: {proc.stdout!r}")
        proc = subprocess.run([sys.executable, PROFILE, "--binary", gtest, "--filter", "SparseAttentionGpu.Decode",
                               "--out", out], cwd=work, env=with_ncu, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=60)
        run = json.load(open(record))
        if proc.returncode != 0 or run["argv"] != ["--gtest_filter=SparseAttentionGpu.Decode"]:
            fail(f"gtest profile: exit {proc.returncode}, the binary ran with {run['argv']}: {proc.stdout[-1000:]}")

        # Exit 2: no such binary, a filter that selects nothing, nothing profiled.
        proc = subprocess.run([sys.executable, PROFILE, "--binary", "bench_nonesuch", "--filter", "x"], cwd=work,
                              env=with_ncu, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
        if proc.returncode != 2 or "binary 'bench_nonesuch' not found" not in proc.stdout:
            fail(f"missing binary: exit {proc.returncode}: {proc.stdout!r}")
        proc = profile("--filter", "BM_no_such_benchmark", out=out)
        if proc.returncode != 2 or "selects nothing" not in proc.stdout:
            fail(f"empty filter: exit {proc.returncode}: {proc.stdout!r}")
        proc = profile("--filter", "BM_empty_kernel", "--sampling-interval", "32", out=out)
        if proc.returncode != 2 or "--sampling-interval must be in 0-31, got 32" not in proc.stdout:
            fail(f"--sampling-interval 32: exit {proc.returncode}: {proc.stdout!r}")
        proc = profile("--filter", "BM_empty_kernel", "--kernel-regex", "nonesuch", "--name", "none", out=out,
                       env=dict(with_ncu, FAKE_NCU="none"))
        if proc.returncode != 2 or "nothing was profiled" not in proc.stdout or "No kernels were profiled" not in proc.stdout:
            fail(f"nothing profiled: exit {proc.returncode}: {proc.stdout!r}")
        if "NO SUMMARY: nothing was profiled" not in open(os.path.join(out, "none.summary.txt")).read():
            fail("nothing profiled: the summary does not say so")

        # ncu's own failure: its exit code, and a summary that says there is none.
        proc = profile("--filter", "BM_empty_kernel", "--name", "failed", out=out, env=dict(with_ncu, FAKE_NCU="fail"))
        if proc.returncode != 3 or "ncu exited 3" not in proc.stdout:
            fail(f"ncu failing: exit {proc.returncode}: {proc.stdout!r}")
        if "NO SUMMARY: ncu exited 3" not in open(os.path.join(out, "failed.summary.txt")).read():
            fail("ncu failing: the summary does not say so")
        # A run that fails after the report was written: summarised, noted, ncu's code.
        proc = profile("--filter", "BM_empty_kernel", "--name", "late", out=out, env=dict(with_ncu, FAKE_NCU_EXIT="5"))
        late = open(os.path.join(out, "late.summary.txt")).read()
        if proc.returncode != 5 or "NOTE: ncu exited 5" not in late or "[0] dsv4h::sparse_attention_mma" not in late:
            fail(f"late failure: exit {proc.returncode}: {late!r}")
        # ncu ending the binary after the last requested launch (--kill) is no failure.
        proc = profile("--filter", "BM_empty_kernel", "--name", "killed", "--launch-count", "2", out=out,
                       env=dict(with_ncu, FAKE_NCU_EXIT="137"))
        killed = open(os.path.join(out, "killed.summary.txt")).read()
        if proc.returncode != 0 or "ncu ended the binary after its last profiled launch" not in killed:
            fail(f"--kill: exit {proc.returncode}: {killed!r}")
        proc = profile("--filter", "BM_empty_kernel", "--run-to-end", out=out)
        if proc.returncode != 0 or "--kill" in " ".join(json.load(open(os.path.join(fake, "ncu_args.json")))):
            fail(f"--run-to-end: exit {proc.returncode}, ncu given --kill")
    print("gpu-profile: summary from ncu's CSV pages, --help, --list, exit 2 cases and ncu's failures as expected")


if __name__ == "__main__":
    main()
