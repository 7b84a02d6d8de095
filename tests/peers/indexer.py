#!/usr/bin/env python3
"""Peers of the C4 lightning indexer's decode chain (issue 29), timed on the GPU beside
tests/bench/bench_indexer.cpp, on its shapes: bs in {1, 8, 64, 128}, ctx in {8192, 65536} (c4
lengths 2K and 16K), 64 heads, index_topk 512, every row at position ctx - 1, 256 random C4 pages a
row in one pool of 64-entry pages of 132-byte fp8 entries (spec 4.2).

The same math in each peer: the query's rope (interleaved pairs of the last 64 channels, the YaRN
table of compress_rope_theta 160000), the 128-point Hadamard rotation over sqrt(128), fp8 e4m3 with
a power-of-two scale per (token, head); scores sum_h relu(q_h . k_j) w_h over the row's visible
entries with each entry's scale; the top 512; their C4 page slots. Peers: torch eager, torch.compile
of the same function, and a plain Triton kernel for the scores (the largest part) with the rest in
torch. Floors of the goals, measured here: copy_us (a device copy of the chain's counted bytes, as
the benchmark counts them), fp8_dense_us (the chain's FLOPs at the dense fp8 rate of an 8192^3
torch._scaled_mm) and floor_us, the larger.

Timing and output as tests/peers/peer_timing.py (the compile and Triton forms checked against
eager's selection first); results [{"bs", "ctx", "eager_us", "compile_us", "triton_us", "copy_us",
"fp8_dense_us", "floor_us"}, ..., and the prefill's {"tokens", "eager_us", "compile_us",
"triton_us"}], and the document's "fp8_dense_TFLOPs".
"""
import math

import torch
import triton
import triton.language as tl

import peer_timing
from peer_timing import attempt, launches_per_sample, time_us

HEADS, DIM, TOPK, PAGE = 64, 128, 512, 64
MAX_BS, MAX_PAGES = 128, 65536 // 4 // PAGE
SHAPES = [(bs, ctx) for bs in (1, 8, 64, 128) for ctx in (8192, 65536)]


