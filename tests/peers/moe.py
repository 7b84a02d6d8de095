#!/usr/bin/env python3
"""Peers of the filtered MoE of one expert-parallel rank (moe: kernels/moe.h's launch_moe), on the
shapes of tests/bench/bench_moe.cpp: tokens 1, 8, 64, 256 (op decode) and 4096 (op prefill) at two
expert shapes, tiny (hidden 256, inter 64, 8 experts, top-2, unpartitioned) and flash (hidden 4096,
inter 2048, 256 experts, top-6, rank 0 of 8: 32 local experts). Token m's slot s takes expert
(97 m + 43 s) mod experts, as in the benchmark, so that both compute the same local rows.

The same math in each peer, for the rank's local slots only (a slot of another rank's expert adds
nothing): gate_up = bf16(W13[e] x), act = bf16(silu(min(g, 10)) * clamp(u, -10, 10)),
down = w * (W2[e] act), out = 1.5 * sum over the token's slots.
- the anchor (moe_rank): DeepSeek's reference loop over the used local experts (their rows
  gathered, two bf16 matmuls, the activation, index_add_ into the output), a host sync an expert;
  every form is checked against its output before it is timed;
- eager_us: the faster of torch vectorised (moe_grouped: the slots sorted by expert, both GEMMs
  as torch._grouped_mm, no host sync, timed as CUDA graph replays as an engine replays its step)
  and the reference loop (direct calls); eager_form names it, eager_forms gives both;
- compile_us: torch.compile of moe_grouped, static shapes, compiled before timing;
- triton_us: plain Triton kernels as fused-MoE kernels are planned: the slots sorted by local
  expert and padded to blocks of BM rows (in torch, in the step), GEMM1 with the activation fused
  then GEMM2 times the routed weight, each a program per (block, column block) on the tensor cores,
  reading each used expert's weights once a block; the combine in torch; the fastest of
  TRITON_CONFIGS, named in triton_config. Floors of the goals, measured here:
copy_us (a device copy of the benchmark's bytes, counted as the descriptor's work() counts them),
gemm_us (its FLOPs at the dense bf16 rate of an 8192^3 torch.mm) and floor_us, the larger.

Timing, budget, progress and output as tests/peers/peer_timing.py; results [{"op", "tokens", "hidden", "inter",
"experts", "topk", "ranks", "eager_us", "compile_us", "triton_us", "copy_us", "gemm_us",
"floor_us"}], and the document's "bf16_dense_TFLOPs".
"""
import torch
import triton
import triton.language as tl

import peer_timing
from peer_timing import Compiled, attempt, check_close, form_us, launches_per_sample, progress, time_us

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


def expert_counts(key, groups):
    """Rows a group (key in 0..groups-1) without a host sync (torch.bincount reads its max back)."""
    return torch.zeros(groups, dtype=torch.long, device=key.device).index_add_(0, key, torch.ones_like(key))


def moe_grouped(x, ids, weights, w13, w2, local):
    """The same math vectorised, no host sync (a CUDA graph holds it): the slots sorted by local
    expert (the others last), both GEMMs as torch._grouped_mm over the experts' row ranges, the
    activation, the routed weights and a scatter-add into the tokens."""
    tokens, topk = ids.shape
    inter = w2.shape[2]
    flat = ids.reshape(-1).long()
    key = torch.where(flat < local, flat, local)
    order = torch.argsort(key, stable=True)
    ends = torch.cumsum(expert_counts(key, local + 1)[:local], 0).to(torch.int32)
    tok = order // topk
    gate_up = torch._grouped_mm(x[tok], w13.transpose(1, 2), offs=ends)
    g, u = gate_up[:, :inter].float(), gate_up[:, inter:].float()
    act = (torch.nn.functional.silu(g.clamp(max=LIMIT)) * u.clamp(-LIMIT, LIMIT)).to(torch.bfloat16)
    down = torch._grouped_mm(act, w2.transpose(1, 2), offs=ends).float() * weights.reshape(-1)[order, None]
    kept = torch.arange(flat.numel(), device=x.device)[:, None] < ends[-1]  # rows past the local ones: not computed
    out = torch.zeros(tokens, x.shape[1], dtype=torch.float32, device=x.device)
    return out.index_add_(0, tok, torch.where(kept, down, 0.0)) * ROUTE_SCALE


def moe_plan(ids, local, bm):
    """The Triton form's row blocks (as fused-MoE kernels plan them; in the timed step, in torch,
    without a host sync): the slots sorted by local expert, each expert's rows padded to BM, so that
    block b of sorted_ids (slot ids, `rows` for padding) is one expert's, block_expert[b] (-1 past
    the last). The grid is the static bound rows + local (BM - 1) rows; blocks past it exit."""
    flat = ids.reshape(-1).long()
    rows = flat.numel()
    key = torch.where(flat < local, flat, local)
    counts = expert_counts(key, local + 1)[:local]
    padded = (counts + bm - 1) // bm * bm
    ends = torch.cumsum(padded, 0)
    order = torch.argsort(key, stable=True)
    sorted_key = key[order].clamp(max=local - 1)
    rank = torch.arange(rows, device=ids.device) - (torch.cumsum(counts, 0) - counts)[sorted_key]
    capacity = (rows + local * (bm - 1) + bm - 1) // bm * bm
    at = torch.where(key[order] < local, ends[sorted_key] - padded[sorted_key] + rank, capacity)
    sorted_ids = torch.full((capacity + 1,), rows, dtype=torch.int32, device=ids.device)
    sorted_ids.scatter_(0, at, order.to(torch.int32))
    block_expert = torch.searchsorted(ends, torch.arange(0, capacity, bm, device=ids.device), right=True)
    return sorted_ids[:capacity], torch.where(block_expert < local, block_expert, -1).to(torch.int32)


