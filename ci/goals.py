"""Benchmark goals as data: each component's descriptor declares its goals (`dsv4h list --json`,
"goals"), and judge() evaluates them on a record's benchmarks. A goal:

  text       what it says, a template over its variables ("rows={rows} all kept: >= 95% of copy bandwidth")
  measure    copy_fraction (>= bound), time_ratio (benchmark / `over` <= bound), ratio_to_empty
             (<= bound; the paired counter where the benchmark has one), max_us (<= bound),
             faster_than_peer (benchmark / the peer's `against` < bound), speedup_over_peer
             (the peer's `against` / benchmark >= bound)
  benchmark  the benchmark's name, a template; or `match`, a regex over every name whose named
             groups are variables (with `min_bytes`, only benchmarks moving that many bytes)
  bound      a number, or "{variable}"
  each       axes: lists of variable sets; the goal is judged for every combination
  peers      the path of a list of peer results in the record (torch_peers_more.metadata.mtp_expand);
             each peer's fields are variables, and the goal is judged once per peer (outermost)
  over, empty, against
             the other benchmark (time_ratio), the empty kernel (ratio_to_empty), the peer's field
  floors     benchmarks of the least such a kernel can cost: a copy of the same bytes (of the two
             copies, by the driver and by a copy kernel, the faster), dependent loads, the same bytes
             moved without the format's arithmetic; a goal's floor is their least copy fraction, or
             their largest time or ratio to the empty kernel, with whether the floor meets the goal
  also       {variable: benchmark}: other times named in the text (nan where not run)
  ratios     {variable: "a / b"}: quotients of two variables named in the text

Variables every goal has: name (the benchmark's), us (its median time), mb (its bytes / 1e6) and
peer (the peer's `against` value).
"""
import itertools
import math
import re

PAIRED = "paired with its samples"  # how a ratio to the empty kernel was measured, where it was
UNITS = {"copy_fraction": "fraction of copy bandwidth", "time_ratio": "ratio of times", "ratio_to_empty":
         "ratio to an empty kernel", "max_us": "us", "faster_than_peer": "ratio of times", "speedup_over_peer": "speedup"}


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
    value = report
    for key in path.split("."):
        value = value.get(key, {}) if isinstance(value, dict) else {}
    return value if isinstance(value, list) else []


def bindings(goal, report, by_name):
    """Every variable set the goal is judged for, with the benchmark it names."""
    peers = lookup(report, goal["peers"]) if "peers" in goal else [{}]
    axes = goal.get("each", [])
    for peer in peers:
        for combo in itertools.product(*axes):
            variables = dict(peer)
            for part in combo:
                variables.update(part)
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
        return value, value <= bound, None, None, extra
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
    if measure == "faster_than_peer":
        value = b["median_us"] / variables["peer"]
        return value, value < bound, None, None, extra
    if measure == "speedup_over_peer":
        value = variables["peer"] / b["median_us"]
        return value, value >= bound, None, None, extra
    raise ValueError(f"goal {goal['text']!r}: unknown measure {measure!r}")


def judge_goal(component, goal, report, by_name):
    for variables, b in bindings(goal, report, by_name):
        if not b:
            continue
        variables = dict(variables, name=b["name"], us=b["median_us"], mb=b.get("bytes", 0) / 1e6)
        if "against" in goal:
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
            continue
        value, met, floor, floor_meets, extra = result
        judged = {"goal": goal["text"].format(**variables), "component": component, "measure": goal["measure"],
                  "unit": UNITS[goal["measure"]], "benchmark": b["name"], "bound": variables["bound"],
                  "value": round(value, 4),
                  "met": bool(met)}
        judged.update(extra)
        if floor is not None:
            judged["floor"] = round(floor, 4)
            judged["floor_meets_goal"] = bool(floor_meets)
        yield judged


def judge(report, components):
    """Every component's goals that the record has the numbers for, in the components' order."""
    by_name = {b["name"]: b for b in report.get("benchmarks", [])}
    return [judged for name, c in components.items() for goal in c.get("goals", [])
            for judged in judge_goal(name, goal, report, by_name)]
