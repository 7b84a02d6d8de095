#!/usr/bin/env python3
"""GPU run records for reports/gpu/.

  collect --work DIR --out FILE   (on the GPU machine, by ci/gpu-suite) gathers the raw outputs of a
                                  run: gtest JSON, dsv4h verify JSON, mutant verdicts, race mutant
                                  verdicts, sanitizer exits, Google Benchmark JSON, torch peers,
                                  device clocks.
  merge PART.json... --out FILE   (here) joins the parts of a session's runs, adds the commit and
                                  the date, judges the benchmark goals, and prints a table.
"""
import argparse
import csv
import datetime
import glob
import json
import os
import re
import statistics
import subprocess
import sys

# A gtest suite's component, by the prefix of its name. Metadata* suites test attn_metadata and
# mtp_expand together (their kernels share one graph step).
SUITE_COMPONENT = {"FilteredSiluMul": "filtered_silu_mul", "AttnMetadata": "attn_metadata", "Metadata": "attn_metadata",
                   "MtpExpand": "mtp_expand", "MemoryPool": "memory_pool", "KvPool": "memory_pool",
                   "KvCache": "memory_pool", "GraphCaptureGuard": "harness/graph_replay",
                   "Bf16": "harness/dtype", "Fp8E4m3": "harness/dtype", "Compare": "harness/compare",
                   "Tolerance": "harness/tolerance", "CaseSpec": "harness/case_spec", "CaseFileTest": "harness/case_file",
                   "LatencyFloor": "bench/latency_floor"}


# Google Benchmark's own fields of a run; every other key is one of the benchmark's counters.
GBENCH_FIELDS = {"name", "family_index", "per_family_instance_index", "run_name", "run_type", "repetitions",
                 "repetition_index", "threads", "iterations", "real_time", "cpu_time", "time_unit", "aggregate_name",
                 "aggregate_unit", "error_occurred", "error_message", "bytes", "flops", "copy_ceiling_GBps"}


def component_of(suite):
    suite = suite.split("/")[-1]
    for prefix, component in sorted(SUITE_COMPONENT.items(), key=lambda kv: -len(kv[0])):
        if suite.startswith(prefix):
            return component
    return "unknown"


def worst_budget(checks):
    """The largest budget_used of a case's checks; "inf" (a check failed outright) wins."""
    values = [k["budget_used"] for k in checks]
    return "inf" if "inf" in values else max(values or [0])


def load(path):
    with open(path) as f:
        return json.load(f)


def collect(work):
    part = {"tests": [], "mutants": [], "perturb": [], "sanitizer": [], "benchmarks": [], "context": {}}
    for path in sorted(glob.glob(os.path.join(work, "gtest", "*.json"))):
        binary = os.path.basename(path)[:-5].split(".shard")[0]  # a binary's gtest shards are one binary
        for suite in load(path)["testsuites"]:
            for t in suite["testsuite"]:
                status = "skip" if t.get("result") == "SKIPPED" else ("fail" if t.get("failures") else "pass")
                part["tests"].append({"binary": binary, "name": suite["name"] + "." + t["name"],
                                      "component": component_of(suite["name"]), "status": status, "time": t.get("time")})
    # dsv4h verify, one file per component (ci/gpu-suite runs the components side by side).
    for path in sorted(glob.glob(os.path.join(work, "verify", "*.json"))):
        v = load(path)
        verify = part.setdefault("verify", {"device": v["device"], "passed": 0, "failed": 0, "cases": [],
                                            "graph_replay": []})
        verify["passed"] += v["passed"]
        verify["failed"] += v["failed"]
        verify["cases"] += [{"case": c["case"], "source": c["source"], "status": c["status"],
                             "budget_used": worst_budget(c["checks"])} for c in v["cases"]]
        verify["graph_replay"] += v["graph_replay"]
    part["mutants"] = [load(p) for p in sorted(glob.glob(os.path.join(work, "mutants", "*.json")))]
    # The perturb phase's race mutant verdicts, a file a run: <mutant>.<check>.<run>.json, check plain,
    # perturbed or racecheck.
    for path in sorted(glob.glob(os.path.join(work, "perturb", "*.json"))):
        check, run = os.path.basename(path)[:-len(".json")].split(".")[1:]
        part["perturb"].append(dict(load(path), check=check, run=int(run)))
    part["sanitizer"] = [load(p) for p in sorted(glob.glob(os.path.join(work, "sanitizer", "*.json")))]
    for binary, paths in bench_processes(work).items():
        runs = [load(path) for path in paths]
        for bench in runs:
            # The context of a binary that measured the copy ceiling, where one did.
            if "copy_ceiling_GBps" in bench["context"] or "benchmark" not in part["context"]:
                part["context"]["benchmark"] = bench["context"]
        part["benchmarks"] += across_processes(runs)
    if os.path.exists(os.path.join(work, "torch.json")):
        part["torch_peers"] = load(os.path.join(work, "torch.json"))
    for path in sorted(glob.glob(os.path.join(work, "torch-*.json"))):
        part.setdefault("torch_peers_more", {})[os.path.basename(path)[len("torch-"):-len(".json")]] = load(path)
    if os.path.exists(os.path.join(work, "device.csv")):
        with open(os.path.join(work, "device.csv")) as f:
            part["context"]["nvidia_smi"] = list(csv.DictReader(f, skipinitialspace=True))
    return part


