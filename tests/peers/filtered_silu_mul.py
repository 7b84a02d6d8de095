#!/usr/bin/env python3
"""Peers of filtered_silu_mul (kernels/filtered_silu_mul.hip), on the shapes of
tests/bench/bench_filtered_silu_mul.cpp: rows in {6, 384, 3072, 24576, 196608} (inter 2048, limit
10) and kept_permille in {1000, 500, 125} (Bernoulli expert ids, -1 = filtered), calls rotating over
row ranges of a 2.4 GB pool, K = clamp(256 MB / bytes, 8, 64) calls a sample.

- eager_us, compile_us: torch eager and torch.compile of `silu(g.clamp(max=L)) * u.clamp(-L, L)`
  on gate_up [rows, 2 * inter] bf16. The expression has no expert filter (an engine without our
  kernel computes every row): timed once per rows, the same time stands at every kept fraction.
- triton_us: a plain Triton kernel of the same math and filter, a program per (row, column block):
  a row whose expert id is -1 loads and stores nothing; fp32 math, one bf16 rounding. The best of a
  few block sizes (triton_config names it).
Each peer's output is checked against torch eager's (kept rows) before it is timed.
"""
import torch
import triton
import triton.language as tl

import peer_timing
from peer_timing import attempt, check_close, launches_per_sample, time_us

INTER, POOL_ROWS, LIMIT = 2048, 196608, 10.0
ROWS = (6, 384, 3072, 24576, 196608)
KEPT_PERMILLE = (1000, 500, 125)
TRITON_CONFIGS = ((1024, 4), (2048, 8), (512, 2))  # (columns a program, warps)


def swiglu(gate_up):
    g, u = gate_up[:, :INTER], gate_up[:, INTER:]
    return torch.nn.functional.silu(g.clamp(max=LIMIT)) * u.clamp(-LIMIT, LIMIT)


@triton.jit
def filtered_swiglu_kernel(gate_up, ids, out, inter, limit, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    keep = tl.load(ids + row) != -1
    mask = (cols < inter) & keep
    src = gate_up + row * 2 * inter
    g = tl.load(src + cols, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(src + inter + cols, mask=mask, other=0.0).to(tl.float32)
    g = tl.minimum(g, limit)
    u = tl.minimum(tl.maximum(u, -limit), limit)
    y = g * tl.sigmoid(g) * u
    tl.store(out + row * inter + cols, y.to(tl.bfloat16), mask=mask)


def triton_swiglu(gate_up, ids, out, block, warps):
    rows = gate_up.shape[0]
    filtered_swiglu_kernel[(rows, triton.cdiv(INTER, block))](gate_up, ids, out, INTER, LIMIT, BLOCK=block,
                                                              num_warps=warps)


def main():
    args, _ = peer_timing.start(__doc__)
    output = peer_timing.Output("filtered_silu_mul", args.out)
    pool = (torch.randn(POOL_ROWS, 2 * INTER, device="cuda") * 6).to(torch.bfloat16)
    out_pool = torch.empty(POOL_ROWS, INTER, device="cuda", dtype=torch.bfloat16)
    ids_by_permille = {}
    for permille in KEPT_PERMILLE:
        kept = torch.rand(POOL_ROWS, device="cuda") * 1000 < permille
        ids_by_permille[permille] = torch.where(kept, torch.randint(0, 256, (POOL_ROWS,), device="cuda"),
                                                torch.full((POOL_ROWS,), -1, device="cuda")).to(torch.int32)
    compiled = torch.compile(swiglu, dynamic=False)
    for rows in ROWS:
        sets = min(64, POOL_ROWS // rows)
        views = [pool[s * rows:(s + 1) * rows] for s in range(sets)]
        outs = [out_pool[s * rows:(s + 1) * rows] for s in range(sets)]
        want = swiglu(views[0])
        torch_times = {}

        def compile_us():
            check_close("torch.compile", compiled(views[0]), want, rtol=1.6e-2, atol=1e-3)
            return time_us(lambda i: compiled(views[i]), launches_per_sample(rows * INTER * 6), sets)

        attempt(torch_times, "eager_us", lambda: time_us(lambda i: swiglu(views[i]), launches_per_sample(rows * INTER * 6), sets))
        attempt(torch_times, "compile_us", compile_us)
        for permille in KEPT_PERMILLE:
            ids = [ids_by_permille[permille][s * rows:(s + 1) * rows] for s in range(sets)]
            kept_rows = sum(int((i != -1).sum()) for i in ids) / sets
            k = launches_per_sample(kept_rows * INTER * 6 + rows * 4)  # the benchmark's bytes
            result = {"rows": rows, "kept_permille": permille, "inter": INTER}
            result.update({key: v for key, v in torch_times.items() if key != "errors"})
            if "errors" in torch_times:
                result["errors"] = dict(torch_times["errors"])

            def triton_us():
                best = None
                for block, warps in TRITON_CONFIGS:
                    triton_swiglu(views[0], ids[0], outs[0], block, warps)
                    kept = ids[0] != -1
                    check_close(f"triton {block}x{warps}", outs[0][kept], want[kept], rtol=1.6e-2, atol=1e-3)
                    t = time_us(lambda i: triton_swiglu(views[i], ids[i], outs[i], block, warps), k, sets)
                    if best is None or t < best[0]:
                        best = (t, block, warps)
                result["triton_config"] = f"BLOCK={best[1]} num_warps={best[2]}"
                return best[0]

            attempt(result, "triton_us", triton_us)
            output.add(result)


if __name__ == "__main__":
    main()
