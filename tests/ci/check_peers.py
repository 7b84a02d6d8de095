#!/usr/bin/env python3
"""The peers (tests/peers/<component>.py) without a GPU: ci/gpu-suite's bench phase (and its peers
phase alone) runs every script of the folder (a file with a __main__ guard), with --out, and none
of its shared modules; a script that
fails fails the suite, naming it, and what it wrote is kept; gpu-report.py collects each as
`peers.<component>` and merge keeps them in the record; ci/goals.py's faster_than_peers judges a
benchmark against the best of a result's peer times, names it in the text and the entry, leaves
out a peer that failed, a shape no peer timed and a result lacking the benchmark's variables, and
honours `against` and `where`; any goal on a peer time a result lacks skips that result;
DSV4H_COMPONENTS keeps the named components' benchmark binaries and peers only. Every peer script
compiles.

usage: check_peers.py DSV4H
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "ci"))
import goals  # noqa: E402

SILU = "BM_filtered_silu_mul/rows:24576/kept_permille:{}/manual_time"

# A stand-in peer script: records how it was run, writes its results (the component's name and an
# exit code in its own file name's place), then exits with that code.
STAND_IN = """import json, os, sys
name = os.path.basename(__file__)[:-3]
with open(os.path.join(os.environ["PEER_LOG"], name + ".args"), "w") as f:
    json.dump({"argv": sys.argv[1:], "cwd": os.getcwd()}, f)
shape = {"filtered_silu_mul": {"rows": 24576, "kept_permille": 1000}, "mtp_expand": {"bs": 64, "topk": 4, "fields": 1}}
if name in shape:
    with open(sys.argv[sys.argv.index("--out") + 1], "w") as f:
        json.dump({"component": name, "device": "stand-in", "results": [dict(shape[name], eager_us=455.0,
                   compile_us=106.0, triton_us=104.0)]}, f)

if __name__ == "__main__":
    sys.exit(1 if name == "mtp_expand" else 0)
"""
# A shared module of the scripts: the suite must not run it (it would leave its .args).
MODULE = STAND_IN.split("\nif __name__")[0]
CEILING = """import json, sys
json.dump({"bf16_matmul_TFLOPs": 700.0}, open(sys.argv[sys.argv.index("--out") + 1], "w"))
"""

failures = []


def check(what, ok):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def peer_checkout(dsv4h, work, scripts):
    """A checkout of ci/ with the stand-in ceiling, tests/peers/ holding `scripts` ({name: text}),
    and a package of dsv4h alone; returns (repo, dist, log folder)."""
    repo = os.path.join(work, "repo")
    shutil.copytree(os.path.join(ROOT, "ci"), os.path.join(repo, "ci"))
    with open(os.path.join(repo, "ci", "torch_ceiling.py"), "w") as f:
        f.write(CEILING)
    peers = os.path.join(repo, "tests", "peers")
    os.makedirs(peers)
    for name, text in scripts.items():
        with open(os.path.join(peers, name + ".py"), "w") as f:
            f.write(text)
    dist = os.path.join(repo, "build", "gpu-dist")
    os.makedirs(dist)
    shutil.copy(dsv4h, os.path.join(dist, "dsv4h"))
    log = os.path.join(work, "log")
    os.makedirs(log)
    return repo, dist, log


def suite_runs_the_peers(dsv4h, work, phase):
    repo, _, log = peer_checkout(dsv4h, work, {"filtered_silu_mul": STAND_IN, "mtp_expand": STAND_IN,
                                               "sparse_attention": STAND_IN, "peer_timing": MODULE})
    out = os.path.join(work, "out")
    proc = subprocess.run(["bash", os.path.join(repo, "ci", "gpu-suite"), phase], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, env=dict(os.environ, OUT=out, PEER_LOG=log, CUDA_VISIBLE_DEVICES="0"))
    ran = sorted(os.path.basename(p)[:-len(".args")] for p in glob.glob(os.path.join(log, "*.args")))
    check(f"the {phase} phase runs every peer script (a __main__ guard), whatever its name, and no module",
          ran == ["filtered_silu_mul", "mtp_expand", "sparse_attention"])
    args = json.load(open(os.path.join(log, "filtered_silu_mul.args"))) if ran else {}
    check("a peer script runs from the suite's root with --out FILE",
          args.get("argv", [None])[0] == "--out" and os.path.realpath(args.get("cwd", "")) == os.path.realpath(repo))
    check("a failing peer script fails the suite, named",
          proc.returncode == 1 and "peer_mtp_expand (exit 1)" in proc.stdout and "peer_filtered_silu_mul" not in
          proc.stdout.split("FAILED: steps")[-1])
    part = json.load(open(os.path.join(out, "results.json"))) if os.path.exists(os.path.join(out, "results.json")) else {}
    check("collect keeps each script's file as peers.<component>, a failed one's too",
          sorted(part.get("peers", {})) == ["filtered_silu_mul", "mtp_expand"]
          and part["peers"]["filtered_silu_mul"]["results"][0]["triton_us"] == 104.0)
    check("collect keeps the bf16 ceiling", part.get("ceilings", {}).get("bf16_matmul_TFLOPs") == 700.0)
    with tarfile.open(os.path.join(out, "raw.tgz")) as tar:
        names = tar.getnames()
    check("the raw archive holds the peer files", "peers/filtered_silu_mul.json" in names and "ceiling.json" in names)
    return os.path.join(out, "results.json")


def suite_runs_the_selected_components(dsv4h, work):
    """DSV4H_COMPONENTS: the bench phase runs the kept components' benchmark binaries and peer
    scripts only; an unknown name is exit 2, naming it, before anything runs."""
    repo, dist, log = peer_checkout(dsv4h, work, {"filtered_silu_mul": STAND_IN, "sparse_attention": STAND_IN})
    # Each lists BM_<name>/a and BM_<name>/b as its --benchmark_filter selects them (grep -E for the
    # regex), and otherwise leaves <name>.ran holding its arguments.
    for bench in ("bench_filtered_silu_mul", "bench_sparse_attention"):
        path = os.path.join(dist, bench)
        with open(path, "w") as f:
            f.write(f"""#!/bin/sh
