#!/usr/bin/env python3
"""The compute ceiling of record: torch's dense bf16 8192^3 matrix product on random data, median of
10 after 3 warm-ups, in TFLOP/s. Run by ci/gpu-suite's bench phase and ci/nightly (the history's
`ceilings.bf16_matmul_TFLOPs`). Writes JSON: {"bf16_matmul_TFLOPs", "torch", "device"}.
(The peers of the components are tests/peers/<component>.py.)
"""
import argparse
import json
import statistics


def matmul_ceiling_tflops(torch):
    n = 8192
    a, b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16), torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    samples = []
    for _ in range(10):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a @ b
        stop.record()
        stop.synchronize()
        samples.append(2 * n ** 3 / (start.elapsed_time(stop) * 1e-3) / 1e12)
    return statistics.median(samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    import torch  # after the arguments: --help works without torch

    torch.manual_seed(0)
    tflops = matmul_ceiling_tflops(torch)
    print(f"bf16 matmul ceiling: {tflops:.0f} TFLOP/s", flush=True)
    with open(args.out, "w") as f:
        json.dump({"bf16_matmul_TFLOPs": tflops, "torch": torch.__version__, "device": torch.cuda.get_device_name()},
                  f, indent=1)


if __name__ == "__main__":
    main()
