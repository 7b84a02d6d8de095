#!/usr/bin/env python3
"""Peers of the C4 lightning indexer's decode chain (issue 29), timed on the GPU beside
tests/bench/bench_indexer.cpp, on its shapes: bs in {1, 8, 64, 128}, ctx in {8192, 65536} (c4
lengths 2K and 16K), 64 heads, index_topk 512, every row at position ctx - 1, 256 random C4 pages a
row in one pool of 64-entry pages of 132-byte fp8 entries (spec 4.2).

The same math in each peer: the query's rope (interleaved pairs of the last 64 channels, the YaRN
table of compress_rope_theta 160000), the 128-point Hadamard rotation over sqrt(128), fp8 e4m3 with
a power-of-two scale per (token, head); scores sum_h relu(q_h . k_j) w_h over the row's visible
entries with each entry's scale; the top 512; their C4 page slots. The inputs are made before any
timing as the engine holds them: the pool as bytes (codes and fp32 scales read in place), the page
table, q bf16, the head weights, the rope's cos/sin table of every position. Peers, each a step
timed as CUDA graph replays (peer_timing.form_us: an engine replays its decode step, so Python's
launch overhead is not the peers' time):
- eager: torch, vectorised over rows (each row's pages gathered, scored in fp32: the fp8 products
  are exact); the anchor the others' selections are checked against;
- compile: torch.compile of the same function, static shapes, compiled before timing;
- triton: plain Triton kernels for the query (rope, Hadamard, fp8 quantisation: a program a row)
  and the scores (a program per row and run of pages, the query loaded once, each visible page
  gathered from the pool once and scored on the tensor cores, pages past the visible count
  skipped), the top-k and page translation in torch.
Floors of the goals, measured here: copy_us (a device copy of the chain's counted bytes, as
the benchmark counts them), fp8_dense_us (the chain's FLOPs at the dense fp8 rate of an 8192^3
torch._scaled_mm) and floor_us, the larger.

Timing, budget and output as tests/peers/peer_timing.py (the compile and Triton forms checked
against eager's selection first); results [{"bs", "ctx", "eager_us", "compile_us", "triton_us", "copy_us",
"fp8_dense_us", "floor_us"}, ..., and the prefill's {"tokens", "eager_us", "compile_us",
"triton_us"}], and the document's "fp8_dense_TFLOPs".
"""
import math

import torch
import triton
import triton.language as tl

import peer_timing
from peer_timing import Compiled, attempt, form_us, launches_per_sample, progress, time_us

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


def rope_cache(freqs, positions=65536):
    """cos and sin [positions, 32] fp32 of every position (angles in fp64): the table an engine
    holds for its rope (made once, outside any timing), indexed by each row's position."""
    angle = torch.arange(positions, device="cuda", dtype=torch.float64)[:, None] * freqs[None, :]
    return angle.cos().float().contiguous(), angle.sin().float().contiguous()


def quantise_query(q, positions, cos_cache, sin_cache, had):
    """q [bs, H, 128] bf16 -> fp8 codes as float values and the per-(token, head) scales."""
    x = q.float()
    cos, sin = cos_cache[positions.long()][:, None, :], sin_cache[positions.long()][:, None, :]
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


def select(scores, visible, page_table):
    """topk_transform_512: rows with at most 512 visible entries keep them all, in order, then -1;
    the others their 512 best; then the C4 page slots."""
    idx = scores.topk(TOPK, dim=1).indices.int()
    first = torch.arange(TOPK, device="cuda", dtype=torch.int32)[None, :]
    idx = torch.where(visible <= TOPK, torch.where(first < visible, first, -1), idx)
    return page_slots(idx, page_table)


