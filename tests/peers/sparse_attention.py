#!/usr/bin/env python3
"""Peers of sparse_attention (issue 30): the same math in torch eager, torch.compile and a plain
Triton kernel, on the benchmark's shapes (tests/bench/bench_sparse_attention.cpp: 64 heads, bs 1,
8, 64, 128, 256, C4 with 512 selected entries and C128, every row at position ctx - 1, ctx 8K and
64K, each row its own keys at distinct slots of MODEL1 FP8 pools); and the prefill benchmark's: one
request's 2K and 8K tokens from position 0 on a C4 and a C128 layer, every token its own row, its
window and compressed entries causal (C4: a random selection of up to 512 of the visible ones).

Per row and head: gather the window's 128 entries and the compressed ones from the pools
(dequantise fp8 * 2^(scale byte - 127) per 64-dim tile, rope dims bf16), s = q.k * 512^-0.5 with
-1 masked, lse = logsumexp(s), o = softmax(s) V / (1 + exp(sink - lse)), the rope slice de-rotated
by the position; output bf16 and lse fp32.

The inputs are made before any timing as the engine holds them: the pools as bytes, the index
lists int32, q bf16, the rope's cos and sin of each row's position. A step is only the attention:
- eager: torch, vectorised over rows (the selected entries gathered and dequantised, two batched
  matmuls in fp32, the masks and the sink); the anchor every other form is checked against;
- compile: torch.compile of the same function, static shapes, compiled before timing;
- triton: a plain Triton kernel: a program per (16-64 heads, row, split of the row's keys), each
  key tile gathered from the pool once for its heads and dequantised in the kernel, scores and p V
  on the tensor cores (bf16 in, fp32 accumulation), online softmax; where a batch is too small to
  fill the card the keys are split and a second kernel merges the splits (flash decoding).
Every form is timed as CUDA graph replays (peer_timing.form_us), as the engine replays a decode
step: what is timed is the device's work, not Python's launch overhead.

usage: python3 tests/peers/sparse_attention.py --out FILE [--budget S]   (writes the JSON the goals
read: {"component": "sparse_attention", "device": ..., "results": [{"bs", "ratio", "ctx",
"eager_us", "compile_us", "triton_us", "compile_mode", "triton_config", ...}, ..., {"prefill": 1,
"tokens", "ratio", ...}]}; the prefill rows go through torch in chunks of 512 rows, as their
gathered keys would not fit at once; timing, budget and output as peer_timing.py: the file is
rewritten after every shape, and a progress line goes to the log before each form)
"""
import math

import torch
import triton
import triton.language as tl

import peer_timing
from peer_timing import Compiled, attempt, check_close, form_us, launches_per_sample, progress

HEADS, DIMS, NOPE, ROPE, WINDOW = 64, 512, 448, 64, 128
SCALE = DIMS ** -0.5
PAGE_TOKENS = {0: 256, 4: 64, 128: 2}  # SWA, C4, C128 pools (spec 4.1)


def page_bytes(tokens):
    return (tokens * 584 + 575) // 576 * 576


def make_pool(entries, tokens, gen):
    """A MODEL1 pool holding `entries` random latents (plus a spare slot), quantised as the pool does."""
    pages = (entries + 1 + tokens - 1) // tokens
    slots = pages * tokens
    latent = torch.randn(slots, DIMS, generator=gen, device="cuda").bfloat16().float()
    nope = latent[:, :NOPE].view(slots, 7, 64)
    amax = nope.abs().amax(-1).clamp_min(1e-4 * 448)
    e = torch.ceil(torch.log2(amax / 448))
    codes = (nope / torch.exp2(e).unsqueeze(-1)).to(torch.float8_e4m3fn).view(torch.uint8)
    pool = torch.zeros(pages, page_bytes(tokens), dtype=torch.uint8, device="cuda")
    data = pool[:, :tokens * 576].view(pages, tokens, 576)
    data[..., :NOPE] = codes.view(pages, tokens, NOPE)
    data[..., NOPE:] = latent[:, NOPE:].bfloat16().contiguous().view(torch.uint8).view(pages, tokens, 128)
    scales = pool[:, tokens * 576:tokens * 584].view(pages, tokens, 8)
    scales[..., :7] = (e + 127).to(torch.uint8).view(pages, tokens, 7)
    perm = torch.randperm(slots, generator=gen, device="cuda")[:entries].to(torch.int32)
    return pool, perm


