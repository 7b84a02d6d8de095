"""Benchmark goals as data: each component's descriptor declares its goals (`dsv4h list --json`,
"goals"), and judge() evaluates them on a record's benchmarks. A goal:

  text       what it says, a template over its variables ("rows={rows} all kept: >= 95% of copy bandwidth")
  measure    copy_fraction (>= bound), time_ratio (benchmark / `over` <= bound), ratio_to_empty
             (<= bound; the paired counter where the benchmark has one), max_us (<= bound),
             faster_than_peer (benchmark / the peer's `against` < bound), speedup_over_peer
             (the peer's `against` / benchmark >= bound), faster_than_peers (benchmark / the best,
             i.e. least, of the peer result's times < bound: every field ending in `_us`, eager_us,
             compile_us, triton_us..., or those `against` lists; variables best_peer, e.g.
             "triton", and best_peer_us name it), max_counter (the benchmark's counter `counter`, a
             number the benchmark derives from its own measurements, <= bound)
  benchmark  the benchmark's name, a template; or `match`, a regex over every name whose named
             groups are variables (with `min_bytes`, only benchmarks moving that many bytes)
  bound      a number, or "{variable}"
  each       axes: lists of variable sets; the goal is judged for every combination
  peers      the peer results in the record: "peers.<component>" (tests/peers/<component>.py's
             results; an older record's torch peers are read as such, legacy_peers.py); each
             result's fields are variables, and the goal is judged once per result (outermost)
  where      {field: value}: only the peer results with these values (a list: any of its values)
  over, empty, against, counter
             the other benchmark (time_ratio), the empty kernel (ratio_to_empty), the peer's field,
             the counter (max_counter)
  floors     benchmarks of the least such a kernel can cost: a copy of the same bytes (of the two
             copies, by the driver and by a copy kernel, the faster), dependent loads, the same bytes
             moved without the format's arithmetic; a goal's floor is their least copy fraction, or
             their largest time, ratio to the empty kernel or ratio to `over`, with whether the
             floor meets the goal. Where it does not, the goal becomes "within 1.1x of the floor"
             (the developers' guide): met is judged against that bound, `bound_from_floor`, and
             both the goal's bound and the floor are kept
  also       {variable: benchmark}: other times named in the text (nan where not run)
  ratios     {variable: "a / b"}: quotients of two variables named in the text

Variables every goal has: name (the benchmark's), us (its median time), mb (its bytes / 1e6) and
peer (the peer's `against` value); a faster_than_peers goal best_peer and best_peer_us, and its
judged entry also best_peer, best_peer_us and peers_us (every peer's time).
"""
import itertools
import math
import re
import string
import sys

import legacy_peers

FLOOR_SLACK = 1.1  # a goal its floor misses becomes within this factor of the floor
PAIRED = "paired with its samples"  # how a ratio to the empty kernel was measured, where it was
UNITS = {"copy_fraction": "fraction of copy bandwidth", "time_ratio": "ratio of times", "ratio_to_empty":
         "ratio to an empty kernel", "max_us": "us", "faster_than_peer": "ratio of times", "speedup_over_peer": "speedup",
         "faster_than_peers": "ratio of times", "max_counter": "the benchmark's counter"}


def fastest_copy(by_name, name):
    """Of the two copies of a goal's bytes, by the driver (BM_copy_same_bytes...) and by a copy kernel
    (BM_copy_kernel_same_bytes..., same arguments), the faster: a floor is the least any kernel could
    cost, and neither copy is the faster at every size."""
    present = [b for b in (by_name.get(name), by_name.get(name.replace("BM_copy_same_bytes", "BM_copy_kernel_same_bytes", 1)))
               if b]
    return min(present, key=lambda b: b["median_us"]) if present else None


def floor_benchmark(by_name, name):
    return fastest_copy(by_name, name) if name.startswith("BM_copy_same_bytes") else by_name.get(name)


def ratio_to_empty(b, empty):
    """A benchmark's time over an empty kernel's, and how it was measured: the median of the ratios
    to an empty kernel timed right after each of its samples (counter ratio_to_empty), else its
    median over the empty-kernel benchmark's; (None, None) where either did not run."""
    if not b:
        return None, None
    paired = b.get("counters", {}).get("ratio_to_empty")
    if paired:
        return paired, PAIRED
    if empty:
        return b["median_us"] / empty["median_us"], "against the empty-kernel benchmark"
    return None, None


def lookup(report, path):
    """The list at `path`; for "peers.<component>", that peer script's results (an older record's
    torch peers where the record has none)."""
    value = report
    for key in path.split("."):
        value = value.get(key, {}) if isinstance(value, dict) else {}
    if isinstance(value, dict) and isinstance(value.get("results"), list):
        return value["results"]
    if not value and path.startswith("peers."):
        return legacy_peers.results(report, path[len("peers."):])
    return value if isinstance(value, list) else []