def bench_processes(work):
    """A run's Google Benchmark files by binary: bench-<binary>.json, or one bench-<binary>.p<i>.json
    for each process where ci/gpu-suite ran the binary several times."""
    by_binary = {}
    for path in sorted(glob.glob(os.path.join(work, "bench-*.json"))):
        binary = re.sub(r"\.p\d+$", "", os.path.basename(path)[len("bench-"):-len(".json")])
        by_binary.setdefault(binary, []).append(path)
    return by_binary


def across_processes(runs):
    """One entry a benchmark from its median aggregates in each process's output: the median over the
    processes of its time and of each numeric counter (a paired ratio too), every process's time
    and paired ratio kept. A process of a decode-size kernel runs in one of two modes about 0.1 us
    apart (the empty kernel too), so one process can land a goal on either side of its bound."""
    entries = {}
    for bench in runs:
        for b in bench["benchmarks"]:
            if b.get("aggregate_name") == "median":
                entries.setdefault(b["run_name"], []).append(b)
    merged = []
    for name, bs in entries.items():
        counters = {}
        for key in bs[0]:
            if key in GBENCH_FIELDS:
                continue
            values = [b[key] for b in bs if key in b]
            numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
            counters[key] = statistics.median(values) if numeric else values[0]
        ceilings = [b["copy_ceiling_GBps"] for b in bs if b.get("copy_ceiling_GBps")]
        entry = {"name": name, "median_us": statistics.median(b["real_time"] for b in bs), "bytes": bs[0].get("bytes", 0),
                 "flops": bs[0].get("flops", 0), "copy_ceiling_GBps": statistics.median(ceilings) if ceilings else None,
                 "repetitions": bs[0].get("repetitions"), "counters": counters}
        if len(bs) > 1:
            entry["processes"] = len(bs)
            entry["process_median_us"] = [b["real_time"] for b in bs]
            if all("ratio_to_empty" in b for b in bs):
                entry["process_ratio_to_empty"] = [b["ratio_to_empty"] for b in bs]
        merged.append(entry)
    return merged


def derive(b):
    """A benchmark's name without run settings, its GB/s and its fraction of the copy ceiling."""
    b = dict(b)
    b["name"] = re.sub(r"/(iterations|repeats|min_time):[^/]+", "", b["name"])
    b["GBps"] = b["bytes"] / (b["median_us"] * 1e-6) / 1e9 if b["median_us"] else 0.0
    if b.get("copy_ceiling_GBps"):
        b["fraction_of_ceiling"] = b["GBps"] / b["copy_ceiling_GBps"]
    return b