filter=.
for a in "$@"; do case "$a" in --benchmark_filter=*) filter=${{a#--benchmark_filter=}};; esac; done
case "$*" in *--benchmark_list_tests=true*) printf 'BM_{bench}/a\\nBM_{bench}/b\\n' | grep -E "$filter"; exit 0;; esac
echo "$@" >"$PEER_LOG/{bench}.ran"
""")
        os.chmod(path, 0o755)

    def suite(components, out, **extra):
        return subprocess.run(["bash", os.path.join(repo, "ci", "gpu-suite"), "bench"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True,
                              env=dict(os.environ, OUT=out, PEER_LOG=log, DSV4H_COMPONENTS=components,
                                       DSV4H_BENCH_PROCESSES="1", CUDA_VISIBLE_DEVICES="0", **extra))

    suite("filtered_silu_mul", os.path.join(work, "out"))
    ran = sorted(os.path.basename(p) for p in glob.glob(os.path.join(log, "*.ran")) + glob.glob(os.path.join(log, "*.args")))
    check("DSV4H_COMPONENTS=filtered_silu_mul: the bench phase runs its benchmark binary and its peer script only",
          ran == ["bench_filtered_silu_mul.ran", "filtered_silu_mul.args"])
    with open(os.path.join(log, "bench_filtered_silu_mul.ran")) as f:
        check("without DSV4H_BENCH_FILTER a binary runs whole", "--benchmark_filter" not in f.read())
    for f in glob.glob(os.path.join(log, "*")):
        os.remove(f)
    # DSV4H_BENCH_FILTER: the binaries where it selects a benchmark run with it, the others not at all.
    suite("filtered_silu_mul,sparse_attention", os.path.join(work, "out_filter"), DSV4H_BENCH_FILTER="sparse_attention/(b|c)")
    ran = sorted(os.path.basename(p) for p in glob.glob(os.path.join(log, "*.ran")))
    args = open(os.path.join(log, "bench_sparse_attention.ran")).read() if ran else ""
    check("DSV4H_BENCH_FILTER runs the binaries it selects benchmarks of, with --benchmark_filter",
          ran == ["bench_sparse_attention.ran"] and "--benchmark_filter=sparse_attention/(b|c) " in args)
    for f in glob.glob(os.path.join(log, "*")):
        os.remove(f)
    proc = suite("filtered_silu_mul", os.path.join(work, "out_nothing"), DSV4H_BENCH_FILTER="nonesuch")
    check("a DSV4H_BENCH_FILTER selecting no benchmark is exit 2, saying so, and nothing runs",
          proc.returncode == 2 and "selects no benchmark" in proc.stdout and not glob.glob(os.path.join(log, "*.ran")))
    for f in glob.glob(os.path.join(log, "*")):
        os.remove(f)
    proc = suite("filtered_silu_mul,no_such_kernel", os.path.join(work, "out2"))
    check("an unknown name in DSV4H_COMPONENTS is exit 2 naming it, and nothing runs",
          proc.returncode == 2 and "unknown no_such_kernel" in proc.stdout and not os.listdir(log))


def merge_judges_the_peers(dsv4h, work, part):
    bench = os.path.join(work, "bench-part.json")
    with open(bench, "w") as f:
        json.dump({"benchmarks": [{"name": SILU.format(1000), "median_us": 105.0, "bytes": 302e6, "flops": 0,
                                   "copy_ceiling_GBps": 3000.0, "counters": {}},
                                  {"name": SILU.format(500), "median_us": 57.0, "bytes": 151e6, "flops": 0,
                                   "copy_ceiling_GBps": 3000.0, "counters": {}}]}, f)
    record = os.path.join(work, "record.json")
    run = subprocess.run([sys.executable, os.path.join(ROOT, "ci", "gpu-report.py"), "merge", part, bench,
                          "--commit", "0" * 40, "--components", dsv4h, "--out", record],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    doc = json.load(open(record)) if os.path.exists(record) else {}
    check("merge keeps the peers and the ceiling in the record",
          run.returncode == 0 and sorted(doc.get("peers", {})) == ["filtered_silu_mul", "mtp_expand"]
          and doc.get("ceilings", {}).get("bf16_matmul_TFLOPs") == 700.0)
    judged = [g for g in doc.get("goals", []) if g["measure"] == "faster_than_peers"]
    check("one faster_than_peers goal, on the benchmark of the peer result's shape",
          [g["benchmark"] for g in judged] == [SILU.format(1000)])
    g = judged[0] if judged else {}
    check("its value is the time over the best peer's, missed above 1, naming the best peer and its time",
          g.get("value") == round(105 / 104, 4) and g.get("met") is False and g.get("best_peer") == "triton"
          and g.get("best_peer_us") == 104.0 and g.get("peers_us") == {"eager": 455.0, "compile": 106.0, "triton": 104.0}
          and "best: triton, 104.0 us" in g.get("goal", "") and g.get("component") == "filtered_silu_mul")
    check("merge prints it", "MISS  rows=24576 kept_permille=1000: faster than every peer (best: triton, 104.0 us)" in run.stdout)


def measure_cases():
    by_name = {"BM_x/n:1": {"name": "BM_x/n:1", "median_us": 10.0}, "BM_x/n:2": {"name": "BM_x/n:2", "median_us": 10.0},
               "BM_x/n:3": {"name": "BM_x/n:3", "median_us": 10.0}}
    report = {"benchmarks": list(by_name.values()), "peers": {"x": {"results": [
        {"n": 1, "eager_us": 30.0, "compile_us": 12.0, "errors": {"triton_us": "CompilationError"}},
        {"n": 2, "errors": {"eager_us": "e", "compile_us": "c", "triton_us": "t"}},
        {"n": 3, "eager_us": 9.0, "graph_us": 8.0, "triton_us": 20.0, "note_us": "not a time"},
        {"m": 4, "eager_us": 1.0}]}}}
    goal = {"text": "n={n}: faster than every peer (best: {best_peer}, {best_peer_us:.1f} us)", "measure": "faster_than_peers",
            "bound": 1.0, "peers": "peers.x", "benchmark": "BM_x/n:{n}"}
    judged = {g["benchmark"]: g for g in goals.judge(report, {"x": {"goals": [goal]}})}
    check("a peer that failed has no time: the best of the others",
          judged.get("BM_x/n:1", {}).get("best_peer") == "compile" and judged["BM_x/n:1"]["met"])
    check("a shape no peer timed, or a result without the benchmark's variables, is not judged",
          "BM_x/n:2" not in judged and len(judged) == 2)
    check("every numeric _us field is a peer (graph_us too)", judged.get("BM_x/n:3", {}).get("best_peer") == "graph"
          and judged["BM_x/n:3"]["value"] == 1.25 and not judged["BM_x/n:3"]["met"]
          and judged["BM_x/n:3"]["goal"] == "n=3: faster than every peer (best: graph, 8.0 us)")
    only = dict(goal, against=["eager_us", "triton_us"], where={"n": 3})
    judged = goals.judge(report, {"x": {"goals": [only]}})
    check("`against` names the peers, `where` the results",
          [(g["benchmark"], g["best_peer"]) for g in judged] == [("BM_x/n:3", "eager")])
    speedup = {"text": "n={n}: >= 2x faster than torch eager ({eager_us:.1f} us; in a graph {graph_us:.1f} us)",
               "measure": "speedup_over_peer", "bound": 2, "peers": "peers.x", "against": "eager_us", "benchmark": "BM_x/n:{n}"}
    judged = goals.judge(report, {"x": {"goals": [speedup]}})
    check("a goal naming a peer time that a result lacks (its peer failed) skips that result",
          [g["benchmark"] for g in judged] == ["BM_x/n:3"] and judged[0]["value"] == 0.9)
    check("a record without the component's peers judges nothing", not goals.judge({"benchmarks": report["benchmarks"]},
                                                                                  {"x": {"goals": [goal]}}))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    dsv4h = os.path.abspath(sys.argv[1])
    scripts = sorted(glob.glob(os.path.join(ROOT, "tests", "peers", "*.py")))
    for script in scripts:
        try:
            with open(script) as f:
                compile(f.read(), script, "exec")
        except SyntaxError as error:
            check(f"{script} compiles: {error}", False)
    check("the peer scripts of the four first components are there",
          {"filtered_silu_mul", "attn_metadata", "mtp_expand", "memory_pool", "peer_timing"}
          <= {os.path.basename(s)[:-3] for s in scripts})
    with tempfile.TemporaryDirectory() as work:
        part = suite_runs_the_peers(dsv4h, work, "bench")
        if os.path.exists(part):
            merge_judges_the_peers(dsv4h, work, part)
    with tempfile.TemporaryDirectory() as work:
        suite_runs_the_peers(dsv4h, work, "peers")
    with tempfile.TemporaryDirectory() as work:
        suite_runs_the_selected_components(dsv4h, work)
    measure_cases()
    print("check_peers: " + ("FAILED: " + "; ".join(failures) if failures else "all passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
