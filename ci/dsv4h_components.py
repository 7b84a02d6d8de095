"""The components as a build describes them (`dsv4h list --json`, from their descriptors): the one
table the CI scripts read, so that none keeps a list of components, checks or mutants of its own.

load(source): `source` is a dsv4h executable (run with `list --json`) or a JSON file it wrote.
load_goal_owners(source), goal_owners(doc): what has benchmark goals, the components and the
model (not a component: listed under "models" with its bench binary, filter and goals only).
"""
import fnmatch
import json
import os
import subprocess

SCHEMA_VERSION = 1


def read(source):
    """The document of `dsv4h list --json`; ValueError when it cannot be read."""
    if not os.path.exists(source):
        raise ValueError(f"{source}: not found (a dsv4h executable or the JSON of `dsv4h list --json`)")
    if os.access(source, os.X_OK) and not source.endswith(".json"):
        proc = subprocess.run([source, "list", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            raise ValueError(f"{source} list --json exited {proc.returncode}: {proc.stderr.strip()}")
        text = proc.stdout
    else:
        with open(source) as f:
            text = f.read()
    doc = json.loads(text)
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"{source}: schema_version {doc.get('schema_version')!r}, this script reads {SCHEMA_VERSION}")
    return doc


def load(source):
    """{name: component} from `dsv4h list --json`; ValueError when it cannot be read."""
    return {c["name"]: c for c in read(source)["components"]}


def goal_owners(doc):
    """{name: entry} of everything a listing gives goals and GPU tests (its gpu_tests filter): the
    components, then the models."""
    return {c["name"]: c for c in doc["components"] + doc.get("models", [])}


def load_goal_owners(source):
    return goal_owners(read(source))


def component_of_mutant(components, mutant):
    """The component declaring the mutant; None for the harness's own (noop breaks every kernel)."""
    for name, c in components.items():
        if any(m["name"] == mutant for m in c["mutants"]):
            return name
    return None


def mutant_filter(components, mutant):
    """The gtest filter of the checks that must catch the mutant: its component's GPU checks, every
    check for noop, which must fail them all. ValueError for a mutant nobody declares."""
    if mutant == "noop":
        return "*"
    name = component_of_mutant(components, mutant)
    if name is None:
        raise ValueError(f"unknown mutant {mutant!r}: no component declares it")
    return components[name]["gpu_tests"]


def gtest_names(listing):
    """The "Suite.Test" names of a gtest binary's --gtest_list_tests output ("Suite." then indented
    "Test  # GetParam() = ..." lines)."""
    names, suite = [], ""
    for line in (l.rstrip() for l in listing.splitlines() if l.strip()):
        if not line.startswith(" "):
            suite = line.split("#")[0].strip()
        else:
            names.append(suite + line.split("#")[0].strip())
    return names


def component_of_test(components, test):
    """The component whose GPU test filter selects `test` ("Suite.Name") by its most specific pattern
    (the longest: moe's "*moe*" also selects moe_routing's tests, which "*moe_routing*" claims);
    None where none does."""
    best, best_length = None, -1
    for name, c in components.items():
        for p in c["gpu_tests"].split(":"):
            if p and len(p) > best_length and fnmatch.fnmatchcase(test, p):
                best, best_length = name, len(p)
    return best


def select(doc, names):
    """What DSV4H_COMPONENTS=names (comma-separated names of components or models) keeps:
    {"names", "gtest_filter" (their gpu_tests joined), "bench_binaries", "mutants" (theirs, and
    noop)}. ValueError naming an unknown name, or for none."""
    owners = goal_owners(doc)
    wanted = [n for n in names.split(",") if n]
    unknown = [n for n in wanted if n not in owners]
    if not wanted or unknown:
        raise ValueError(f"DSV4H_COMPONENTS: {'unknown ' + ', '.join(unknown) if unknown else 'no name'} "
                         f"(known: {', '.join(sorted(owners))})")
    return {"names": wanted,
            "gtest_filter": ":".join(owners[n]["gpu_tests"] for n in wanted),
            "bench_binaries": sorted({owners[n]["bench"]["binary"] for n in wanted if owners[n].get("bench", {}).get("binary")}),
            "mutants": [m["name"] for n in wanted for m in owners[n].get("mutants", [])] + ["noop"]}


if __name__ == "__main__":
    # python3 ci/dsv4h_components.py select LIST NAMES FIELD: one field of select() (lists
    # space-separated), for ci/gpu-suite; exit 2 naming what is wrong.
    import sys
    if len(sys.argv) != 5 or sys.argv[1] != "select":
        sys.exit("usage: dsv4h_components.py select LIST_JSON NAMES FIELD")
    try:
        value = select(read(sys.argv[2]), sys.argv[3])[sys.argv[4]]
    except (ValueError, KeyError) as error:
        print(f"dsv4h_components.py: {error}", file=sys.stderr)
        sys.exit(2)
    print(value if isinstance(value, str) else " ".join(value))