def with_floor(goal, floor, meets):
    """A goal with the same measure taken on its floor benchmark (the faster copy of the same
    bytes, or a kernel doing nothing but the same dependent loads, timed the same way), and whether
    the floor itself meets the goal: where it does not, the goal asks for more than this device
    reaches with no work at all beside the data movement. Goals without a floor benchmark (e.g.
    196608 rows, whose copy would not fit the benchmark's buffers) carry none."""
    if floor is not None:
        goal["floor"] = round(floor, 4)
        goal["floor_meets_goal"] = bool(meets(floor))
    return goal


def copy_fraction(copy, b):
    """The fraction of the copy ceiling that a floor benchmark reached (derive() computed it)."""
    return copy.get("fraction_of_ceiling") if copy else None


def fastest_copy(by_name, name):
    """Of the two copies of a goal's bytes, by the driver (BM_copy_same_bytes...) and by a copy kernel
    (BM_copy_kernel_same_bytes..., same arguments), the faster: a floor is the least any kernel
    could cost, and neither copy is the faster at every size. `name` is the driver copy's."""
    present = [b for b in (by_name.get(name), by_name.get(name.replace("BM_copy_same_bytes", "BM_copy_kernel_same_bytes", 1)))
               if b]
    return min(present, key=lambda b: b["median_us"]) if present else None


def slowest(*floors):
    """Of a goal's floor benchmarks (its dependent loads, its same-bytes copy), the one that takes
    longest: the least the goal's kernel can cost, since it does both."""
    present = [f for f in floors if f]
    return max(present, key=lambda f: f["median_us"]) if present else None


PAIRED = "paired with its samples"  # how a ratio to the empty kernel was measured, where it was


def ratio_to_empty(b, empty):
    """A benchmark's time over an empty kernel's, and how it was measured: the median of the ratios
    to an empty kernel timed right after each of its samples (counter ratio_to_empty, since the
    benchmarks pair them), else its median over the binary's empty-kernel benchmark's; (None, None)
    where the benchmark (or, unpaired, the empty kernel's) did not run."""
    if not b:
        return None, None
    paired = b.get("counters", {}).get("ratio_to_empty")
    if paired:
        return paired, PAIRED
    if empty:
        return b["median_us"] / empty["median_us"], "against the empty-kernel benchmark"
    return None, None


def with_processes(goal, b):
    """A paired ratio goal with the ratio each benchmark process measured, where there were several:
    a value near its bound can be met in some processes and missed in others."""
    if goal.get("ratio_measured") == PAIRED and b.get("process_ratio_to_empty"):
        goal["value_by_process"] = [round(v, 3) for v in b["process_ratio_to_empty"]]
    return goal


def time_ratio(floor, empty):
    return floor["median_us"] / empty["median_us"] if floor and empty else None


def judge_filtered_silu_mul(report, by_name):
    """The benchmark goals of issue 2, each with the numbers it was judged on."""
    goals = []

    def bench(rows, permille):
        return by_name.get(f"BM_filtered_silu_mul/rows:{rows}/kept_permille:{permille}/manual_time")

    for rows, need in ((24576, 0.95), (196608, 0.95), (3072, 0.80)):
        b = bench(rows, 1000)
        if b and "fraction_of_ceiling" in b:
            goals.append(with_floor({"goal": f"rows={rows} all kept: >= {need:.0%} of copy bandwidth",
                                     "value": round(b["fraction_of_ceiling"], 4), "met": b["fraction_of_ceiling"] >= need},
                                    copy_fraction(fastest_copy(by_name, f"BM_copy_same_bytes/rows:{rows}/manual_time"), b),
                                    lambda v: v >= need))
    for rows in (24576, 196608):
        full = bench(rows, 1000)
        for permille, need in ((500, 0.53), (125, 0.20)):
            b = bench(rows, permille)
            if full and b:
                ratio = b["median_us"] / full["median_us"]
                goals.append({"goal": f"rows={rows} kept {permille / 1000:g}: <= {need}x the all-kept time",
                              "value": round(ratio, 4), "met": ratio <= need})
    empty = by_name.get("BM_empty_kernel/manual_time")
    decode = bench(6, 1000)
    if empty and decode:
        ratio = decode["median_us"] / empty["median_us"]
        goals.append(with_floor({"goal": "rows=6 all kept: <= 1.2x an empty kernel", "value": round(ratio, 4), "met": ratio <= 1.2},
                                time_ratio(by_name.get("BM_dependent_loads/depth:2/manual_time"), empty),
                                lambda v: v <= 1.2))
    for peer in report.get("torch_peers", {}).get("peers", []):
        for permille in (1000, 500, 125):
            b = bench(peer["rows"], permille)
            if not b:
                continue
            for kind in ("eager", "compile"):
                ratio = b["median_us"] / peer[f"{kind}_us"]
                goals.append({"goal": f"rows={peer['rows']} kept {permille / 1000:g}: faster than torch {kind}",
                              "value": round(ratio, 4), "met": ratio < 1.0})
    return goals