def decode_torch(q, positions, weights, values, scales, page_table, cos_cache, sin_cache, had):
    """Vectorised over rows: each row's visible pages gathered from the pool (as fp8 bytes and
    their fp32 scales), scored in fp32 (exact fp8 products), masked past the visible count."""
    codes, q_scale = quantise_query(q, positions, cos_cache, sin_cache, had)
    bs, pages = page_table.shape
    k = values[page_table].view(torch.float8_e4m3fn).reshape(bs, pages * PAGE, DIM).float()
    k_scale = scales[page_table].reshape(bs, pages * PAGE)
    dots = torch.einsum("bhd,bnd->bhn", codes, k).relu()
    scores = torch.einsum("bhn,bh->bn", dots, weights * q_scale) * k_scale
    visible = ((positions + 1) // 4)[:, None]
    scores = scores.masked_fill(torch.arange(pages * PAGE, device="cuda")[None, :] >= visible, float("-inf"))
    return select(scores, visible, page_table)


@triton.jit
def query_kernel(q, positions, cos_cache, sin_cache, had, weights, codes, head_weight,
                 HEADS: tl.constexpr, DIM: tl.constexpr):
    """One program a row: the rope of the last 64 channels (pairs 32.. of the 64 interleaved pairs,
    cos and sin from the engine's table), the Hadamard rotation as a fp32 matrix product (ieee, as
    torch's fp32 matmul), the power-of-two scale per head from the exponent bits (exact, where a
    log2 would round) and the e4m3 codes; the head weights times the scales."""
    row = tl.program_id(0).to(tl.int64)
    h, d = tl.arange(0, HEADS), tl.arange(0, DIM)
    x = tl.load(q + (row * HEADS + h[:, None]) * DIM + d[None, :]).to(tl.float32)
    re, im = tl.split(tl.reshape(x, [HEADS, DIM // 2, 2]))
    i = tl.arange(0, DIM // 2) - 32
    rope = i >= 0
    pos = tl.load(positions + row).to(tl.int64)
    c = tl.load(cos_cache + pos * 32 + i, mask=rope, other=1.0)[None, :]
    s = tl.load(sin_cache + pos * 32 + i, mask=rope, other=0.0)[None, :]
    x = tl.reshape(tl.join(re * c - im * s, re * s + im * c), [HEADS, DIM])
    y = tl.dot(x, tl.load(had + d[:, None] * DIM + d[None, :]), input_precision="ieee")
    ratio = tl.maximum(tl.max(tl.abs(y), 1), 1e-4) / 448.0
    bits = ratio.to(tl.int32, bitcast=True)
    exponent = ((bits >> 23) & 0xff) - 127 + ((bits & 0x7fffff) != 0).to(tl.int32)  # ceil(log2(ratio))
    scale = ((exponent + 127) << 23).to(tl.float32, bitcast=True)
    inverse = ((127 - exponent) << 23).to(tl.float32, bitcast=True)
    fp8 = (y * inverse[:, None]).to(tl.float8e4nv)
    tl.store(codes + (row * HEADS + h[:, None]) * DIM + d[None, :], fp8.to(tl.uint8, bitcast=True))
    tl.store(head_weight + row * HEADS + h, tl.load(weights + row * HEADS + h) * scale)


@triton.jit
def logits_kernel(codes, head_weight, pool, pool_f32, page_table, positions, logits, pages, pages_per_program,
                  PAGE_BYTES: tl.constexpr, HEADS: tl.constexpr, DIM: tl.constexpr, PAGE: tl.constexpr):
    """One program per (row, run of pages_per_program pages of its table): the row's fp8 query
    loaded once, each visible page's 64 entries gathered from the pool as fp8 bytes (exact in bf16)
    and scored on the tensor cores (fp32 accumulation), sum_h relu(q_h . k) w_h times the entry's
    scale; pages past the row's visible count are not read, only written -inf."""
    chunk, row = tl.program_id(0), tl.program_id(1).to(tl.int64)
    h, d, e = tl.arange(0, HEADS), tl.arange(0, DIM), tl.arange(0, PAGE)
    visible = (tl.load(positions + row) + 1) // 4
    first = chunk * pages_per_program
    last = tl.minimum(first + pages_per_program, pages)
    seen = tl.minimum(last, (visible + PAGE - 1) // PAGE)
    q = tl.load(codes + (row * HEADS + h[:, None]) * DIM + d[None, :]).to(tl.float8e4nv, bitcast=True).to(tl.bfloat16)
    w = tl.load(head_weight + row * HEADS + h)
    for p in range(first, seen):
        page = tl.load(page_table + row * pages + p).to(tl.int64)
        k = tl.load(pool + page * PAGE_BYTES + e[:, None] * DIM + d[None, :]).to(tl.float8e4nv, bitcast=True)
        k_scale = tl.load(pool_f32 + page * (PAGE_BYTES // 4) + PAGE * DIM // 4 + e)
        dots = tl.dot(q, tl.trans(k.to(tl.bfloat16)))  # [HEADS, PAGE]
        score = tl.sum(tl.maximum(dots, 0.0) * w[:, None], axis=0) * k_scale
        j = p * PAGE + e
        tl.store(logits + row * pages * PAGE + j, tl.where(j < visible, score, float("-inf")))
    for p in range(tl.maximum(seen, first), last):
        tl.store(logits + row * pages * PAGE + p * PAGE + e, tl.full([PAGE], float("-inf"), tl.float32))


def decode_triton(q, positions, weights, pool, pool_f32, page_table, cos_cache, sin_cache, had, work):
    """The query and the scores in Triton (above), the top-k and page translation in torch."""
    bs, pages = page_table.shape
    codes, head_weight = work["codes"][:bs], work["head_weight"][:bs]
    logits = work["logits"][:bs * pages * PAGE].view(bs, pages * PAGE)
    query_kernel[(bs,)](q, positions, cos_cache, sin_cache, had, weights, codes, head_weight, HEADS=HEADS, DIM=DIM,
                        num_warps=8)
    per_program = max(1, min(16, bs * pages // (8 * SM_COUNT[0])))
    logits_kernel[(triton.cdiv(pages, per_program), bs)](codes, head_weight, pool, pool_f32, page_table, positions,
                                                          logits, pages, per_program, PAGE_BYTES=PAGE * (DIM + 4),
                                                          HEADS=HEADS, DIM=DIM, PAGE=PAGE, num_warps=4)
    return select(logits, ((positions + 1) // 4)[:, None], page_table)


SM_COUNT = [132]  # the card's, set by main()


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


def time_forms(result, eager, compiled, call, triton_form, nbytes, reserve_s):
    """eager_us, compile_us and triton_us of one shape, each a step timed as graph replays
    (peer_timing.form_us); compile (call(fn) the step of a compiled function fn) and Triton
    checked against eager's selection (computed first)."""
    k = launches_per_sample(nbytes)
    want = eager()

    def check(name):
        return lambda got: check_selection(name, got, want)
    attempt(result, "eager_us", lambda: form_us(result, "eager_us", eager, check("eager"), k))
    peer_timing.compile_us(result, compiled, call, check("torch.compile"), k, reserve_s)
    attempt(result, "triton_us", lambda: form_us(result, "triton_us", triton_form, check("triton"), k))


def main():
    args, _ = peer_timing.start(__doc__)
    output = peer_timing.Output("indexer", args.out)
    SM_COUNT[0] = torch.cuda.get_device_properties(0).multi_processor_count
    torch.manual_seed(29)
    pool_pages = MAX_BS * MAX_PAGES + 1
    pool = torch.randint(0, 256, (pool_pages, PAGE * (DIM + 4)), dtype=torch.uint8, device="cuda")
    pool[:, :PAGE * DIM] &= 0xfe  # no NaN codes (0x7f, 0xff)
    scale_exp = torch.randint(-3, 4, (pool_pages, PAGE), device="cuda").float()
    pool[:, PAGE * DIM:] = torch.exp2(scale_exp).view(torch.uint8).view(pool_pages, PAGE * 4)
    values = pool[:, :PAGE * DIM].view(pool_pages, PAGE, DIM)  # e4m3 codes, gathered as bytes
    scales = pool[:, PAGE * DIM:].view(torch.float32)  # the pages' fp32 scales, viewed in place
    pool_f32 = pool.view(torch.float32)
    table = (torch.randperm(MAX_BS * MAX_PAGES, device="cuda") + 1).int()
    q = torch.randn(MAX_BS, HEADS, DIM, device="cuda").bfloat16()
    weights = torch.randn(MAX_BS, HEADS, device="cuda") / math.sqrt(DIM * HEADS)
    cos_cache, sin_cache = rope_cache(rope_freqs())
    had = hadamard(DIM)
    tokens = 8192  # the prefill's rows
    work = {"codes": torch.empty(tokens, HEADS, DIM, dtype=torch.uint8, device="cuda"),
            "head_weight": torch.empty(tokens, HEADS, device="cuda"),
            "logits": torch.empty(max(MAX_BS * MAX_PAGES, tokens * (tokens // 4 // PAGE)) * PAGE, device="cuda")}
    compiled = Compiled(decode_torch)
    dense = fp8_dense_flops_per_s()
    output.doc["fp8_dense_TFLOPs"] = dense / 1e12
    copy_src = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    copy_dst = torch.empty_like(copy_src)
    shapes_left = len(SHAPES) + 1
    for bs, ctx in SHAPES:
        shapes_left -= 1
        progress(f"decode bs={bs} ctx={ctx}")
        pages = ctx // 4 // PAGE
        page_table = table[:bs * pages].view(bs, pages).contiguous()
        positions = torch.full((bs,), ctx - 1, dtype=torch.int32, device="cuda")
        inputs = (q[:bs].contiguous(), positions, weights[:bs].contiguous())
        counted = bs * ((ctx // 4) * 132 + HEADS * DIM * 2 + HEADS * 4 + TOPK * 4)  # as bench_indexer.cpp
        result = {"bs": bs, "ctx": ctx}
        if peer_timing.budget_left() < SHAPE_S:
            result["errors"] = {"eager": "skipped: the time budget is spent"}
            output.add(result)
            continue
        try:
            time_forms(result, lambda: decode_torch(*inputs, values, scales, page_table, cos_cache, sin_cache, had), compiled,
                       lambda fn: (lambda: fn(*inputs, values, scales, page_table, cos_cache, sin_cache, had)),
                       lambda: decode_triton(*inputs, pool, pool_f32, page_table, cos_cache, sin_cache, had, work),
                       counted, peer_timing.reserve_s(shapes_left, SHAPE_S))
        except Exception as error:  # eager's anchor: without it no form is checked
            result.setdefault("errors", {})["eager"] = f"{type(error).__name__}: {error}"[:500]
        half = counted // 2
        attempt(result, "copy_us", lambda: time_us(lambda i: copy_dst[:half].copy_(copy_src[:half]),
                                                   launches_per_sample(counted)))
        result["fp8_dense_us"] = 2.0 * bs * (ctx // 4) * HEADS * DIM / dense * 1e6
        if "copy_us" in result:
            result["floor_us"] = max(result["copy_us"], result["fp8_dense_us"])
        output.add(result)
    # Prefill (BM_indexer_prefill): 8192 rows of one request at positions 0..8191, its page table
    # row repeated; the row's gathered keys are 8.6 GB in fp32 in the torch peers.
    progress(f"prefill tokens={tokens}")
    pages = tokens // 4 // PAGE
    page_table = table[:pages].view(1, pages).expand(tokens, pages).contiguous()
    positions = torch.arange(tokens, dtype=torch.int32, device="cuda")
    inputs = (q.repeat(tokens // MAX_BS, 1, 1), positions, weights.repeat(tokens // MAX_BS, 1))
    result = {"tokens": tokens}
    if peer_timing.budget_left() < SHAPE_S:
        result["errors"] = {"eager": "skipped: the time budget is spent"}
        output.add(result)
        return
    try:
        time_forms(result, lambda: decode_torch(*inputs, values, scales, page_table, cos_cache, sin_cache, had), compiled,
                   lambda fn: (lambda: fn(*inputs, values, scales, page_table, cos_cache, sin_cache, had)),
                   lambda: decode_triton(*inputs, pool, pool_f32, page_table, cos_cache, sin_cache, had, work),
                   tokens * ((tokens // 4) * 132 + HEADS * DIM * 2), 0.0)
    except Exception as error:
        result.setdefault("errors", {})["eager"] = f"{type(error).__name__}: {error}"[:500]
    output.add(result)


SHAPE_S = 4.0  # seconds a shape's eager and Triton forms and its copy take at most: kept from the compiles


if __name__ == "__main__":
    main()