@triton.jit
def gate_up_act_kernel(x, sorted_ids, block_expert, w13, act, n_rows, hidden, inter, topk, limit,
                       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """One program per (block of BM rows of one expert, BN columns of inter): the gate and up
    columns as two tensor-core GEMMs over hidden, rounded to bf16 as the eager GEMM's output, the
    clamped SwiGLU, bf16 into the block's rows of act."""
    b, nb = tl.program_id(0), tl.program_id(1)
    e = tl.load(block_expert + b)
    if e >= 0:
        i = b * BM + tl.arange(0, BM)
        rows = tl.load(sorted_ids + i)
        valid = rows < n_rows
        tok = tl.where(valid, rows // topk, 0).to(tl.int64)
        n = nb * BN + tl.arange(0, BN)
        n_ok = n < inter
        kk = tl.arange(0, BK)
        w = w13 + e.to(tl.int64) * 2 * inter * hidden
        acc_g = tl.zeros([BM, BN], dtype=tl.float32)
        acc_u = tl.zeros([BM, BN], dtype=tl.float32)
        for k0 in range(0, hidden, BK):
            k = k0 + kk
            k_ok = k < hidden
            a = tl.load(x + tok[:, None] * hidden + k[None, :], mask=valid[:, None] & k_ok[None, :], other=0.0)
            mask = k_ok[:, None] & n_ok[None, :]
            wg = tl.load(w + n[None, :].to(tl.int64) * hidden + k[:, None], mask=mask, other=0.0)
            wu = tl.load(w + (inter + n[None, :]).to(tl.int64) * hidden + k[:, None], mask=mask, other=0.0)
            acc_g = tl.dot(a, wg, acc_g)
            acc_u = tl.dot(a, wu, acc_u)
        g = tl.minimum(acc_g.to(tl.bfloat16).to(tl.float32), limit)
        u = tl.minimum(tl.maximum(acc_u.to(tl.bfloat16).to(tl.float32), -limit), limit)
        tl.store(act + i[:, None].to(tl.int64) * inter + n[None, :], (g * tl.sigmoid(g) * u).to(tl.bfloat16),
                 mask=valid[:, None] & n_ok[None, :])


@triton.jit
def down_kernel(act, sorted_ids, block_expert, weights, w2, down, n_rows, hidden, inter,
                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """One program per (block of BM rows of one expert, BN columns of hidden): W2 act on the tensor
    cores, rounded to bf16, times the slot's routed weight, fp32 into the slot's row of down."""
    b, nb = tl.program_id(0), tl.program_id(1)
    e = tl.load(block_expert + b)
    if e >= 0:
        i = b * BM + tl.arange(0, BM)
        rows = tl.load(sorted_ids + i)
        valid = rows < n_rows
        n = nb * BN + tl.arange(0, BN)
        n_ok = n < hidden
        kk = tl.arange(0, BK)
        w = w2 + e.to(tl.int64) * hidden * inter
        acc = tl.zeros([BM, BN], dtype=tl.float32)
        for k0 in range(0, inter, BK):
            k = k0 + kk
            k_ok = k < inter
            a = tl.load(act + i[:, None].to(tl.int64) * inter + k[None, :], mask=valid[:, None] & k_ok[None, :], other=0.0)
            wv = tl.load(w + n[None, :].to(tl.int64) * inter + k[:, None], mask=k_ok[:, None] & n_ok[None, :], other=0.0)
            acc = tl.dot(a, wv, acc)
        routed = tl.load(weights + rows, mask=valid, other=0.0)
        tl.store(down + rows[:, None].to(tl.int64) * hidden + n[None, :],
                 acc.to(tl.bfloat16).to(tl.float32) * routed[:, None], mask=valid[:, None] & n_ok[None, :])


def triton_moe(x, ids, weights, w13, w2, local, work, bm, bn, bk, warps):
    """The plan (moe_plan), the two kernels over its blocks, then the combine in torch: each
    token's local slots summed (the others' rows of down are not written), times the route scale."""
    tokens, topk = ids.shape
    hidden, inter = x.shape[1], w2.shape[2]
    rows = tokens * topk
    sorted_ids, block_expert = moe_plan(ids, local, bm)
    act = work["act"][:sorted_ids.numel()]
    down = work["down"][:rows]
    blocks = block_expert.numel()
    gate_up_act_kernel[(blocks, triton.cdiv(inter, bn))](x, sorted_ids, block_expert, w13, act, rows, hidden, inter,
                                                         topk, LIMIT, BM=bm, BN=bn, BK=bk, num_warps=warps)
    down_kernel[(blocks, triton.cdiv(hidden, bn))](act, sorted_ids, block_expert, weights, w2, down, rows, hidden,
                                                   inter, BM=bm, BN=bn, BK=bk, num_warps=warps)
    kept = (ids < local)[..., None]
    return torch.where(kept, down.view(tokens, topk, hidden), 0.0).sum(1) * ROUTE_SCALE


TRITON_CONFIGS = ((16, 64, 64, 4), (32, 128, 64, 4), (64, 128, 64, 8))  # (BM, BN, BK, warps)


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


SHAPE_S = 6.0  # seconds a shape's eager, Triton and copy forms take at most: kept from the compiles


def main():
    args, _ = peer_timing.start(__doc__)
    output = peer_timing.Output("moe", args.out)
    rate = dense_bf16_rate()
    output.doc["bf16_dense_TFLOPs"] = rate * 1e-12
    copy_src = torch.empty(3 << 29, dtype=torch.uint8, device="cuda")  # half of flash prefill's 2.7 GB
    copy_dst = torch.empty_like(copy_src)
    compiled = Compiled(moe_grouped)
    shapes_left = len(SHAPES) * len(TOKENS)
    for shape in SHAPES:
        hidden, inter, topk = shape["hidden"], shape["inter"], shape["topk"]
        local = shape["experts"] // shape["ranks"]
        x = torch.randn(MAX_TOKENS, hidden, device="cuda").to(torch.bfloat16)
        w13 = torch.stack([(torch.randn(2 * inter, hidden, device="cuda") * (6 / hidden ** 0.5)).to(torch.bfloat16)
                           for _ in range(local)])
        w2 = torch.stack([(torch.randn(hidden, inter, device="cuda") / inter ** 0.5).to(torch.bfloat16) for _ in range(local)])
        all_weights = torch.rand(MAX_TOKENS, topk, device="cuda") + 0.1
        all_weights = all_weights / all_weights.sum(1, keepdim=True)
        work = {"act": torch.empty(MAX_TOKENS * topk + (local + 1) * 64, inter, device="cuda", dtype=torch.bfloat16),
                "down": torch.empty(MAX_TOKENS * topk, hidden, device="cuda", dtype=torch.float32)}
        for op, tokens in TOKENS:
            shapes_left -= 1
            ids, weights, xs = routing(tokens, topk, shape["experts"]), all_weights[:tokens].contiguous(), x[:tokens]
            nbytes, flops = work_count(shape, ids)
            k = launches_per_sample(nbytes) if op == "decode" else 3
            result = dict(op=op, tokens=tokens, **shape)
            progress(f"{op} tokens={tokens} hidden={hidden}")
            if peer_timing.budget_left() < SHAPE_S:
                result["errors"] = {"eager": "skipped: the time budget is spent"}
                output.add(result)
                continue
            # The anchor: DeepSeek's reference loop over the used experts (a host sync an expert).
            try:
                want = moe_rank(xs, ids, weights, w13, w2, local)
            except Exception as error:  # without the anchor no form is checked, so none is timed
                result["errors"] = {"eager": f"{type(error).__name__}: {error}"[:500]}
                output.add(result)
                continue

            def check(name):
                return lambda got: check_close(name, got, want, rtol=3e-2, atol=0.1)

            def eager_us():
                """The faster eager form: the grouped one in a graph, or the reference loop by direct calls."""
                times = {}
                try:
                    times["grouped_mm"] = form_us(result, "eager_us", lambda: moe_grouped(xs, ids, weights, w13, w2, local),
                                                  check("torch grouped_mm"), k)
                except Exception as error:  # torch without _grouped_mm, or a card without its kernels
                    result.setdefault("errors", {})["eager_us:grouped_mm"] = f"{type(error).__name__}: {error}"[:300]
                times["loop"] = time_us(lambda i: moe_rank(xs, ids, weights, w13, w2, local), k)
                result["eager_form"] = min(times, key=times.get)
                result["eager_forms"] = times
                return times[result["eager_form"]]

            def triton_us():
                return peer_timing.fastest_triton_us(
                    result, TRITON_CONFIGS, lambda c: "BM={} BN={} BK={} num_warps={}".format(*c),
                    lambda c: (lambda: triton_moe(xs, ids, weights, w13, w2, local, work, *c)), check, k)

            attempt(result, "eager_us", eager_us)
            peer_timing.compile_us(result, compiled, lambda fn: (lambda: fn(xs, ids, weights, w13, w2, local)),
                                   check("torch.compile"), k, peer_timing.reserve_s(shapes_left, SHAPE_S))
            attempt(result, "triton_us", triton_us)
            half = min(nbytes // 2, copy_src.numel())
            attempt(result, "copy_us", lambda: time_us(lambda i: copy_dst[:half].copy_(copy_src[:half]), k))
            result["gemm_us"] = flops / rate * 1e6
            result["floor_us"] = max(result.get("copy_us", 0.0), result["gemm_us"])
            output.add(result)


if __name__ == "__main__":
    main()