def judge_metadata(report, by_name):
    """The benchmark goals of issue 5: the update <= 3 us in a graph and >= 10x faster than torch's
    per-field copies (eager); the MTP expansion within 1.5x of an empty-kernel graph and faster than torch's
    repeat_interleave with output_size (torch timed in a CUDA graph too, and eagerly for the record)."""
    goals = []
    peers = report.get("torch_peers_more", {}).get("metadata", {})
    for peer in peers.get("attn_metadata", []):
        # The goals judge a replay's update (temp:0, built straight into the buffers); the same update
        # also writing the staging set, as an eager step does (temp:1), is named beside it.
        case = f"bs:{peer['bs']}/verify:{peer['verify']}/ctx:{peer['ctx']}/temp:0"
        ours = by_name.get(f"BM_attn_metadata_update/{case}/manual_time")
        if not ours:
            continue
        eager = by_name.get(f"BM_attn_metadata_update/{case[:-1]}1/manual_time")
        what = f"attn_metadata update bs={peer['bs']} verify={peer['verify']} ctx={peer['ctx']}, a replay's"
        if eager:
            what += f" (with the staging set written too: {eager['median_us']:.3f} us)"
        floor = slowest(by_name.get("BM_dependent_loads_graph/depth:3/manual_time"),
                        fastest_copy(by_name, f"BM_copy_same_bytes_update/{case}/manual_time"))
        goals.append(with_floor({"goal": f"{what}: <= 3 us per graph replay", "value": round(ours["median_us"], 3),
                                 "met": ours["median_us"] <= 3.0},
                                floor["median_us"] if floor else None, lambda v: v <= 3.0))
        # The 10x is against per-field copies as an engine runs them, eagerly before a replay
        # (its 34-37 us); captured in a graph too, torch's copies cost less than 10x a one-node graph.
        speedup = peer["eager_us"] / ours["median_us"]
        goals.append({"goal": f"{what}: >= 10x faster than torch per-field copies, eager ({peer['eager_us']:.1f} us; "
                              f"in a graph {peer['graph_us']:.1f} us, {peer['graph_us'] / ours['median_us']:.2f}x)",
                      "value": round(speedup, 2), "met": speedup >= 10})
    empty = by_name.get("BM_empty_kernel_graph/manual_time")
    for peer in peers.get("mtp_expand", []):
        ours = by_name.get(f"BM_mtp_expand/bs:{peer['bs']}/topk:{peer['topk']}/fields:{peer['fields']}/manual_time")
        if not ours:
            continue
        what = f"mtp_expand bs={peer['bs']} topk={peer['topk']} fields={peer['fields']}"
        ratio, measured = ratio_to_empty(ours, empty)
        if ratio is not None:
            floor = slowest(by_name.get("BM_dependent_loads_graph/depth:1/manual_time"),
                            fastest_copy(by_name, f"BM_copy_same_bytes_mtp/bs:{peer['bs']}/topk:{peer['topk']}/fields:{peer['fields']}/manual_time"))
            goals.append(with_floor(with_processes({"goal": f"{what}: <= 1.5x an empty-kernel graph", "value": round(ratio, 3),
                                                    "met": ratio <= 1.5, "ratio_measured": measured}, ours),
                                    time_ratio(floor, empty), lambda v: v <= 1.5))
        ratio = ours["median_us"] / peer["graph_us"]
        goals.append({"goal": f"{what}: faster than torch repeat_interleave in a graph ({peer['graph_us']:.1f} us)",
                      "value": round(ratio, 3), "met": ratio < 1.0})
    return goals