def peer_times(goal, peer):
    """{name: us} of a peer result's times (eager, compile, triton...): the fields `against` lists,
    else every field ending in _us; a peer that failed or did not run has no time."""
    names = goal["against"] if isinstance(goal.get("against"), list) else [k for k in peer if k.endswith("_us")]
    return {k[:-len("_us")]: peer[k] for k in names
            if isinstance(peer.get(k), (int, float)) and not isinstance(peer[k], bool) and peer[k] > 0}


def template_names(goal):
    """The variables a goal's benchmark (or match) names."""
    return [name for _, name, _, _ in string.Formatter().parse(goal.get("benchmark", goal.get("match", ""))) if name]


def bindings(goal, report, by_name):
    """Every variable set the goal is judged for, with the benchmark it names."""
    peers = lookup(report, goal["peers"]) if "peers" in goal else [{}]
    peers = [p for p in peers if all(p.get(k) in (v if isinstance(v, list) else [v]) for k, v in goal.get("where", {}).items())]
    axes = goal.get("each", [])
    for peer in peers:
        for combo in itertools.product(*axes):
            variables = dict(peer, peer_result=peer)
            for part in combo:
                variables.update(part)
            if "peers" in goal and not all(name in variables for name in template_names(goal)):
                print(f"goals: a result of {goal['peers']} lacks a variable of {goal['text']!r}: {peer}", file=sys.stderr)
                continue
            if "match" in goal:
                for name, b in by_name.items():
                    m = re.fullmatch(goal["match"].format(**variables), name)
                    if m and b.get("bytes", 0) >= goal.get("min_bytes", 0):
                        yield {**variables, **m.groupdict()}, b
            else:
                yield variables, by_name.get(goal["benchmark"].format(**variables))


def evaluate(goal, variables, b, by_name):
    """(value, met, extra fields) of a goal on benchmark b, or None where its numbers are missing."""
    measure, bound = goal["measure"], variables["bound"]
    extra = {}
    if measure == "copy_fraction":
        if "fraction_of_ceiling" not in b:
            return None
        value = b["fraction_of_ceiling"]
        floors = [f.get("fraction_of_ceiling") for f in variables["floor_benchmarks"] if f]
        floor = min((f for f in floors if f is not None), default=None)
        return value, value >= bound, floor, (floor >= bound if floor is not None else None), extra
    if measure == "time_ratio":
        other = by_name.get(goal["over"].format(**variables))
        if not other:
            return None
        value = b["median_us"] / other["median_us"]
        floors = [f["median_us"] / other["median_us"] for f in variables["floor_benchmarks"] if f]
        floor = max(floors, default=None)
        return value, value <= bound, floor, (floor <= bound if floor is not None else None), extra
    if measure == "ratio_to_empty":
        empty = by_name.get(goal["empty"])
        value, measured = ratio_to_empty(b, empty)
        if value is None:
            return None
        extra["ratio_measured"] = measured
        if measured == PAIRED and b.get("process_ratio_to_empty"):
            extra["value_by_process"] = [round(v, 3) for v in b["process_ratio_to_empty"]]
        floors = [ratio_to_empty(f, empty)[0] for f in variables["floor_benchmarks"] if f]
        floor = max((f for f in floors if f is not None), default=None)
        return value, value <= bound, floor, (floor <= bound if floor is not None else None), extra
    if measure == "max_us":
        value = b["median_us"]
        floors = [f["median_us"] for f in variables["floor_benchmarks"] if f]
        floor = max(floors, default=None)
        return value, value <= bound, floor, (floor <= bound if floor is not None else None), extra
    if measure == "max_counter":
        value = b.get("counters", {}).get(goal["counter"])
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return None
        extra["counter"] = goal["counter"]
        return value, value <= bound, None, None, extra
    if measure == "faster_than_peer":
        value = b["median_us"] / variables["peer"]
        return value, value < bound, None, None, extra
    if measure == "speedup_over_peer":
        value = variables["peer"] / b["median_us"]
        return value, value >= bound, None, None, extra
    if measure == "faster_than_peers":
        value = b["median_us"] / variables["best_peer_us"]
        extra.update(best_peer=variables["best_peer"], best_peer_us=round(variables["best_peer_us"], 4),
                     peers_us={k: round(v, 4) for k, v in variables["peers_us"].items()})
        return value, value < bound, None, None, extra
    raise ValueError(f"goal {goal['text']!r}: unknown measure {measure!r}")


def judge_goal(component, goal, report, by_name):
    for variables, b in bindings(goal, report, by_name):
        if not b:
            continue
        try:
            judged = judge_binding(component, goal, variables, b, by_name)
        except KeyError as missing:
            if "peers" not in goal:
                raise
            # A peer form that failed has no time: the goals that name it skip that shape.
            print(f"goals: {goal['text']!r} not judged on {b['name']}: its peer result has no {missing}", file=sys.stderr)
            continue
        if judged:
            yield judged


