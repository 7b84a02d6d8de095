#!/usr/bin/env python3
"""GPU run records for reports/gpu/.

  collect --work DIR --out FILE   (on the GPU machine, by ci/gpu-suite) gathers the raw outputs of a
                                  run: gtest JSON, dsv4h verify JSON, mutant verdicts, race mutant
                                  verdicts, sanitizer exits, Google Benchmark JSON, the peers
                                  (peers/<component>.json: the record's peers.<component>), the
                                  bf16 ceiling, device clocks.
  merge PART.json... --out FILE   (here) joins the parts of a session's runs into a record
                                  (reports/gpu/README.md: schema_version 2, kind "suite"), adds the
                                  commit and the date, judges the benchmark goals, and prints a table; exits 1
                                  (the record still written) on a failed test or verify case, a
                                  mutant not caught or a sanitizer finding, naming each, 2 on bad
                                  input.
  verdict PART.json               the same failures of one part (ci/gpu-suite's exit code).
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dsv4h_components  # noqa: E402
import goals  # noqa: E402

# The suites no component's GPU test filter selects (`dsv4h list --json`): the CPU tests of the
# harness and the references, by the prefix of their name.
HARNESS_SUITES = {"KvCache": "reference/kv_cache", "KvPool": "reference/kv_pool", "GraphCaptureGuard": "harness/graph_replay",
                  "Bf16": "harness/dtype", "Fp8E4m3": "harness/dtype", "Compare": "harness/compare",
                  "Tolerance": "harness/tolerance", "CaseSpec": "harness/case_spec", "CaseFileTest": "harness/case_file",
                  "LatencyFloor": "bench/latency_floor"}


SCHEMA_VERSION = 2  # of a record (reports/gpu/README.md); ci/records-migrate marks the older ones 1
PHASES = ("tests", "verify", "mutants", "perturb", "sanitizer", "benchmarks")  # what a suite record may hold
MESSAGE_CHARS = 2000  # of a failure's message: its first lines say what failed; the log has the rest
# A harness failure's reproduction line (harness/verify.cpp), in the failure's gtest message.
REPRODUCE = re.compile(r"reproduce: (dsv4h run --case '[^']*')")


# Google Benchmark's own fields of a run; every other key is one of the benchmark's counters.
GBENCH_FIELDS = {"name", "family_index", "per_family_instance_index", "run_name", "run_type", "repetitions",
                 "repetition_index", "threads", "iterations", "real_time", "cpu_time", "time_unit", "aggregate_name",
                 "aggregate_unit", "error_occurred", "error_message", "bytes", "flops", "copy_ceiling_GBps"}


def component_of(components, test):
    """A test's component ("Suite.Name"): the one whose GPU test filter selects it, else the harness
    part its suite tests."""
    name = dsv4h_components.component_of_test(components, test)
    if name:
        return name
    suite = test.split(".")[0].split("/")[-1]
    for prefix, part in sorted(HARNESS_SUITES.items(), key=lambda kv: -len(kv[0])):
        if suite.startswith(prefix):
            return part
    return "unknown"


def worst_budget(checks):
    """The largest budget_used of a case's checks; "inf" (a check failed outright) wins."""
    values = [k["budget_used"] for k in checks]
    return "inf" if "inf" in values else max(values or [0])


def failure_details(failures):
    """A failed gtest's message (its failures' text, bounded) and the reproduction line it printed."""
    message = "\n".join(f.get("failure", "") for f in failures)
    found = REPRODUCE.search(message)
    details = {"message": message[:MESSAGE_CHARS] + ("..." if len(message) > MESSAGE_CHARS else "")}
    if found:
        details["reproduce"] = found.group(1)
    return details


def verify_case(c):
    """A dsv4h verify case as a record keeps it: a failed one with its message and reproduction."""
    case = {"case": c["case"], "source": c.get("source", ""), "status": c["status"],
            "budget_used": worst_budget(c.get("checks", []))}
    if c["status"] != "pass":
        case.update({key: c[key] for key in ("message", "reproduce") if c.get(key)})
        if len(case.get("message", "")) > MESSAGE_CHARS:
            case["message"] = case["message"][:MESSAGE_CHARS] + "..."
    return case


def sanitizer_run(s):
    """A sanitizer run's binary, and its gtest shard where the suite sharded it."""
    return s["binary"] + (f" shard {s['shard']}" if s.get("shard") else "")


