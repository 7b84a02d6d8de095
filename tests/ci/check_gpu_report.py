#!/usr/bin/env python3
"""ci/gpu-report.py collect and merge on a made-up run (no GPU): a benchmark binary run in three
processes (bench-<binary>.p<i>.json) becomes one entry a benchmark holding the median over the
processes of its time, of its numeric counters (a paired ratio too) and of the copy ceiling, with
each process's time and paired ratio; a label is kept; a binary run once (bench-<binary>.json) is
taken as it is; a process's file cut short keeps the entries it wrote whole (none: it is named
unreadable and left out); merge judges a paired ratio goal on the median and lists each process's ratio, and
gives a bandwidth goal the faster of its two copy floors (by the driver, by the copy kernel); merge
refuses parts that ran on different cards (nvidia-smi's name, or dsv4h verify's) and names them;
the goals are the components' that collect found beside the run (components.json), else those of
--components, and a merge with neither is refused; a record is schema 2 with its kind and phases;
a failed gtest or verify case keeps its message and reproduction line; a gtest shard killed at its
timeout (no JSON) is a failed test, the one its log shows running.

usage: check_gpu_report.py DSV4H
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPORT = os.path.join(ROOT, "ci", "gpu-report.py")


STORE = "BM_kv_store/tokens:8/scatter:1/manual_time"
SILU = "BM_filtered_silu_mul/rows:3072/kept_permille:1000/manual_time"


def median_entry(name, us, ratio, ceiling):
    """Google Benchmark's median aggregate of a benchmark, as --benchmark_out writes it."""
    return {"name": name + "_median", "run_name": name, "run_type": "aggregate", "aggregate_name": "median",
            "repetitions": 10, "real_time": us, "cpu_time": us, "time_unit": "us", "bytes": 1000,
            "copy_ceiling_GBps": ceiling, "ratio_to_empty": ratio, "label": "case(seed=7)"}


def write(work, file, entries):
    with open(os.path.join(work, file), "w") as f:
        json.dump({"context": {"host_name": "fake"}, "benchmarks": entries}, f)


