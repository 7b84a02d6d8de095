#!/usr/bin/env python3
"""Peers of the filtered MoE of one expert-parallel rank (moe: kernels/moe.h's launch_moe), on the
shapes of tests/bench/bench_moe.cpp: tokens 1, 8, 64, 256 (op decode) and 4096 (op prefill) at two
expert shapes, tiny (hidden 256, inter 64, 8 experts, top-2, unpartitioned) and flash (hidden 4096,
inter 2048, 256 experts, top-6, rank 0 of 8: 32 local experts). Token m's slot s takes expert
(97 m + 43 s) mod experts, as in the benchmark, so that both compute the same local rows.

The same math in each peer, for the rank's local slots only (a slot of another rank's expert adds
nothing): gate_up = bf16(W13[e] x), act = bf16(silu(min(g, 10)) * clamp(u, -10, 10)),
down = w * (W2[e] act), out = 1.5 * sum over the token's slots.
- eager_us: torch eager, a loop over the used local experts (their rows gathered, two bf16 matmuls,
  the activation, index_add_ into the output), as DeepSeek's reference MoE loops.
- compile_us: torch.compile of the same function.
- triton_us: plain Triton kernels of the same math (a program per (slot row, column block): GEMM1
  with the activation fused, then GEMM2 times the routed weight; a filtered row reads no weight),
  local ids and the combine in torch.
Each is checked against eager's output before it is timed. Floors of the goals, measured here:
copy_us (a device copy of the benchmark's bytes, counted as the descriptor's work() counts them),
gemm_us (its FLOPs at the dense bf16 rate of an 8192^3 torch.mm) and floor_us, the larger.

Timing and output as tests/peers/peer_timing.py; results [{"op", "tokens", "hidden", "inter",
"experts", "topk", "ranks", "eager_us", "compile_us", "triton_us", "copy_us", "gemm_us",
"floor_us"}], and the document's "bf16_dense_TFLOPs".
"""
import torch
import triton
import triton.language as tl

import peer_timing
from peer_timing import attempt, check_close, launches_per_sample, time_us

LIMIT, ROUTE_SCALE, MAX_TOKENS = 10.0, 1.5, 4096
SHAPES = ({"hidden": 256, "inter": 64, "experts": 8, "topk": 2, "ranks": 1},
          {"hidden": 4096, "inter": 2048, "experts": 256, "topk": 6, "ranks": 8})
TOKENS = (("decode", 1), ("decode", 8), ("decode", 64), ("decode", 256), ("prefill", MAX_TOKENS))


def routing(tokens, topk, experts):
    m = torch.arange(tokens, device="cuda")[:, None]
    s = torch.arange(topk, device="cuda")[None, :]
    return ((97 * m + 43 * s) % experts).to(torch.int32)


def moe_rank(x, ids, weights, w13, w2, local):
    """Rank 0's partial: its experts are 0 .. local - 1."""
    tokens, topk = ids.shape
    inter = w2.shape[2]
    flat = ids.reshape(-1).long()
    out = torch.zeros(tokens, x.shape[1], dtype=torch.float32, device=x.device)
    counts = torch.bincount(flat[flat < local], minlength=local).tolist()
    for e in range(local):
        if counts[e] == 0:
            continue
        rows = torch.nonzero(flat == e).squeeze(1)
        tok = rows // topk
        gate_up = x[tok] @ w13[e].t()
        g, u = gate_up[:, :inter].float(), gate_up[:, inter:].float()
        act = (torch.nn.functional.silu(g.clamp(max=LIMIT)) * u.clamp(-LIMIT, LIMIT)).to(torch.bfloat16)
        down = (act @ w2[e].t()).float() * weights.reshape(-1)[rows, None]
        out.index_add_(0, tok, down)
    return out * ROUTE_SCALE