def sanitizer_found(s):
    """What the tool itself reported, where the run recorded it: a test failing under the tool (exit
    1) is not a finding of the tool's."""
    if s.get("errors") is None:
        return ""
    return f" ({s['errors']} sanitizer errors{', a test failed' if s['exit'] == 1 else ''})"


def load(path):
    with open(path) as f:
        return json.load(f)


def salvage_benchmarks(text):
    """The complete part of a Google Benchmark file cut short (its process killed or crashed while it
    wrote): its context and every benchmark entry written whole, or None when no entry was. Google
    Benchmark writes an entry when the benchmark finishes, so an entry read whole is a measurement."""
    decoder = json.JSONDecoder()
    context = re.search(r'"context"\s*:\s*', text)
    listing = re.search(r'"benchmarks"\s*:\s*\[', text)
    if not context or not listing:
        return None
    try:
        ctx, _ = decoder.raw_decode(text, context.end())
    except json.JSONDecodeError:
        return None
    entries, at = [], listing.end()
    while True:
        at = len(text) - len(text[at:].lstrip(" \t\r\n,"))
        try:
            entry, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            break
        entries.append(entry)
    return {"context": ctx, "benchmarks": entries} if entries else None


def cut_short_shards(work, components):
    """A failed test for each gtest shard that exited non-zero without its JSON (killed at its step
    timeout, or crashed): the test its log shows started and not finished, else the shard itself.
    gtest writes its JSON at the end, so without this a killed shard's tests would count nowhere and
    the record would show only the shards that finished, all passed. The shard's later tests never
    ran; the message says so."""
    summary = os.path.join(work, "summary.txt")
    if not os.path.exists(summary):
        return []
    tests = []
    with open(summary) as f:
        for line in f:
            fields = line.split()  # ci/gpu-suite's step line: NAME exit RC Ts (its own awk reads it so)
            shard = re.fullmatch(r"(test_[\w.]+?)\.shard\d+", fields[0]) if len(fields) == 4 else None
            if not shard or fields[2] == "0":
                continue
            step, binary, code = fields[0], shard.group(1), int(fields[2])
            if os.path.exists(os.path.join(work, "gtest", step + ".json")):
                continue  # gtest finished: its JSON holds the verdicts
            running = []
            log = os.path.join(work, "logs", step + ".log")
            if os.path.exists(log):
                with open(log, errors="replace") as f_log:
                    for text in f_log:
                        started = re.match(r"^\[ RUN +\] (\S+)", text)
                        ended = re.match(r"^\[ +(OK|FAILED) +\] (\S+)", text)
                        if started:
                            running.append(started.group(1))
                        elif ended and ended.group(2) in running:
                            running.remove(ended.group(2))
            how = f"killed at its step timeout (exit {code})" if code in (124, 137) else f"exited {code} without its gtest JSON"
            name = running[-1] if running else f"{step} (no test running)"
            tests.append({"binary": binary, "name": name, "component": component_of(components, name), "status": "fail",
                          "time": fields[3],
                          "message": f"gtest shard {step} {how} " + ("while this test ran" if running else "with no test running")
                          + "; the shard's later tests did not run"})
    return tests