def main():
    failures = []

    def check(what, ok):
        print(("ok    " if ok else "FAIL  ") + what)
        if not ok:
            failures.append(what)

    dsv4h = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as work:
        with open(os.path.join(work, "components.json"), "w") as f:
            f.write(subprocess.run([dsv4h, "list", "--json"], stdout=subprocess.PIPE, text=True, check=True).stdout)
        # A test is its most specific filter's: moe's "*moe*" also selects moe_routing's tests.
        sys.path.insert(0, os.path.join(os.path.dirname(REPORT)))
        import dsv4h_components
        listed = dsv4h_components.load(os.path.join(work, "components.json"))
        check("a test selected by two components' filters is the more specific one's",
              dsv4h_components.component_of_test(listed, "VerifyCases/ComponentGpu.MatchesReference/moe_routing_tokens_1")
              == "moe_routing" and dsv4h_components.component_of_test(listed, "MoeGpu.Works") == "moe")
        # Three processes: the second runs in the slow mode.
        for i, (us, ratio, ceiling) in enumerate(((2.0, 1.45, 3900.0), (2.3, 1.62, 4000.0), (2.1, 1.48, 3950.0)), 1):
            write(work, f"bench-bench_a.p{i}.json",
                  [median_entry(STORE, us, ratio, ceiling),
                   {"name": STORE, "run_name": STORE, "run_type": "iteration", "real_time": 9.9, "time_unit": "us"},
                   median_entry("BM_empty_kernel_pool/manual_time", 1.4, 1.0, ceiling)])
        # 1000 bytes against a ceiling of 1 GB/s: a fraction of 1 / us. The copy kernel is the faster here.
        write(work, "bench-bench_b.json", [median_entry("BM_gather/manual_time", 5.0, 3.0, 3800.0),
                                           median_entry(SILU, 1.5, None, 1.0),
                                           median_entry("BM_copy_same_bytes/rows:3072/manual_time", 1.4, None, 1.0),
                                           median_entry("BM_copy_kernel_same_bytes/rows:3072/manual_time", 1.2, None, 1.0)])
        # A fourth process killed at its timeout: its JSON cut short (2026-12-06, bench_sparse_attention).
        with open(os.path.join(work, "bench-bench_a.p4.json"), "w") as f:
            f.write('{"context": {}, "benchmarks": [{"name": ')
        # A process that crashed after its first benchmark (2026-12-07, bench_model): the entry it
        # wrote whole is a measurement.
        whole = json.dumps(median_entry("BM_layer/bs:1/manual_time", 660.0, None, 3000.0))
        with open(os.path.join(work, "bench-bench_c.json"), "w") as f:
            f.write('{"context": {"host_name": "fake"}, "benchmarks": [' + whole + ',\n    {"name": "BM_layer/bs:64"')
        out = os.path.join(work, "results.json")
        run = subprocess.run([sys.executable, REPORT, "collect", "--work", work, "--out", out],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        check("collect exits 0", run.returncode == 0)
        if run.returncode != 0:
            print(run.stdout)
            return 1
        check("a process cut short is named and the others still count",
              json.load(open(out)).get("bench_unreadable") == ["bench-bench_a.p4.json"])
        check("a process cut short after an entry keeps the entry, and says so",
              json.load(open(out)).get("bench_salvaged") == [{"file": "bench-bench_c.json", "entries": 1}])
        by_name = {b["name"]: b for b in json.load(open(out))["benchmarks"]}
        check("one entry a benchmark, not one a process",
              sorted(by_name) == sorted(["BM_empty_kernel_pool/manual_time", "BM_gather/manual_time", STORE, SILU,
                                         "BM_layer/bs:1/manual_time",
                                         "BM_copy_same_bytes/rows:3072/manual_time",
                                         "BM_copy_kernel_same_bytes/rows:3072/manual_time"]))
        a = by_name[STORE]
        check("the time is the median over the processes", a["median_us"] == 2.1)
        check("each process's time is kept", a.get("processes") == 3 and a.get("process_median_us") == [2.0, 2.3, 2.1])
        check("a paired ratio is the median over the processes", a["counters"].get("ratio_to_empty") == 1.48)
        check("each process's paired ratio is kept", a.get("process_ratio_to_empty") == [1.45, 1.62, 1.48])
        check("the copy ceiling is the median over the processes", a["copy_ceiling_GBps"] == 3950.0)
        check("a label is kept", a["counters"].get("label") == "case(seed=7)")
        b = by_name["BM_gather/manual_time"]
        check("a binary run once is taken as it is", b["median_us"] == 5.0 and "processes" not in b
              and b["counters"].get("ratio_to_empty") == 3.0)
        report = os.path.join(work, "report.json")
        run = subprocess.run([sys.executable, REPORT, "merge", out, "--commit", "0" * 40, "--out", report],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        check("merge exits 0", run.returncode == 0)
        check("merge keeps the processes cut short, and prints them",
              run.returncode == 0 and json.load(open(report)).get("bench_unreadable") == ["bench-bench_a.p4.json"]
              and "benchmark process bench-bench_a.p4.json: unreadable" in run.stdout
              and json.load(open(report)).get("bench_salvaged") == [{"file": "bench-bench_c.json", "entries": 1}]
              and "benchmark process bench-bench_c.json: cut short" in run.stdout)
        goals = {g["goal"]: g for g in json.load(open(report))["goals"]} if run.returncode == 0 else {}
        goal = goals.get("kv store of 8 tokens: <= 1.5x an empty kernel", {})
        check("the ratio goal is judged on the median over the processes", goal.get("value") == 1.48 and goal.get("met"))
        check("the ratio goal lists each process's ratio", goal.get("value_by_process") == [1.45, 1.62, 1.48])
        check("merge prints each process's ratio", "(processes 1.45 1.62 1.48)" in run.stdout)
        goal = goals.get("rows=3072 all kept: >= 80% of copy bandwidth", {})
        check("a bandwidth goal's floor is the faster copy", goal.get("value") == 0.6667 and goal.get("floor") == 0.8333
              and goal.get("floor_meets_goal"))
        record = json.load(open(report)) if run.returncode == 0 else {}
        check("a merged record is schema 2, a suite, and lists its phases",
              record.get("schema_version") == 2 and record.get("kind") == "suite"
              and record.get("phases") == ["benchmarks", "goals"])
        check("its goals name their component and unit",
              all(g.get("component") and g.get("unit") for g in record.get("goals", [])))
        # A failed gtest keeps its message and the reproduction line the harness printed; a failed
        # verify case its message and reproduction.
        failed_work = os.path.join(work, "failed-run")
        os.makedirs(os.path.join(failed_work, "gtest"))
        os.makedirs(os.path.join(failed_work, "verify"))
        case = "filtered_silu_mul(rows=3,seed=1)"
        with open(os.path.join(failed_work, "gtest", "test_gpu.shard0.json"), "w") as f:
            json.dump({"testsuites": [{"name": "FilteredSiluMulGpu", "testsuite": [
                {"name": "Broken", "failures": [{"failure": f"{case}: out[2] = 7\n  reproduce: dsv4h run --case '{case}'\n"
                                                 + "x" * 5000}]},
                {"name": "Fine"}]}]}, f)
        with open(os.path.join(failed_work, "verify", "filtered_silu_mul.json"), "w") as f:
            json.dump({"device": "cpu", "passed": 0, "failed": 1, "graph_replay": [], "cases": [
                {"case": case, "source": "generated", "status": "fail", "message": "out[2] = 7",
                 "reproduce": f"dsv4h run --case '{case}'", "checks": [{"budget_used": "inf"}]}]}, f)
        failed_part = os.path.join(work, "failed-part.json")
        subprocess.run([sys.executable, REPORT, "collect", "--work", failed_work, "--out", failed_part], check=True)
        part = json.load(open(failed_part))
        broken = [t for t in part["tests"] if t["status"] == "fail"]
        check("a failed gtest keeps its message, bounded, and its reproduction line",
              len(broken) == 1 and broken[0]["message"].startswith(case + ": out[2] = 7")
              and len(broken[0]["message"]) <= 2003 and broken[0].get("reproduce") == f"dsv4h run --case '{case}'"
              and "message" not in [t for t in part["tests"] if t["status"] == "pass"][0])
        failed_case = part["verify"]["cases"][0]
        check("a failed verify case keeps its message and reproduction",
              failed_case.get("message") == "out[2] = 7" and failed_case.get("reproduce") == f"dsv4h run --case '{case}'")
        # The model's verify (its own JSON, ci/gpu-suite's model-verify.json) joins the verify cases,
        # a failed case counted and its per-layer checks kept.
        model_checks = [{"check": "layers.0.attn.attend", "budget": 0.01, "max_relative_gap": 0.5, "passed": False}]
        with open(os.path.join(failed_work, "model-verify.json"), "w") as f:
            json.dump({"component": "model", "results": [
                {"case": "model(prompt=5,seed=1)", "backend": "gpu", "passed": True, "checks": []},
                {"case": "model(prompt=9,seed=1)", "backend": "gpu", "passed": False, "checks": model_checks}]}, f)
        subprocess.run([sys.executable, REPORT, "collect", "--work", failed_work, "--out", failed_part], check=True)
        verify = json.load(open(failed_part))["verify"]
        model_cases = [c for c in verify["cases"] if c["case"].startswith("model(")]
        check("the model's verify cases join the record's, a failure counted and its checks kept",
              verify["passed"] == 1 and verify["failed"] == 2 and len(model_cases) == 2
              and model_cases[1]["status"] == "fail" and model_cases[1]["checks"] == model_checks)
        # A gtest shard killed at its step timeout writes no JSON: the test its log shows running is a
        # failure, named, so that the record does not count the finished shards alone; a shard that
        # failed with its JSON is counted from the JSON once.
        killed_work = os.path.join(work, "killed-run")
        os.makedirs(os.path.join(killed_work, "logs"))
        os.makedirs(os.path.join(killed_work, "gtest"))
        with open(os.path.join(killed_work, "summary.txt"), "w") as f:
            f.write("test_gpu_graph.shard5                    exit 124   300s\n"
                    "test_gpu.shard0                          exit   1    12s\n"
                    "test_gpu_perturb.run1.shard2             exit 137    80s\n")
        with open(os.path.join(killed_work, "logs", "test_gpu_graph.shard5.log"), "w") as f:
            f.write("[ RUN      ] ReplayCases/ComponentGraph.Replay/a\n[       OK ] ReplayCases/ComponentGraph.Replay/a (5 ms)\n"
                    "[ RUN      ] ReplayCases/ComponentGraph.Replay/b\n")
        with open(os.path.join(killed_work, "gtest", "test_gpu.shard0.json"), "w") as f:
            json.dump({"testsuites": [{"name": "S", "testsuite": [{"name": "Broken", "failures": [{"failure": "x"}]}]}]}, f)
        killed_part = os.path.join(work, "killed-part.json")
        subprocess.run([sys.executable, REPORT, "collect", "--work", killed_work, "--out", killed_part], check=True)
        failed = [t for t in json.load(open(killed_part))["tests"] if t["status"] == "fail"]
        by_name = {t["name"]: t for t in failed}
        check("a killed gtest shard's running test is a failure naming the kill, a crashed shard's too, "
              "and a shard with its JSON is counted once",
              len(failed) == 3 and "S.Broken" in by_name
              and "exit 124" in by_name.get("ReplayCases/ComponentGraph.Replay/b", {}).get("message", "")
              and by_name.get("test_gpu_perturb.run1.shard2 (no test running)", {}).get("binary") == "test_gpu_perturb.run1")
        # A failing run's record is written, and merge exits 1 naming every failure.
        failing = os.path.join(work, "failing.json")
        with open(failing, "w") as f:
            json.dump({"tests": [{"binary": "test_gpu", "name": "Suite.Broken", "component": "x", "status": "fail"}],
                       "mutants": [{"mutant": "clamp_missing", "caught": False, "status": "survived"}],
                       "sanitizer": [{"tool": "racecheck", "binary": "test_gpu", "exit": 3}],
                       "verify": {"device": "cpu", "passed": 0, "failed": 1, "graph_replay": [],
                                  "cases": [{"case": "c(seed=1)", "source": "generated", "status": "fail"}]}}, f)
        failed_record = os.path.join(work, "failed-record.json")
        run = subprocess.run([sys.executable, REPORT, "merge", failing, "--commit", "0" * 40, "--components", dsv4h,
                              "--out", failed_record], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        check("a failing run's merge exits 1, names each failure and still writes the record",
              run.returncode == 1 and os.path.exists(failed_record) and all(
                  name in run.stdout for name in ("Suite.Broken", "mutant clamp_missing", "racecheck", "c(seed=1)")))
        # The same card named by nvidia-smi in one part and by dsv4h verify in another merges, and so
        # does a part naming no card (verify on the CPU); a part of another card is refused, exit 2,
        # naming both cards.
        h200_smi = os.path.join(work, "h200-smi.json")
        h200_verify = os.path.join(work, "h200-verify.json")
        cpu_verify = os.path.join(work, "cpu-verify.json")
        h100_smi = os.path.join(work, "h100-smi.json")
        verify = {"passed": 1, "failed": 0, "cases": [], "graph_replay": []}
        for path, part in ((h200_smi, {"context": {"nvidia_smi": [{"name": "NVIDIA H200"}]}}),
                           (h200_verify, {"verify": dict(verify, device="NVIDIA H200 (nvidia, device 0)")}),
                           (cpu_verify, {"verify": dict(verify, device="cpu")}),
                           (h100_smi, {"context": {"nvidia_smi": [{"name": "NVIDIA H100 80GB HBM3"}]}})):
            with open(path, "w") as f:
                json.dump(part, f)
        same = os.path.join(work, "same.json")
        run = subprocess.run([sys.executable, REPORT, "merge", h200_smi, h200_verify, cpu_verify, "--commit", "0" * 40,
                              "--out", same], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        check("parts that carry no components are refused (exit 2) without --components",
              run.returncode == 2 and "--components" in run.stdout and not os.path.exists(same))
        run = subprocess.run([sys.executable, REPORT, "merge", h200_smi, h200_verify, cpu_verify, "--commit", "0" * 40,
                              "--components", dsv4h, "--out", same], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
        check("parts of one card (named by nvidia-smi, by verify) and a part naming none merge",
              run.returncode == 0 and json.load(open(same))["device"] == "NVIDIA H200")
        mixed = os.path.join(work, "mixed.json")
        run = subprocess.run([sys.executable, REPORT, "merge", h200_smi, h100_smi, "--commit", "0" * 40,
                              "--components", dsv4h, "--out", mixed],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        check("parts of two cards are refused (exit 2), naming both, and nothing is written",
              run.returncode == 2 and "(NVIDIA H200)" in run.stdout and "(NVIDIA H100 80GB HBM3)" in run.stdout
              and not os.path.exists(mixed))
    print("check_gpu_report: " + ("FAILED: " + "; ".join(failures) if failures else "all passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main())