def rope_freqs(ratio):
    base = 10000.0 if ratio == 0 else 160000.0
    f = [base ** (-2.0 * i / 64) for i in range(32)]
    if ratio == 0:
        return f
    dim = lambda rot: 64 * math.log(65536 / (rot * 2 * math.pi)) / (2 * math.log(base))  # noqa: E731
    low, high = max(math.floor(dim(32)), 0), min(math.ceil(dim(1)), 63)
    ramp = [min(max((i - low) / (high - low), 0.0), 1.0) for i in range(32)]
    return [f[i] / 16 * ramp[i] + f[i] * (1 - ramp[i]) for i in range(32)]


def make_inputs(bs, ratio, ctx, gen):
    length = ctx
    extra = min(length // 4, 512) if ratio == 4 else length // 128
    swa_pool, swa_slots = make_pool(bs * WINDOW, 256, gen)
    ext_pool, ext_slots = make_pool(bs * extra, PAGE_TOKENS[ratio], gen)
    q = torch.randn(bs, HEADS, DIMS, generator=gen, device="cuda").bfloat16()
    sink = torch.rand(HEADS, generator=gen, device="cuda") * 8
    pos = torch.full((bs,), ctx - 1, dtype=torch.int64, device="cuda")
    angles = pos[:, None].double() * torch.tensor(rope_freqs(ratio), dtype=torch.float64, device="cuda")
    return dict(q=q, sink=sink, cos=angles.cos().float(), sin=angles.sin().float(),
                swa_pool=swa_pool, swa_idx=swa_slots.view(bs, WINDOW),
                swa_len=torch.full((bs,), WINDOW, dtype=torch.int32, device="cuda"),
                ext_pool=ext_pool, ext_tokens=PAGE_TOKENS[ratio], ext_idx=ext_slots.view(bs, extra),
                ext_len=torch.full((bs,), extra, dtype=torch.int32, device="cuda"))


def make_prefill_inputs(tokens, ratio, gen):
    """One request's tokens 0..tokens-1, each its own row: window entries p, p-1, ... (-1 before the
    start), compressed entries visible at (p + 1) // ratio (C4: a random selection of up to 512,
    C128: all), an empty list as length 1 holding -1 (the descriptor's convention)."""
    pos = torch.arange(tokens, device="cuda")
    swa_pool, swa_slots = make_pool(tokens, 256, gen)
    col = torch.arange(WINDOW, device="cuda")
    back = pos[:, None] - col[None, :]
    swa_idx = torch.where(back >= 0, swa_slots[back.clamp_min(0)], -1).to(torch.int32)
    entries = max(tokens // ratio, 1)
    ext_pool, ext_slots = make_pool(entries, PAGE_TOKENS[ratio], gen)
    visible = (pos + 1) // ratio
    if ratio == 4:
        width = min(entries, 512)
        score = torch.rand(tokens, entries, generator=gen, device="cuda")
        score = score.masked_fill(torch.arange(entries, device="cuda")[None, :] >= visible[:, None], -1.0)
        top, chosen = score.topk(width, dim=1)
        ext_idx = torch.where(top >= 0, ext_slots[chosen], -1)
        count = visible.clamp_max(width)
    else:
        width = entries
        j = torch.arange(entries, device="cuda")[None, :].expand(tokens, entries)
        ext_idx = torch.where(j < visible[:, None], ext_slots[j], -1)
        count = visible
    q = torch.randn(tokens, HEADS, DIMS, generator=gen, device="cuda").bfloat16()
    sink = torch.rand(HEADS, generator=gen, device="cuda") * 8
    angles = pos[:, None].double() * torch.tensor(rope_freqs(ratio), dtype=torch.float64, device="cuda")
    return dict(q=q, sink=sink, cos=angles.cos().float(), sin=angles.sin().float(),
                swa_pool=swa_pool, swa_idx=swa_idx, swa_len=(pos + 1).clamp_max(WINDOW).int(),
                ext_pool=ext_pool, ext_tokens=PAGE_TOKENS[ratio], ext_idx=ext_idx.to(torch.int32).contiguous(),
                ext_len=count.clamp_min(1).int())


def row_chunks(fn, rows=512):
    """fn over slices of `rows` query rows (the pools and the sinks whole), outputs concatenated."""
    def run(**inputs):
        n = inputs["q"].shape[0]
        per_row = ("q", "cos", "sin", "swa_idx", "swa_len", "ext_idx", "ext_len")
        parts = [fn(**{k: v[b:b + rows] if k in per_row else v for k, v in inputs.items()}) for b in range(0, n, rows)]
        return torch.cat([o for o, _ in parts]), torch.cat([l for _, l in parts])
    return run


def dequant(pool, tokens, idx):
    slot = idx.clamp_min(0).long()
    page, t = slot // tokens, slot % tokens
    data = pool[:, :tokens * 576].view(-1, tokens, 576)[page, t]
    scales = pool[:, tokens * 576:tokens * 584].view(-1, tokens, 8)[page, t][..., :7]
    nope = data[..., :NOPE].contiguous().view(torch.float8_e4m3fn).float().unflatten(-1, (7, 64))
    nope = nope * torch.exp2(scales.float() - 127).unsqueeze(-1)
    rope = data[..., NOPE:].contiguous().view(torch.bfloat16).float()
    return torch.cat([nope.flatten(-2), rope], -1)


def attention_torch(q, sink, cos, sin, swa_pool, swa_idx, swa_len, ext_pool, ext_tokens, ext_idx, ext_len):
    kv = torch.cat([dequant(swa_pool, 256, swa_idx), dequant(ext_pool, ext_tokens, ext_idx)], 1)
    idx = torch.cat([swa_idx, ext_idx], 1)
    col = torch.arange(idx.shape[1], device=idx.device)
    valid = (idx != -1) & torch.cat([col[None, :WINDOW] < swa_len[:, None], col[None, :ext_idx.shape[1]] < ext_len[:, None]], 1)
    s = torch.einsum("nhd,nkd->nhk", q.float(), kv) * SCALE
    s = s.masked_fill(~valid[:, None, :], float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - lse.unsqueeze(-1)).nan_to_num(0.0)
    o = torch.einsum("nhk,nkd->nhd", p, kv) * torch.sigmoid(lse - sink).unsqueeze(-1)
    re, im = o[..., NOPE::2], o[..., NOPE + 1::2]
    c, s_ = cos[:, None, :], sin[:, None, :]
    o = torch.cat([o[..., :NOPE], torch.stack([re * c + im * s_, im * c - re * s_], -1).flatten(-2)], -1)
    return o.bfloat16(), torch.where(torch.isfinite(lse), lse, torch.full_like(lse, -3.4028234663852886e38))


@triton.jit
def _key_tile(pool8, pool16, slots, valid, TOKENS: tl.constexpr, PBYTES: tl.constexpr, BK: tl.constexpr):
    """The BK keys at `slots` of a MODEL1 pool as bf16 [BK, 512], gathered and dequantised here:
    tiles 0..6 fp8 times 2^(scale byte - 127), tile 7 the bf16 rope slice (exact in bf16: an e4m3
    code times a power of two). Invalid keys load nothing and are zeros."""
    slot = tl.where(valid, slots, 0).to(tl.int64)
    page, t = slot // TOKENS, slot % TOKENS
    base = page * PBYTES + t * 576
    tile, e = tl.arange(0, 8), tl.arange(0, 64)
    nope = tile < 7
    codes = tl.load(pool8 + base[:, None, None] + tile[None, :, None] * 64 + e[None, None, :],
                    mask=valid[:, None, None] & nope[None, :, None] & (e < 64)[None, None, :], other=0)
    exps = tl.load(pool8 + (page * PBYTES + TOKENS * 576 + t * 8)[:, None] + tile[None, :],
                   mask=valid[:, None] & nope[None, :], other=127)
    scaled = codes.to(tl.float8e4nv, bitcast=True).to(tl.float32) * tl.exp2(exps.to(tl.float32) - 127.0)[:, :, None]
    rope = tl.load(pool16 + (base // 2 + 224)[:, None] + e[None, :], mask=valid[:, None] & (e < 64)[None, :], other=0.0)
    key = tl.where(nope[None, :, None], scaled, rope.to(tl.float32)[:, None, :])
    return tl.reshape(key, [BK, 512]).to(tl.bfloat16)


@triton.jit
def _attend(q, m, l, acc, key, valid, scale):
    """One key tile into the running softmax of BH heads: scores on the tensor cores (bf16 in, fp32
    accumulation), the online max and sum, and p V with V = the same tile."""
    s = tl.dot(q, tl.trans(key))
    s = tl.where(valid[None, :], s * scale, float("-inf"))
    m_new = tl.maximum(m, tl.max(s, 1))
    safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.exp(m - safe)
    p = tl.exp(s - safe[:, None])
    l = l * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p.to(tl.bfloat16), key)
    return m_new, l, acc


@triton.jit
def _finish(acc, m, l, row, h, sink_ptr, cos_ptr, sin_ptr, out_ptr, lse_ptr, HEADS: tl.constexpr, BH: tl.constexpr):
    """o = softmax V / (1 + exp(sink - lse)), the rope pairs (2i, 2i + 1) of dims 448.. de-rotated by
    the row's position; an empty row writes 0 and lse -FLT_MAX."""
    lse = tl.where(l > 0, m + tl.log(l), -3.4028234663852886e38)
    sink = tl.load(sink_ptr + h)
    o = tl.where(l[:, None] > 0, acc / tl.where(l > 0, l, 1.0)[:, None], 0.0) * tl.sigmoid(lse - sink)[:, None]
    re, im = tl.split(tl.reshape(o, [BH, 256, 2]))
    i = tl.arange(0, 256) - 224
    rope = i >= 0
    c = tl.load(cos_ptr + row * 32 + i, mask=rope, other=1.0)[None, :]
    sn = tl.load(sin_ptr + row * 32 + i, mask=rope, other=0.0)[None, :]
    o = tl.reshape(tl.join(re * c + im * sn, im * c - re * sn), [BH, 512])
    d = tl.arange(0, 512)
    tl.store(out_ptr + (row * HEADS + h[:, None]) * 512 + d[None, :], o.to(tl.bfloat16))
    tl.store(lse_ptr + row * HEADS + h, lse)


@triton.jit
def _attention_kernel(q_ptr, sink_ptr, cos_ptr, sin_ptr, out_ptr, lse_ptr, part_o, part_ml,
                      swa8, swa16, swa_idx, swa_len, swa_w, ext8, ext16, ext_idx, ext_len, ext_w, per_split, splits, scale,
                      SWA_TOKENS: tl.constexpr, SWA_PBYTES: tl.constexpr, EXT_TOKENS: tl.constexpr,
                      EXT_PBYTES: tl.constexpr, HEADS: tl.constexpr, BH: tl.constexpr, BK: tl.constexpr,
                      DIRECT: tl.constexpr):
    """One program per (BH heads, row, split of the row's keys): the row's columns [split *
    per_split, + per_split) of its window list (columns 0..swa_w) then its compressed list (columns
    swa_w..), each key tile gathered once for the BH heads. DIRECT (one split): the program writes
    the output; else its running max, sum and unnormalised output go to part_ml / part_o for
    _combine_kernel."""
    hb, row, split = tl.program_id(0), tl.program_id(1).to(tl.int64), tl.program_id(2)
    h = hb * BH + tl.arange(0, BH)
    d = tl.arange(0, 512)
    q = tl.load(q_ptr + (row * HEADS + h[:, None]) * 512 + d[None, :])
    lo = split * per_split
    hi = lo + per_split
    n_swa = tl.load(swa_len + row)
    n_ext = tl.load(ext_len + row)
    m = tl.full([BH], float("-inf"), tl.float32)
    l = tl.zeros([BH], tl.float32)
    acc = tl.zeros([BH, 512], tl.float32)
    kk = tl.arange(0, BK)
    for k0 in range(lo, tl.minimum(hi, n_swa), BK):
        col = k0 + kk
        inside = (col < n_swa) & (col < hi)
        slots = tl.load(swa_idx + row * swa_w + col, mask=inside, other=-1)
        valid = inside & (slots >= 0)
        key = _key_tile(swa8, swa16, slots, valid, SWA_TOKENS, SWA_PBYTES, BK)
        m, l, acc = _attend(q, m, l, acc, key, valid, scale)
    for j0 in range(tl.maximum(lo - swa_w, 0), tl.minimum(hi - swa_w, n_ext), BK):
        col = j0 + kk
        inside = (col < n_ext) & (col < hi - swa_w)
        slots = tl.load(ext_idx + row * ext_w + col, mask=inside, other=-1)
        valid = inside & (slots >= 0)
        key = _key_tile(ext8, ext16, slots, valid, EXT_TOKENS, EXT_PBYTES, BK)
        m, l, acc = _attend(q, m, l, acc, key, valid, scale)
    if DIRECT:
        _finish(acc, m, l, row, h, sink_ptr, cos_ptr, sin_ptr, out_ptr, lse_ptr, HEADS, BH)
    else:
        at = (row * splits + split) * HEADS + h
        tl.store(part_o + at[:, None] * 512 + d[None, :], acc)
        tl.store(part_ml + at * 2, m)
        tl.store(part_ml + at * 2 + 1, l)


@triton.jit
def _combine_kernel(part_o, part_ml, splits, sink_ptr, cos_ptr, sin_ptr, out_ptr, lse_ptr,
                    HEADS: tl.constexpr, BH: tl.constexpr):
    """One program per (BH heads, row): the splits' partial softmaxes merged, then _finish."""
    hb, row = tl.program_id(0), tl.program_id(1).to(tl.int64)
    h = hb * BH + tl.arange(0, BH)
    d = tl.arange(0, 512)
    m = tl.full([BH], float("-inf"), tl.float32)
    l = tl.zeros([BH], tl.float32)
    acc = tl.zeros([BH, 512], tl.float32)
    for s in range(0, splits):
        at = (row * splits + s) * HEADS + h
        m_s = tl.load(part_ml + at * 2)
        l_s = tl.load(part_ml + at * 2 + 1)
        m_new = tl.maximum(m, m_s)
        safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        a, b = tl.exp(m - safe), tl.exp(m_s - safe)
        l = l * a + l_s * b
        acc = acc * a[:, None] + tl.load(part_o + at[:, None] * 512 + d[None, :]) * b[:, None]
        m = m_new
    _finish(acc, m, l, row, h, sink_ptr, cos_ptr, sin_ptr, out_ptr, lse_ptr, HEADS, BH)


TRITON_CONFIGS = ((16, 32, 4), (32, 32, 4), (64, 16, 8))  # (heads a program, keys a tile, warps): the best is kept


def attention_triton(q, sink, cos, sin, swa_pool, swa_idx, swa_len, ext_pool, ext_tokens, ext_idx, ext_len,
                     config=TRITON_CONFIGS[0]):
    """The rows' keys split so that the grid fills the card (bs 1: a split per BK keys, 20 programs a
    head group instead of 1; bs >= 64: one split, no merge); the splits merged by a second kernel."""
    bh, bk, warps = config
    rows, swa_w, ext_w = q.shape[0], swa_idx.shape[1], ext_idx.shape[1]
    tiles = triton.cdiv(swa_w + ext_w, bk)
    groups = rows * (HEADS // bh)
    per_split = triton.cdiv(tiles, max(1, min(tiles, triton.cdiv(SM_COUNT[0], groups)))) * bk
    splits = triton.cdiv(swa_w + ext_w, per_split)
    out = torch.empty_like(q)
    lse = torch.empty(rows, HEADS, dtype=torch.float32, device=q.device)
    part_o = torch.empty(rows * splits * HEADS * 512 if splits > 1 else 1, dtype=torch.float32, device=q.device)
    part_ml = torch.empty(rows * splits * HEADS * 2 if splits > 1 else 1, dtype=torch.float32, device=q.device)
    _attention_kernel[(HEADS // bh, rows, splits)](
        q, sink, cos, sin, out, lse, part_o, part_ml, swa_pool, swa_pool.view(torch.bfloat16), swa_idx, swa_len, swa_w,
        ext_pool, ext_pool.view(torch.bfloat16), ext_idx, ext_len, ext_w, per_split, splits, SCALE,
        SWA_TOKENS=256, SWA_PBYTES=page_bytes(256), EXT_TOKENS=ext_tokens, EXT_PBYTES=page_bytes(ext_tokens),
        HEADS=HEADS, BH=bh, BK=bk, DIRECT=splits == 1, num_warps=warps)
    if splits > 1:
        _combine_kernel[(HEADS // bh, rows)](part_o, part_ml, splits, sink, cos, sin, out, lse, HEADS=HEADS, BH=bh,
                                             num_warps=4)
    return out, lse


SM_COUNT = [132]  # the card's, set by main()


def bytes_moved(bs, ratio, ctx):
    """What a call reads and writes: every row's keys (584 bytes each), q and the output."""
    extra = min(ctx // 4, 512) if ratio == 4 else ctx // 128
    return bs * (WINDOW + extra) * 584 + bs * HEADS * DIMS * 2 * 2


def prefill_bytes(tokens, ratio):
    """A prefill's unique keys (584 bytes each: the request's window tokens and its entries), q and
    the output."""
    return (tokens + max(tokens // ratio, 1)) * 584 + tokens * HEADS * DIMS * 2 * 2


def time_peers(result, inputs, eager, compiled, k, reserve_s):
    """Every form checked against torch eager's output (computed first, untimed) and timed as
    graph replays (peer_timing.form_us): eager, torch.compile in each mode the budget allows, and
    the Triton kernels in each of TRITON_CONFIGS (the fastest kept, named in triton_config)."""
    want = eager(**inputs)

    def check(name):
        def check_out(got):
            check_close(name + " out", got[0], want[0], rtol=2e-2, atol=2e-2)
            check_close(name + " lse", got[1], want[1], rtol=1e-4, atol=1e-3)
        return check_out
    attempt(result, "eager_us", lambda: form_us(result, "eager_us", lambda: eager(**inputs), check("eager"), k))
    peer_timing.compile_us(result, compiled, lambda fn: (lambda: fn(**inputs)), check("torch.compile"), k, reserve_s)

    def triton_us():
        return peer_timing.fastest_triton_us(result, TRITON_CONFIGS, lambda c: "BH={} BK={} num_warps={}".format(*c),
                                             lambda c: (lambda: attention_triton(**inputs, config=c)), check, k)
    attempt(result, "triton_us", triton_us)


def main():
    args, _ = peer_timing.start(__doc__)
    output = peer_timing.Output("sparse_attention", args.out)
    SM_COUNT[0] = torch.cuda.get_device_properties(0).multi_processor_count
    gen = torch.Generator(device="cuda").manual_seed(2026)
    compiled = Compiled(attention_torch)
    chunked = Compiled(attention_torch)  # the prefill's 512-row chunks: a compile of their own shape
    decode = [(bs, ratio, ctx) for ratio in (4, 128) for ctx in (8192, 65536) for bs in (1, 8, 64, 128, 256)]
    prefill = [(tokens, ratio) for ratio in (4, 128) for tokens in (2048, 8192)]
    shapes_left = len(decode) + len(prefill)
    for bs, ratio, ctx in decode:
        shapes_left -= 1
        progress(f"decode bs={bs} ratio={ratio} ctx={ctx}")
        result = {"bs": bs, "ratio": ratio, "ctx": ctx}
        if peer_timing.budget_left() < SHAPE_S:
            result["errors"] = {"eager": "skipped: the time budget is spent"}
            output.add(result)
            continue
        try:
            time_peers(result, make_inputs(bs, ratio, ctx, gen), attention_torch, compiled,
                       launches_per_sample(bytes_moved(bs, ratio, ctx)), peer_timing.reserve_s(shapes_left, SHAPE_S))
        except Exception as error:  # the inputs or eager's anchor: the shape has no check, so no peer
            result.setdefault("errors", {})["eager"] = f"{type(error).__name__}: {error}"[:500]
        output.add(result)
    # Prefill (BM_sparse_attention_prefill/tokens:T/ratio:R); bs and ctx as its case's (both T).
    for tokens, ratio in prefill:
        shapes_left -= 1
        progress(f"prefill tokens={tokens} ratio={ratio}")
        result = {"prefill": 1, "tokens": tokens, "ratio": ratio, "bs": tokens, "ctx": tokens}
        if peer_timing.budget_left() < SHAPE_S * (shapes_left + 1):
            result["errors"] = {"eager": "skipped: the time budget is spent"}
            output.add(result)
            continue
        try:
            time_peers(result, make_prefill_inputs(tokens, ratio, gen), row_chunks(attention_torch),
                       ChunkedCompiled(chunked), launches_per_sample(prefill_bytes(tokens, ratio)),
                       peer_timing.reserve_s(shapes_left, SHAPE_S))
        except Exception as error:  # the decode results are written already
            result.setdefault("errors", {})["eager"] = f"{type(error).__name__}: {error}"[:500]
        output.add(result)


SHAPE_S = 5.0  # seconds a shape's eager and Triton forms take at most: kept from the compiles for the shapes to come


class ChunkedCompiled:
    """row_chunks over the compiled function of each mode."""

    def __init__(self, compiled):
        self.compiled = compiled

    def __call__(self, mode):
        return row_chunks(self.compiled(mode))


if __name__ == "__main__":
    main()