def judge_memory_pool(report, by_name):
    """The benchmark goals of issue 4: >= 85% of the copy bandwidth at >= 32 MB moved (in both slot
    orders of the benchmark: scatter:0 page runs, a prefill's; scatter:1 every token shuffled, a
    decode's), decode-size stores within 1.5x of an empty kernel, and the torch peer (index_put /
    gather on the same bytes, at shuffled slots) beaten by >= 2x."""
    goals = []
    for op in ("store", "gather"):
        for b in by_name.values():
            if not b["name"].startswith(f"BM_kv_{op}/") or not b.get("fraction_of_ceiling"):
                continue
            if b["bytes"] >= 32e6:
                tokens, scatter = re.search(r"tokens:(\d+)/scatter:(\d+)", b["name"]).groups()
                # Of the floors, the lower: the faster copy of the same bytes (contiguous), and the
                # same bytes between the same slots without the format's arithmetic (BM_kv_*_floor).
                floors = [f for f in (copy_fraction(fastest_copy(by_name, f"BM_copy_same_bytes_pool/tokens:{tokens}/manual_time"), b),
                                      copy_fraction(by_name.get(f"BM_kv_{op}_floor/tokens:{tokens}/scatter:{scatter}/manual_time"), b))
                          if f is not None]
                goals.append(with_floor({"goal": f"{b['name']}: >= 85% of copy bandwidth ({b['bytes'] / 1e6:.0f} MB)",
                                         "value": round(b["fraction_of_ceiling"], 4), "met": b["fraction_of_ceiling"] >= 0.85},
                                        min(floors) if floors else None, lambda v: v >= 0.85))
    empty = by_name.get("BM_empty_kernel_pool/manual_time")
    for tokens in (1, 8, 64, 256):
        store = by_name.get(f"BM_kv_store/tokens:{tokens}/scatter:1/manual_time")
        ratio, measured = ratio_to_empty(store, empty)
        if ratio is not None:
            # Of the floors, the higher ratio: one dependent load and a store, and the store's
            # bytes moved to the same slots without the format's arithmetic (BM_kv_store_floor).
            scatter = by_name.get(f"BM_kv_store_floor/tokens:{tokens}/scatter:1/manual_time")
            floors = [r for r in (time_ratio(by_name.get("BM_dependent_loads_pool/depth:1/manual_time"), empty),
                                  ratio_to_empty(scatter, empty)[0]) if r is not None]
            goals.append(with_floor(with_processes({"goal": f"kv store of {tokens} tokens: <= 1.5x an empty kernel",
                                                    "value": round(ratio, 3), "met": ratio <= 1.5, "ratio_measured": measured},
                                                   store),
                                    max(floors) if floors else None, lambda v: v <= 1.5))
    for peer in report.get("torch_peers_more", {}).get("memory_pool", {}).get("memory_pool", []):
        for op in ("store", "gather"):
            ours = by_name.get(f"BM_kv_{op}/tokens:{peer['tokens']}/scatter:1/manual_time")
            if ours:
                speedup = peer[f"{op}_us"] / ours["median_us"]
                goals.append({"goal": f"kv {op} of {peer['tokens']} tokens: >= 2x faster than torch ({peer[f'{op}_us']:.1f} us)",
                              "value": round(speedup, 2), "met": speedup >= 2})
    return goals


def judge(report):
    """Every issue's benchmark goals that this report has the numbers for."""
    by_name = {b["name"]: b for b in report.get("benchmarks", [])}
    return (judge_filtered_silu_mul(report, by_name) + judge_metadata(report, by_name) +
            judge_memory_pool(report, by_name))


def part_device(part):
    """The card a part ran on: nvidia-smi's name, else dsv4h verify's without its backend's suffix
    (" (nvidia, device 0)"); None where the part names none (verify on the CPU, or a part collected
    before ci/gpu-suite queried the card in every phase)."""
    smi = part.get("context", {}).get("nvidia_smi") or [{}]
    name = smi[0].get("name") or part.get("verify", {}).get("device", "")
    return None if name in ("", "cpu") else re.sub(r" \([^()]*, device \d+\)$", "", name)