def rope_freqs():
    """spec 2.4: base 160000 with frequency-only YaRN (original 65536, factor 16, beta 32 / 1)."""
    base, dim = 160000.0, 64
    f = [base ** (-2.0 * i / dim) for i in range(dim // 2)]

    def correction(rotations):
        return dim * math.log(65536 / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = max(math.floor(correction(32)), 0), min(math.ceil(correction(1)), dim - 1)
    for i in range(dim // 2):
        smooth = 1 - min(max((i - low) / (high - low), 0.0), 1.0)
        f[i] = f[i] / 16 * (1 - smooth) + f[i] * smooth
    return torch.tensor(f, dtype=torch.float64, device="cuda")


def hadamard(n):
    h = torch.ones(1, 1, dtype=torch.float32)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return (h / math.sqrt(n)).cuda()


def quantise_query(q, positions, freqs, had):
    """q [bs, H, 128] bf16 -> fp8 codes as float values and the per-(token, head) scales."""
    x = q.float()
    angle = positions.double()[:, None] * freqs[None, :]
    cos, sin = angle.cos().float()[:, None, :], angle.sin().float()[:, None, :]
    re, im = x[..., 64::2], x[..., 65::2]
    tail = torch.stack([re * cos - im * sin, re * sin + im * cos], -1).flatten(-2)
    x = torch.cat([x[..., :64], tail], -1) @ had
    amax = x.abs().amax(-1, keepdim=True).clamp(min=1e-4)
    scale = torch.exp2(torch.ceil(torch.log2(amax / 448)))
    codes = (x / scale).to(torch.float8_e4m3fn).float()
    return codes, scale.squeeze(-1)


def page_slots(idx, page_table):
    slots = page_table.gather(1, idx.clamp(min=0) >> 6) * PAGE + (idx & (PAGE - 1))
    return torch.where(idx < 0, -1, slots)


def decode_torch(q, positions, weights, values, scales, page_table, freqs, had):
    codes, q_scale = quantise_query(q, positions, freqs, had)
    bs, pages = page_table.shape
    k = values[page_table].view(torch.float8_e4m3fn).reshape(bs, pages * PAGE, DIM).float()
    k_scale = scales[page_table].reshape(bs, pages * PAGE)
    dots = torch.einsum("bhd,bnd->bhn", codes, k).relu()
    scores = torch.einsum("bhn,bh->bn", dots, weights * q_scale) * k_scale
    visible = ((positions + 1) // 4)[:, None]
    scores = scores.masked_fill(torch.arange(pages * PAGE, device="cuda")[None, :] >= visible, float("-inf"))
    # topk_transform_512: rows with at most 512 visible entries keep them all, in order, then -1.
    idx = scores.topk(TOPK, dim=1).indices.int()
    first = torch.arange(TOPK, device="cuda", dtype=torch.int32)[None, :]
    idx = torch.where(visible <= TOPK, torch.where(first < visible, first, -1), idx)
    return page_slots(idx, page_table)


@triton.jit
def logits_kernel(codes, head_weight, pool, page_table, positions, logits, pages, PAGE_BYTES: tl.constexpr,
                  HEADS: tl.constexpr, DIM: tl.constexpr, PAGE: tl.constexpr):
    tile, row = tl.program_id(0), tl.program_id(1)
    h, d, e = tl.arange(0, HEADS), tl.arange(0, DIM), tl.arange(0, PAGE)
    visible = (tl.load(positions + row) + 1) // 4
    page = tl.load(page_table + row * pages + tile).to(tl.int64)
    q = tl.load(codes + row * HEADS * DIM + h[:, None] * DIM + d[None, :]).to(tl.bfloat16)
    k = tl.load(pool + page * PAGE_BYTES + e[:, None] * DIM + d[None, :]).to(tl.float8e4nv, bitcast=True)
    k_scale = tl.load((pool + page * PAGE_BYTES + PAGE * DIM).to(tl.pointer_type(tl.float32)) + e)
    dots = tl.dot(q, tl.trans(k.to(tl.bfloat16)))  # [HEADS, PAGE], fp32 accumulation
    w = tl.load(head_weight + row * HEADS + h)
    score = tl.sum(tl.maximum(dots, 0.0) * w[:, None], axis=0) * k_scale
    j = tile * PAGE + e
    tl.store(logits + row * pages * PAGE + j, tl.where(j < visible, score, float("-inf")))


def decode_triton(q, positions, weights, pool, page_table, freqs, had):
    codes, q_scale = quantise_query(q, positions, freqs, had)
    bs, pages = page_table.shape
    logits = torch.empty(bs, pages * PAGE, device="cuda")
    logits_kernel[(pages, bs)](codes, (weights * q_scale).contiguous(), pool, page_table, positions, logits, pages,
                               PAGE_BYTES=PAGE * (DIM + 4), HEADS=HEADS, DIM=DIM, PAGE=PAGE, num_warps=4)
    visible = ((positions + 1) // 4)[:, None]
    idx = logits.topk(TOPK, dim=1).indices.int()
    first = torch.arange(TOPK, device="cuda", dtype=torch.int32)[None, :]
    idx = torch.where(visible <= TOPK, torch.where(first < visible, first, -1), idx)
    return page_slots(idx, page_table)


def check_selection(name, got, want):
    """A peer's page slots against torch eager's, as sets a row: the peers sum the same exact products
    in different orders, so a score at the top-k boundary may swap with its neighbour; more than 1%
    of the slots differing is a peer computing something else."""
    differ = (got.sort(dim=1).values != want.sort(dim=1).values).float().mean().item()
    if differ > 0.01:
        raise AssertionError(f"{name} differs from torch eager in {differ:.2%} of the selected slots")


def fp8_dense_flops_per_s():
    """torch._scaled_mm of 8192^3 e4m3 (fp32 out scale 1): the dense fp8 rate of this card."""
    n = 8192
    a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()
    one = torch.ones((), device="cuda")
    us = time_us(lambda i: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16), 8)
    return 2 * n ** 3 / (us * 1e-6)


def time_forms(result, eager, compiled, triton_form, nbytes):
    """eager_us, compile_us and triton_us of one shape; compile and Triton checked against eager."""
    k = launches_per_sample(nbytes)
    want = eager()
    attempt(result, "eager_us", lambda: time_us(lambda i: eager(), k))

    def checked(name, form):
        check_selection(name, form(), want)
        return time_us(lambda i: form(), k)
    attempt(result, "compile_us", lambda: checked("torch.compile", compiled))
    attempt(result, "triton_us", lambda: checked("triton", triton_form))


def main():
    args, _ = peer_timing.start(__doc__)
    output = peer_timing.Output("indexer", args.out)
    torch.manual_seed(29)
    pool_pages = MAX_BS * MAX_PAGES + 1
    pool = torch.randint(0, 256, (pool_pages, PAGE * (DIM + 4)), dtype=torch.uint8, device="cuda")
    pool[:, :PAGE * DIM] &= 0xfe  # no NaN codes (0x7f, 0xff)
    scale_exp = torch.randint(-3, 4, (pool_pages, PAGE), device="cuda").float()
    pool[:, PAGE * DIM:] = torch.exp2(scale_exp).view(torch.uint8).view(pool_pages, PAGE * 4)
    values = pool[:, :PAGE * DIM].view(pool_pages, PAGE, DIM)  # e4m3 codes, gathered as bytes
    scales = pool[:, PAGE * DIM:].contiguous().view(torch.float32)
    table = (torch.randperm(MAX_BS * MAX_PAGES, device="cuda") + 1).int()
    q = torch.randn(MAX_BS, HEADS, DIM, device="cuda").bfloat16()
    weights = torch.randn(MAX_BS, HEADS, device="cuda") / math.sqrt(DIM * HEADS)
    freqs, had = rope_freqs(), hadamard(DIM)
    compiled = torch.compile(decode_torch)
    dense = fp8_dense_flops_per_s()
    output.doc["fp8_dense_TFLOPs"] = dense / 1e12
    copy_src = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    copy_dst = torch.empty_like(copy_src)
    for bs, ctx in SHAPES:
        pages = ctx // 4 // PAGE
        page_table = table[:bs * pages].view(bs, pages).contiguous()
        positions = torch.full((bs,), ctx - 1, dtype=torch.int32, device="cuda")
        inputs = (q[:bs], positions, weights[:bs])
        counted = bs * ((ctx // 4) * 132 + HEADS * DIM * 2 + HEADS * 4 + TOPK * 4)  # as bench_indexer.cpp
        result = {"bs": bs, "ctx": ctx}
        time_forms(result, lambda: decode_torch(*inputs, values, scales, page_table, freqs, had),
                   lambda: compiled(*inputs, values, scales, page_table, freqs, had),
                   lambda: decode_triton(*inputs, pool, page_table, freqs, had), counted)
        half = counted // 2
        attempt(result, "copy_us", lambda: time_us(lambda i: copy_dst[:half].copy_(copy_src[:half]),
                                                   launches_per_sample(counted)))
        result["fp8_dense_us"] = 2.0 * bs * (ctx // 4) * HEADS * DIM / dense * 1e6
        if "copy_us" in result:
            result["floor_us"] = max(result["copy_us"], result["fp8_dense_us"])
        output.add(result)
    # Prefill (BM_indexer_prefill): 8192 rows of one request at positions 0..8191, its page table
    # row repeated; the row's gathered keys are 8.6 GB in fp32 in the torch peers.
    tokens = 8192
    pages = tokens // 4 // PAGE
    page_table = table[:pages].view(1, pages).expand(tokens, pages).contiguous()
    positions = torch.arange(tokens, dtype=torch.int32, device="cuda")
    inputs = (q.repeat(tokens // MAX_BS, 1, 1), positions, weights.repeat(tokens // MAX_BS, 1))
    result = {"tokens": tokens}
    time_forms(result, lambda: decode_torch(*inputs, values, scales, page_table, freqs, had),
               lambda: compiled(*inputs, values, scales, page_table, freqs, had),
               lambda: decode_triton(*inputs, pool, page_table, freqs, had),
               tokens * ((tokens // 4) * 132 + HEADS * DIM * 2))
    output.add(result)


if __name__ == "__main__":
    main()