def collect(work):
    part = {"tests": [], "mutants": [], "perturb": [], "sanitizer": [], "benchmarks": [], "context": {}}
    listed = os.path.join(work, "components.json")  # ci/gpu-suite: what the build's dsv4h listed
    # Whose tests: the components' and the models' (dsv4h list --json's "models": the tiny model).
    components = dsv4h_components.load_goal_owners(listed) if os.path.exists(listed) else {}
    if components:
        part["components"] = load(listed)
    for path in sorted(glob.glob(os.path.join(work, "gtest", "*.json"))):
        binary = os.path.basename(path)[:-5].split(".shard")[0]  # a binary's gtest shards are one binary
        for suite in load(path)["testsuites"]:
            for t in suite["testsuite"]:
                status = "skip" if t.get("result") == "SKIPPED" else ("fail" if t.get("failures") else "pass")
                name = suite["name"] + "." + t["name"]
                test = {"binary": binary, "name": name, "component": component_of(components, name),
                        "status": status, "time": t.get("time")}
                if status == "fail":
                    test.update(failure_details(t["failures"]))
                part["tests"].append(test)
    part["tests"] += cut_short_shards(work, components)
    # dsv4h verify, one file per component (ci/gpu-suite runs the components side by side).
    for path in sorted(glob.glob(os.path.join(work, "verify", "*.json"))):
        v = load(path)
        verify = part.setdefault("verify", {"device": v["device"], "passed": 0, "failed": 0, "cases": [],
                                            "graph_replay": []})
        verify["passed"] += v["passed"]
        verify["failed"] += v["failed"]
        verify["cases"] += [verify_case(c) for c in v["cases"]]
        verify["graph_replay"] += v["graph_replay"]
    # The model's dsv4h verify (a JSON of its own: a case passes or fails whole; its checks, each
    # layer's gap against its budget, are kept so that headroom can be followed from run to run).
    model_verify = os.path.join(work, "model-verify.json")
    if os.path.exists(model_verify):
        verify = part.setdefault("verify", {"device": "", "passed": 0, "failed": 0, "cases": [], "graph_replay": []})
        for r in load(model_verify)["results"]:
            verify["passed" if r["passed"] else "failed"] += 1
            verify["cases"].append({"case": r["case"], "source": "model", "status": "pass" if r["passed"] else "fail",
                                    "checks": r["checks"]})
    part["mutants"] = [load(p) for p in sorted(glob.glob(os.path.join(work, "mutants", "*.json")))]
    # The perturb phase's race mutant verdicts, a file a run: <mutant>.<check>.<run>.json, check plain,
    # perturbed or racecheck.
    for path in sorted(glob.glob(os.path.join(work, "perturb", "*.json"))):
        check, run = os.path.basename(path)[:-len(".json")].split(".")[1:]
        part["perturb"].append(dict(load(path), check=check, run=int(run)))
    part["sanitizer"] = [load(p) for p in sorted(glob.glob(os.path.join(work, "sanitizer", "*.json")))]
    for binary, paths in bench_processes(work).items():
        runs = []
        for path in paths:
            try:
                runs.append(load(path))
            except json.JSONDecodeError:
                # A process killed at its timeout (or crashed) leaves its JSON cut short; the step
                # list already records its exit, and the other processes of the binary still count.
                # The entries it wrote whole are kept (bench_salvaged); none, and it is left out.
                with open(path) as f:
                    salvaged = salvage_benchmarks(f.read())
                if salvaged:
                    runs.append(salvaged)
                    part.setdefault("bench_salvaged", []).append(
                        {"file": os.path.basename(path), "entries": len(salvaged["benchmarks"])})
                else:
                    part.setdefault("bench_unreadable", []).append(os.path.basename(path))
        if not runs:
            continue
        for bench in runs:
            # The context of a binary that measured the copy ceiling, where one did.
            if "copy_ceiling_GBps" in bench["context"] or "benchmark" not in part["context"]:
                part["context"]["benchmark"] = bench["context"]
        part["benchmarks"] += across_processes(runs)
    # Each component's peers (tests/peers/<component>.py), by the component its file names.
    for path in sorted(glob.glob(os.path.join(work, "peers", "*.json"))):
        part.setdefault("peers", {})[os.path.basename(path)[:-len(".json")]] = load(path)
    if os.path.exists(os.path.join(work, "ceiling.json")):
        part["ceilings"] = load(os.path.join(work, "ceiling.json"))
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


