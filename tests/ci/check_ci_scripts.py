#!/usr/bin/env python3
"""Every script in ci/ answers --help with its usage, exit 0, and does nothing else: in a scratch
copy of the repository (with a build/gpu-dist and a reports/ to lose), no file is created, changed
or removed by it. A script given an argument it does not take exits 2.

usage: check_ci_scripts.py
"""
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def snapshot(top):
    files = {}
    for folder, _, names in os.walk(top):
        for name in names:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                files[os.path.relpath(path, top)] = hashlib.sha256(f.read()).hexdigest()
    return files


def main():
    scripts = sorted(n for n in os.listdir(os.path.join(ROOT, "ci"))
                     if os.path.isfile(os.path.join(ROOT, "ci", n)) and os.access(os.path.join(ROOT, "ci", n), os.X_OK)
                     and not n.startswith("."))  # not a folder (a __pycache__ left by running ci's modules)
    if len(scripts) < 10:
        fail(f"found only {scripts} in ci/")
    with tempfile.TemporaryDirectory() as work:
        repo = os.path.join(work, "repo")
        shutil.copytree(os.path.join(ROOT, "ci"), os.path.join(repo, "ci"))
        os.makedirs(os.path.join(repo, "build", "gpu-dist"))
        os.makedirs(os.path.join(repo, "reports", "history"))
        for path in ("build/gpu-dist/dsv4h", "reports/history/night.json"):
            with open(os.path.join(repo, path), "w") as f:
                f.write("keep me\n")
        before = snapshot(repo)
        for script in scripts:
            proc = subprocess.run([os.path.join(repo, "ci", script), "--help"], cwd=repo, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, timeout=60)
            if proc.returncode != 0 or len(proc.stdout.strip().splitlines()) < 2:
                fail(f"ci/{script} --help exited {proc.returncode} with {proc.stdout!r}")
            after = {k: v for k, v in snapshot(repo).items() if "__pycache__" not in k}
            if after != before:
                changed = sorted(set(after.items()) ^ set(before.items()))
                fail(f"ci/{script} --help changed the tree: {changed[:5]}")
        for script in ("pack-gpu", "test", "install-deps", "nightly"):
            proc = subprocess.run([os.path.join(repo, "ci", script), "--no-such-option"], cwd=repo,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
            if proc.returncode != 2 or "--no-such-option" not in proc.stdout:
                fail(f"ci/{script} --no-such-option must be bad usage (exit 2) naming it: {proc.returncode} {proc.stdout!r}")
    print(f"ci scripts: {len(scripts)} answer --help and change nothing; unknown options are exit 2")


if __name__ == "__main__":
    main()