@triton.jit
def gate_up_act_kernel(x, local_ids, w13, act, hidden, inter, topk, limit, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    e = tl.load(local_ids + row)
    if e >= 0:
        cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        col_ok = cols < inter
        token = x + (row // topk) * hidden
        w = w13 + e.to(tl.int64) * 2 * inter * hidden
        g = tl.zeros([BLOCK_N], dtype=tl.float32)
        u = tl.zeros([BLOCK_N], dtype=tl.float32)
        for k0 in range(0, hidden, BLOCK_K):
            ks = k0 + tl.arange(0, BLOCK_K)
            k_ok = ks < hidden
            xv = tl.load(token + ks, mask=k_ok, other=0.0).to(tl.float32)
            mask = col_ok[:, None] & k_ok[None, :]
            wg = tl.load(w + cols[:, None] * hidden + ks[None, :], mask=mask, other=0.0).to(tl.float32)
            wu = tl.load(w + (inter + cols[:, None]) * hidden + ks[None, :], mask=mask, other=0.0).to(tl.float32)
            g += tl.sum(wg * xv[None, :], axis=1)
            u += tl.sum(wu * xv[None, :], axis=1)
        g = tl.minimum(g.to(tl.bfloat16).to(tl.float32), limit)
        u = tl.minimum(tl.maximum(u.to(tl.bfloat16).to(tl.float32), -limit), limit)
        tl.store(act + row * inter + cols, (g * tl.sigmoid(g) * u).to(tl.bfloat16), mask=col_ok)


@triton.jit
def down_kernel(act, local_ids, weights, w2, down, hidden, inter, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    e = tl.load(local_ids + row)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < hidden
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    if e >= 0:
        a_row = act + row * inter
        w = w2 + e.to(tl.int64) * hidden * inter
        for k0 in range(0, inter, BLOCK_K):
            ks = k0 + tl.arange(0, BLOCK_K)
            k_ok = ks < inter
            av = tl.load(a_row + ks, mask=k_ok, other=0.0).to(tl.float32)
            wv = tl.load(w + cols[:, None] * inter + ks[None, :], mask=col_ok[:, None] & k_ok[None, :], other=0.0)
            acc += tl.sum(wv.to(tl.float32) * av[None, :], axis=1)
        acc = acc * tl.load(weights + row)
    tl.store(down + row * hidden + cols, acc, mask=col_ok)


def triton_moe(x, ids, weights, w13, w2, local, work, block_n, block_k, warps):
    tokens, topk = ids.shape
    hidden, inter = x.shape[1], w2.shape[2]
    rows = tokens * topk
    flat = ids.reshape(-1)
    local_ids = torch.where(flat < local, flat, torch.full_like(flat, -1))
    act, down = work["act"][:rows], work["down"][:rows]
    gate_up_act_kernel[(rows, triton.cdiv(inter, block_n))](x, local_ids, w13, act, hidden, inter, topk, LIMIT,
                                                             BLOCK_N=block_n, BLOCK_K=block_k, num_warps=warps)
    down_kernel[(rows, triton.cdiv(hidden, block_n))](act, local_ids, weights, w2, down, hidden, inter,
                                                      BLOCK_N=block_n, BLOCK_K=block_k, num_warps=warps)
    return down.view(tokens, topk, hidden).sum(1) * ROUTE_SCALE


TRITON_CONFIGS = ((32, 128, 4), (64, 64, 4), (16, 256, 8))  # (BLOCK_N, BLOCK_K, warps)


def work_count(shape, ids):
    """The benchmark's bytes and FLOPs, as the descriptor's work() counts them (rank 0, no padding)."""
    hidden, inter, topk = shape["hidden"], shape["inter"], shape["topk"]
    local = shape["experts"] // shape["ranks"]
    tokens, rows = ids.shape[0], ids.numel()
    kept_ids = ids[ids < local]
    kept, used = kept_ids.numel(), int(torch.unique(kept_ids).numel())
    nbytes = (tokens * hidden * 2 + rows * 8 + used * 3 * inter * hidden * 2 +
              rows * (4 + 2 * inter * 2 + hidden * 4 * 2) + kept * inter * 2 * 2 + tokens * hidden * 4)
    flops = kept * (6 * inter * hidden + 4 * inter) + rows * hidden * 2
    return nbytes, flops


def dense_bf16_rate():
    """FLOP/s of an 8192^3 bf16 torch.mm: the matrix rate of the FLOP floor."""
    n = 8192
    a, b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16), torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    return 2.0 * n ** 3 / (time_us(lambda i: torch.mm(a, b), 8) * 1e-6)


def main():
    args, _ = peer_timing.start(__doc__)
    output = peer_timing.Output("moe", args.out)
    rate = dense_bf16_rate()
    output.doc["bf16_dense_TFLOPs"] = rate * 1e-12
    copy_src = torch.empty(3 << 29, dtype=torch.uint8, device="cuda")  # half of flash prefill's 2.7 GB
    copy_dst = torch.empty_like(copy_src)
    compiled = torch.compile(moe_rank)
    for shape in SHAPES:
        hidden, inter, topk = shape["hidden"], shape["inter"], shape["topk"]
        local = shape["experts"] // shape["ranks"]
        x = torch.randn(MAX_TOKENS, hidden, device="cuda").to(torch.bfloat16)
        w13 = torch.stack([(torch.randn(2 * inter, hidden, device="cuda") * (6 / hidden ** 0.5)).to(torch.bfloat16)
                           for _ in range(local)])
        w2 = torch.stack([(torch.randn(hidden, inter, device="cuda") / inter ** 0.5).to(torch.bfloat16) for _ in range(local)])
        all_weights = torch.rand(MAX_TOKENS, topk, device="cuda") + 0.1
        all_weights = all_weights / all_weights.sum(1, keepdim=True)
        work = {"act": torch.empty(MAX_TOKENS * topk, inter, device="cuda", dtype=torch.bfloat16),
                "down": torch.empty(MAX_TOKENS * topk, hidden, device="cuda", dtype=torch.float32)}
        for op, tokens in TOKENS:
            ids, weights, xs = routing(tokens, topk, shape["experts"]), all_weights[:tokens].contiguous(), x[:tokens]
            nbytes, flops = work_count(shape, ids)
            k = launches_per_sample(nbytes) if op == "decode" else 3
            result = dict(op=op, tokens=tokens, **shape)
            want = moe_rank(xs, ids, weights, w13, w2, local)
            attempt(result, "eager_us", lambda: time_us(lambda i: moe_rank(xs, ids, weights, w13, w2, local), k))

            def compile_us():
                check_close("torch.compile", compiled(xs, ids, weights, w13, w2, local), want, rtol=3e-2, atol=0.1)
                return time_us(lambda i: compiled(xs, ids, weights, w13, w2, local), k)

            def triton_us():
                best = None
                for block_n, block_k, warps in TRITON_CONFIGS:
                    got = triton_moe(xs, ids, weights, w13, w2, local, work, block_n, block_k, warps)
                    check_close(f"triton {block_n}x{block_k}x{warps}", got, want, rtol=3e-2, atol=0.1)
                    t = time_us(lambda i: triton_moe(xs, ids, weights, w13, w2, local, work, block_n, block_k, warps), k)
                    if best is None or t < best[0]:
                        best = (t, block_n, block_k, warps)
                result["triton_config"] = f"BLOCK_N={best[1]} BLOCK_K={best[2]} num_warps={best[3]}"
                return best[0]

            attempt(result, "compile_us", compile_us)
            attempt(result, "triton_us", triton_us)
            half = min(nbytes // 2, copy_src.numel())
            attempt(result, "copy_us", lambda: time_us(lambda i: copy_dst[:half].copy_(copy_src[:half]), k))
            result["gemm_us"] = flops / rate * 1e6
            result["floor_us"] = max(result.get("copy_us", 0.0), result["gemm_us"])
            output.add(result)


if __name__ == "__main__":
    main()