def merge(parts, out, commit, components_source=None):
    # A record is one card's: the lent machine is an H100 one call and an H200 the next, and a
    # goal judged on one card's times must not be labelled with the other's name.
    loaded = {path: load(path) for path in parts}
    devices = {path: part_device(part) for path, part in loaded.items()}
    if len({d for d in devices.values() if d}) > 1:
        print("gpu-report merge: the parts ran on different cards: " +
              ", ".join(f"{path} ({device or 'no card named'})" for path, device in devices.items()) +
              "; merge each card's parts into a record of its own", file=sys.stderr)
        return 2
    report = {"schema_version": SCHEMA_VERSION, "kind": "suite", "phases": [],
              "commit": commit or subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip(),
              "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "note": "",
              "tests": [], "mutants": [], "perturb": [], "sanitizer": [], "benchmarks": [], "context": {}}
    for part in loaded.values():
        for key in ("tests", "mutants", "perturb", "sanitizer"):
            report[key] += part.get(key, [])
        report.setdefault("bench_unreadable", []).extend(part.get("bench_unreadable", []))
        report.setdefault("bench_salvaged", []).extend(part.get("bench_salvaged", []))
        report["benchmarks"] += [derive(b) for b in part.get("benchmarks", [])]
        report["context"].update(part.get("context", {}))
        for key in ("verify", "ceilings", "torch_peers", "torch_peers_more"):  # the torch_ keys: older parts'
            if key in part:
                report[key] = part[key]
        for component, peers in part.get("peers", {}).items():
            report.setdefault("peers", {})[component] = peers
    smi = report["context"].get("nvidia_smi") or [{}]
    report["device"] = smi[0].get("name") or report.get("verify", {}).get("device") or "unknown"
    # The goals are the descriptors' of the build that ran (its parts carry them), or those of
    # --components (another build's dsv4h, to judge an older record anew).
    listed = [part["components"] for part in loaded.values() if "components" in part]
    try:
        components = (dsv4h_components.load_goal_owners(components_source) if components_source
                      else dsv4h_components.goal_owners(listed[0]) if listed else None)
    except ValueError as error:
        print(f"gpu-report merge: --components: {error}", file=sys.stderr)
        return 2
    if components is None:
        print("gpu-report merge: the parts carry no components (dsv4h list --json) to judge the goals by: "
              "give --components DSV4H", file=sys.stderr)
        return 2
    for key in ("bench_unreadable", "bench_salvaged"):
        if not report[key]:
            del report[key]
    report["goals"] = goals.judge(report, components)
    report["phases"] = [p for p in PHASES if report.get(p)] + (["goals"] if report["goals"] else [])
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
        print(f"compute-sanitizer {s['tool']:<9} {sanitizer_run(s):<24} exit {s['exit']}{sanitizer_found(s)}")
    for name in report.get("bench_unreadable", []):
        print(f"benchmark process {name}: unreadable (killed at its timeout, or crashed), left out")
    for cut in report.get("bench_salvaged", []):
        print(f"benchmark process {cut['file']}: cut short (killed at its timeout, or crashed), "
              f"its {cut['entries']} entries written whole kept")
    for b in report["benchmarks"]:
        frac = b.get("fraction_of_ceiling")
        print(f"{b['name']:<58} {b['median_us']:10.2f} us  {b['GBps']:8.1f} GB/s"
              + (f"  {frac:6.1%} of copy" if frac is not None else ""))
    for g in report["goals"]:
        floor = (f"  (floor {g['floor']}{'' if g['floor_meets_goal'] else ', itself misses: judged within 1.1x of it'})"
                 if "floor" in g else "")
        processes = f"  (processes {' '.join(str(v) for v in g['value_by_process'])})" if "value_by_process" in g else ""
        print(f"{'met ' if g['met'] else 'MISS'}  {g['goal']:<58} {g['value']}{floor}{processes}")
    failures = failures_of(report)
    for f in failures:
        print("FAILED: " + f)
    return 1 if failures else 0


def failures_of(report):
    """What makes a record a failing run: a failed test or verify case, a mutant not caught (also one
    whose run was killed), a race mutant that no perturbed run caught, a sanitizer finding. Missed
    benchmark goals are findings, not failures; so is a race the card's own schedule hid."""
    failures = [f"test {t['name']} ({t['binary']})" for t in report.get("tests", []) if t["status"] == "fail"]
    failures += [f"dsv4h verify: {c['case']}" for c in report.get("verify", {}).get("cases", []) if c["status"] != "pass"]
    failures += [f"mutant {m['mutant']}: {m.get('status', 'survived')}" for m in report.get("mutants", []) if not m["caught"]]
    perturbed = {}
    for v in report.get("perturb", []):
        if v["check"] == "perturbed":
            perturbed.setdefault(v["mutant"], []).append(v["caught"])
    failures += [f"race mutant {m}: caught in none of its {len(runs)} perturbed runs" for m, runs in perturbed.items()
                 if not any(runs)]
    failures += [f"compute-sanitizer {s['tool']} {sanitizer_run(s)}: exit {s['exit']}{sanitizer_found(s)}"
                 for s in report.get("sanitizer", []) if s["exit"] != 0]
    return failures


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
    m.add_argument("--components", help="a dsv4h executable (or its list --json) whose components' goals judge "
                                        "the record (default: those the parts carry)")
    v = sub.add_parser("verdict", help="exit 1 naming each failure of a part (ci/gpu-suite's last step)")
    v.add_argument("part")
    args = parser.parse_args()
    if args.command == "collect":
        with open(args.out, "w") as f:
            json.dump(collect(args.work), f, indent=1)
        return 0
    if args.command == "verdict":
        failures = failures_of(load(args.part))
        for f in failures:
            print("FAILED: " + f)
        return 1 if failures else 0
    return merge(args.parts, args.out, args.commit, args.components)


if __name__ == "__main__":
    sys.exit(main())
