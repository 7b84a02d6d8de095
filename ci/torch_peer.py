#!/usr/bin/env python3
"""Torch peers of filtered_silu_mul, timed on the same GPU in the same call as our benchmarks.

Peers: torch eager and torch.compile of `silu(g.clamp(max=L)) * u.clamp(-L, L)` on gate_up [R, 2I]
bf16 (the expression has no expert filter: it computes every row). Timing as in our benchmark:
CUDA events around K >= 8 back-to-back calls over rotating row ranges of a 2.4 GB pool (inputs never
sit in L2), mean per call; the median of 10 samples is reported. Writes JSON:
{"peers": [{"rows", "inter", "eager_us", "compile_us"}], "bf16_matmul_TFLOPs", "torch", "device"}; the
matrix-product ceiling (8192^3 bf16) is measured in the same process for the records.
"""
import argparse
import json
import statistics


INTER, POOL_ROWS, LIMIT = 2048, 196608, 10.0


def swiglu(gate_up):
    g, u = gate_up[:, :INTER], gate_up[:, INTER:]
    return torch.nn.functional.silu(g.clamp(max=LIMIT)) * u.clamp(-LIMIT, LIMIT)


def time_us(fn, pool, rows):
    sets = min(64, POOL_ROWS // rows)
    bytes_per_call = rows * INTER * 6
    k = max(8, min(64, (256 << 20) // bytes_per_call))  # as tests/bench/bench_filtered_silu_mul.cpp
    views = [pool[s * rows:(s + 1) * rows] for s in range(sets)]
    for v in views:
        fn(v)
    torch.cuda.synchronize()
    samples, n = [], 0
    for _ in range(10):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(k):
            fn(views[n % sets])
            n += 1
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop) * 1e3 / k)
    return statistics.median(samples)


def matmul_ceiling_tflops():
    """Dense bf16 8192^3 matrix product on random data, median of 10: the compute ceiling of record."""
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
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    global torch
    import torch  # after the arguments: --help works without torch

    torch.manual_seed(0)
    pool = (torch.randn(POOL_ROWS, 2 * INTER, device="cuda") * 6).to(torch.bfloat16)
    compiled = torch.compile(swiglu, dynamic=False)
    peers = []
    for rows in (6, 384, 3072, 24576, 196608):
        eager_us = time_us(swiglu, pool, rows)
        compile_us = time_us(compiled, pool, rows)
        peers.append({"rows": rows, "inter": INTER, "eager_us": eager_us, "compile_us": compile_us})
        print(f"torch peer rows={rows}: eager {eager_us:.2f} us, torch.compile {compile_us:.2f} us", flush=True)
    tflops = matmul_ceiling_tflops()
    print(f"bf16 matmul ceiling: {tflops:.0f} TFLOP/s", flush=True)
    with open(args.out, "w") as f:
        json.dump({"peers": peers, "bf16_matmul_TFLOPs": tflops, "torch": torch.__version__,
                   "device": torch.cuda.get_device_name()}, f, indent=1)


if __name__ == "__main__":
    main()