def judge_binding(component, goal, variables, b, by_name):
    """The judged entry of a goal on benchmark b with the binding's variables, or None where its
    numbers are missing."""
    variables = dict(variables, name=b["name"], us=b["median_us"], mb=b.get("bytes", 0) / 1e6)
    if goal["measure"] == "faster_than_peers":
        variables["peers_us"] = peer_times(goal, variables["peer_result"])
        if not variables["peers_us"]:
            return None  # no peer ran at this shape
        variables["best_peer"], variables["best_peer_us"] = min(variables["peers_us"].items(), key=lambda kv: kv[1])
    elif "against" in goal:
        variables["peer"] = variables[goal["against"].format(**variables)]
    for key, name in goal.get("also", {}).items():
        other = by_name.get(name.format(**variables))
        variables[key] = other["median_us"] if other else math.nan
    for key, quotient in goal.get("ratios", {}).items():
        numerator, denominator = (variables[v.strip()] for v in quotient.split("/"))
        variables[key] = numerator / denominator
    bound = goal["bound"]
    variables["bound"] = float(bound.format(**variables)) if isinstance(bound, str) else bound
    variables["floor_benchmarks"] = [floor_benchmark(by_name, f.format(**variables)) for f in goal.get("floors", [])]
    result = evaluate(goal, variables, b, by_name)
    if result is None:
        return None
    value, met, floor, floor_meets, extra = result
    if floor is not None and not floor_meets:
        # The floor itself misses the goal: the goal becomes within 1.1x of the floor.
        higher_is_better = goal["measure"] == "copy_fraction"
        extra["bound_from_floor"] = round(floor / FLOOR_SLACK if higher_is_better else floor * FLOOR_SLACK, 4)
        met = value >= floor / FLOOR_SLACK if higher_is_better else value <= floor * FLOOR_SLACK
    judged = {"goal": goal["text"].format(**variables), "component": component, "measure": goal["measure"],
              "unit": UNITS[goal["measure"]], "benchmark": b["name"], "bound": variables["bound"],
              "value": round(value, 4),
              "met": bool(met)}
    judged.update(extra)
    if floor is not None:
        judged["floor"] = round(floor, 4)
        judged["floor_meets_goal"] = bool(floor_meets)
    return judged


def pattern_of(template, variables):
    """A benchmark name template as a regex: the variables it is given filled in, any other
    variable (a peer result's, known only once the peers ran) matching any one name part, or any
    name where it is the whole template."""
    fields = list(string.Formatter().parse(template))
    parts = []
    for literal, name, spec, _ in fields:
        parts.append(re.escape(literal))
        if name is not None:
            parts.append(re.escape(format(variables[name], spec)) if name in variables
                         else ".+" if len(fields) == 1 and not literal else "[^/]+")
    return "".join(parts)


def unbound(components, names_by_binary):
    """Every goal naming a benchmark that its component's benchmark binary does not register, or
    that the component's bench filter leaves out: such a goal would never be judged, and pass
    silently. `names_by_binary`: {binary: the names `--benchmark_list_tests` prints}. Each of the
    goal's names counts: the benchmark (or match), over, empty, floors and also, for every
    combination of its `each` axes. Returns the failures, each naming the goal and the name."""
    failures = []
    for component, c in components.items():
        if not c.get("goals"):
            continue
        binary, bench_filter = c.get("bench", {}).get("binary"), c.get("bench", {}).get("filter")
        if binary not in names_by_binary:
            failures.append(f"{component}: goals, but its bench binary {binary!r} is not one of {sorted(names_by_binary)}")
            continue
        registered = [re.sub(r"/(iterations|repeats|min_time):[^/]+", "", n) for n in names_by_binary[binary]]
        names = [n for n in registered if not bench_filter or re.search(bench_filter, n)]
        for goal in c["goals"]:
            for combo in itertools.product(*goal.get("each", [])):
                variables = {k: v for part in combo for k, v in part.items()}
                templates = [goal.get("benchmark"), goal.get("over"), goal.get("empty"), *goal.get("floors", []),
                             *goal.get("also", {}).values()]
                patterns = [pattern_of(t, variables) for t in templates if t]
                if "match" in goal:
                    patterns.append(goal["match"].format(**variables))
                for pattern in patterns:
                    if not any(re.fullmatch(pattern, n) for n in names):
                        why = (f"its bench filter {bench_filter!r} leaves out" if any(re.fullmatch(pattern, n) for n in registered)
                               else f"{binary} registers no")
                        failures.append(f"{component}: goal {goal['text']!r} names {pattern!r}: {why} such benchmark")
    return failures


def judge(report, components):
    """Every component's goals that the record has the numbers for, in the components' order."""
    by_name = {b["name"]: b for b in report.get("benchmarks", [])}
    return [judged for name, c in components.items() for goal in c.get("goals", [])
            for judged in judge_goal(name, goal, report, by_name)]
