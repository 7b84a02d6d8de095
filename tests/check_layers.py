#!/usr/bin/env python3
"""The layers include only downwards: reference/ nothing from harness/ or kernels/ (a reference
shares no code with what it checks), kernels/ nothing from reference/ or harness/ (nor the
benchmarks' floors), perf/ (beside the verification core) nothing from the references or kernels.
Prints every offending include and exits 1."""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORBIDDEN = {"reference": {"harness", "kernels", "perf", "tests"}, "kernels": {"reference", "harness", "perf", "tests"},
             "perf": {"reference", "kernels", "tests"}}
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')


def top_folder(including_dir, name):
    """The project's top folder an include resolves to (its own folder first, as the compiler
    looks), or None for a system header."""
    for base in (including_dir, ROOT):
        path = os.path.normpath(os.path.join(base, name))
        if os.path.exists(path) and path.startswith(ROOT + os.sep):
            return os.path.relpath(path, ROOT).split(os.sep)[0]
    return None


def main():
    offences = []
    for layer, forbidden in FORBIDDEN.items():
        for dirpath, _, files in os.walk(os.path.join(ROOT, layer)):
            for file in sorted(files):
                path = os.path.join(dirpath, file)
                with open(path, errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        match = INCLUDE.match(line)
                        if match and top_folder(dirpath, match.group(1)) in forbidden:
                            offences.append(f"{os.path.relpath(path, ROOT)}:{number}: {line.strip()}")
    for offence in offences:
        print(offence)
    print(f"{len(offences)} includes across layers" if offences else "layers: no include goes upwards")
    return 1 if offences else 0


if __name__ == "__main__":
    sys.exit(main())
