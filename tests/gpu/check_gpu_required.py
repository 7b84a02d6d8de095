#!/usr/bin/env python3
"""Where no GPU is found, a GPU test skips (exit 0, "GPU test skipped") unless DSV4H_REQUIRE_GPU
is set, as ci/gpu-suite sets it on the GPU machine: then it fails, naming the variable. On a
machine with a GPU there is nothing to show (exit 77).

usage: check_gpu_required.py TEST_BINARY
"""
import os
import subprocess
import sys

# A test that opens the GPU first and is quick where it runs.
ONE_TEST = "--gtest_filter=MetadataGpuBadInput.UpdateRefusesTopkZero"


def run(binary, required):
    env = dict(os.environ)
    env.pop("DSV4H_REQUIRE_GPU", None)
    if required:
        env["DSV4H_REQUIRE_GPU"] = "1"
    return subprocess.run([binary, ONE_TEST], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def main():
    binary = sys.argv[1]
    plain = run(binary, required=False)
    if "GPU test skipped: " not in plain.stdout:
        if plain.returncode != 0:
            print(f"FAIL: the test neither skipped nor passed, exit {plain.returncode}:\n{plain.stdout}")
            return 1
        print("a GPU is present: the test ran, nothing to show")
        return 77
    if plain.returncode != 0:
        print(f"FAIL: without DSV4H_REQUIRE_GPU a missing GPU must skip, exit {plain.returncode}:\n{plain.stdout}")
        return 1
    required = run(binary, required=True)
    if required.returncode == 0 or "GPU required (DSV4H_REQUIRE_GPU): no GPU found" not in required.stdout:
        print(f"FAIL: with DSV4H_REQUIRE_GPU a missing GPU must fail the test, exit {required.returncode}:\n{required.stdout}")
        return 1
    print("no GPU here: skipped without DSV4H_REQUIRE_GPU, failed with it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