def print_race_mutants(verdicts):
    """A line a race mutant and check (plain, racecheck, perturbed): in how many runs it was caught."""
    by_check = {}
    for v in verdicts:
        by_check.setdefault((v["mutant"], v["check"]), []).append(v)
    order = {"plain": 0, "racecheck": 1, "perturbed": 2}
    for (mutant, check), runs in sorted(by_check.items(), key=lambda kv: (kv[0][0], order[kv[0][1]])):
        caught = sum(v["caught"] for v in runs)
        other = sorted({v["status"] for v in runs} - {"caught", "survived"})
        print(f"race mutant {mutant:<24} {check:<9} caught in {caught} of {len(runs)} runs"
              + (f" ({', '.join(other)})" if other else ""))


def merge(parts, out, commit):
    # A record is one card's: the lent machine is an H100 one call and an H200 the next, and a
    # goal judged on one card's times must not be labelled with the other's name.
    loaded = {path: load(path) for path in parts}
    devices = {path: part_device(part) for path, part in loaded.items()}
    if len({d for d in devices.values() if d}) > 1:
        print("gpu-report merge: the parts ran on different cards: " +
              ", ".join(f"{path} ({device or 'no card named'})" for path, device in devices.items()) +
              "; merge each card's parts into a record of its own", file=sys.stderr)
        return 2
    report = {"commit": commit or subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip(),
              "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "note": "",
              "tests": [], "mutants": [], "perturb": [], "sanitizer": [], "benchmarks": [], "context": {}}
    for part in loaded.values():
        for key in ("tests", "mutants", "perturb", "sanitizer"):
            report[key] += part.get(key, [])
        report["benchmarks"] += [derive(b) for b in part.get("benchmarks", [])]
        report["context"].update(part.get("context", {}))
        for key in ("verify", "torch_peers", "torch_peers_more"):
            if key in part:
                report[key] = part[key]
    smi = report["context"].get("nvidia_smi") or [{}]
    report["device"] = smi[0].get("name") or report.get("verify", {}).get("device", "unknown")
    report["goals"] = judge(report)
    with open(out, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    counts = {s: sum(t["status"] == s for t in report["tests"]) for s in ("pass", "fail", "skip")}
    print(f"{report['device']} at {report['commit'][:10]}, {report['date']}")
    print(f"tests: {counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped")
    for m in report["mutants"]:
        verdict = "caught" if m["caught"] else m.get("status", "survived").upper()
        failed = f" ({m['failed']}/{m['tests']} tests failed)" if "tests" in m else ""
        print(f"mutant {m['mutant']:<24} {verdict}{failed}")
    print_race_mutants(report["perturb"])
    for s in report["sanitizer"]:
        print(f"compute-sanitizer {s['tool']:<9} {s['binary']:<16} exit {s['exit']}")
    for b in report["benchmarks"]:
        frac = b.get("fraction_of_ceiling")
        print(f"{b['name']:<58} {b['median_us']:10.2f} us  {b['GBps']:8.1f} GB/s"
              + (f"  {frac:6.1%} of copy" if frac is not None else ""))
    for g in report["goals"]:
        floor = f"  (floor {g['floor']}{'' if g['floor_meets_goal'] else ', itself misses'})" if "floor" in g else ""
        processes = f"  (processes {' '.join(str(v) for v in g['value_by_process'])})" if "value_by_process" in g else ""
        print(f"{'met ' if g['met'] else 'MISS'}  {g['goal']:<58} {g['value']}{floor}{processes}")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--work", required=True)
    c.add_argument("--out", required=True)
    m = sub.add_parser("merge")
    m.add_argument("parts", nargs="+")
    m.add_argument("--out", required=True)
    m.add_argument("--commit", help="the commit the run's binaries were built from (default: HEAD)")
    args = parser.parse_args()
    if args.command == "collect":
        with open(args.out, "w") as f:
            json.dump(collect(args.work), f, indent=1)
        return 0
    return merge(args.parts, args.out, args.commit)


if __name__ == "__main__":
    sys.exit(main())
