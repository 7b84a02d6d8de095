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

usage: python3 tests/peers/sparse_attention.py --out FILE   (writes the JSON the goals read:
{"component": "sparse_attention", "device": ..., "results": [{"bs", "ratio", "ctx", "eager_us",
"compile_us", "triton_us"}, ..., {"prefill": 1, "tokens", "ratio", ...}]}; the prefill rows go
through torch in chunks of 512 rows, as their gathered keys would not fit at once; timed by peer_timing.py: CUDA events around several calls, the
median of the samples' means, after warm-up; a form that fails keeps its error and the others run;
the file is rewritten after every shape)
"""
import math

import torch
import triton
import triton.language as tl

import peer_timing
from peer_timing import attempt, check_close, launches_per_sample, time_us

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
                swa_pool=swa_pool, swa_idx=swa_slots.view(bs, WINDOW), swa_len=torch.full((bs,), WINDOW, device="cuda"),
                ext_pool=ext_pool, ext_tokens=PAGE_TOKENS[ratio], ext_idx=ext_slots.view(bs, extra),
                ext_len=torch.full((bs,), extra, device="cuda"))


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
                swa_pool=swa_pool, swa_idx=swa_idx, swa_len=(pos + 1).clamp_max(WINDOW),
                ext_pool=ext_pool, ext_tokens=PAGE_TOKENS[ratio], ext_idx=ext_idx.to(torch.int32).contiguous(),
                ext_len=count.clamp_min(1))


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
def _load_key_tile(pool_ptr, slot, tokens, pbytes, tile, valid, offs):
    """Dims [64 tile, 64 tile + 64) of each key as fp32 [BK, 64]: tiles 0..6 fp8 times the tile's
    scale, tile 7 the bf16 rope slice (both loads masked, so `tile` may be a runtime value)."""
    page = slot // tokens
    t = slot % tokens
    base = page.to(tl.int64) * pbytes + t.to(tl.int64) * 576
    is_nope = tile < 7
    codes = tl.load(pool_ptr + base[:, None] + tile * 64 + offs[None, :], mask=valid[:, None] & is_nope, other=0)
    scale_byte = tl.load(pool_ptr + page.to(tl.int64) * pbytes + tokens * 576 + t * 8 + tile, mask=valid & is_nope, other=127)
    nope = codes.to(tl.float8e4nv, bitcast=True).to(tl.float32) * tl.exp2(scale_byte.to(tl.float32) - 127.0)[:, None]
    rope_ptr = pool_ptr + base[:, None] + 448 + 2 * offs[None, :]
    lo = tl.load(rope_ptr, mask=valid[:, None] & (tile == 7), other=0).to(tl.uint16)
    hi = tl.load(rope_ptr + 1, mask=valid[:, None] & (tile == 7), other=0).to(tl.uint16)
    rope = (lo | (hi << 8)).to(tl.bfloat16, bitcast=True).to(tl.float32)
    return tl.where(is_nope, nope, rope)


@triton.jit
def _attention_kernel(q_ptr, sink_ptr, cos_ptr, sin_ptr, out_ptr, lse_ptr,
                      swa_pool, swa_idx, swa_len, swa_width, ext_pool, ext_tokens, ext_pbytes, ext_idx, ext_len, ext_width,
                      heads, scale, BH: tl.constexpr, BK: tl.constexpr):
    """One program per (row, 16 heads, 64-dim output tile): the scores over all 512 dims, the
    output's 64 dims of its tile (plain: each tile recomputes the scores)."""
    row, hb, dt = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    h = hb * BH + tl.arange(0, BH)
    offs = tl.arange(0, 64)
    n_swa = tl.load(swa_len + row)
    n_ext = tl.load(ext_len + row)
    m = tl.full([BH], float("-inf"), tl.float32)
    l = tl.zeros([BH], tl.float32)
    acc = tl.zeros([BH, 64], tl.float32)
    for k0 in range(0, n_swa + n_ext, BK):
        kk = k0 + tl.arange(0, BK)
        in_swa = kk < n_swa
        in_ext = (kk >= n_swa) & (kk < n_swa + n_ext)
        slot_swa = tl.load(swa_idx + row * swa_width + kk, mask=in_swa, other=-1)
        slot_ext = tl.load(ext_idx + row * ext_width + (kk - n_swa), mask=in_ext, other=-1)
        s = tl.zeros([BH, BK], tl.float32)
        for tile in tl.static_range(8):
            qt = tl.load(q_ptr + (row * heads + h[:, None]) * 512 + tile * 64 + offs[None, :]).to(tl.float32)
            kt = tl.where(in_swa[:, None], _load_key_tile(swa_pool, slot_swa, 256, 149760, tile, slot_swa >= 0, offs),
                          _load_key_tile(ext_pool, slot_ext, ext_tokens, ext_pbytes, tile, slot_ext >= 0, offs))
            s += tl.dot(qt, tl.trans(kt), input_precision="ieee")
        valid = ((slot_swa >= 0) & in_swa) | ((slot_ext >= 0) & in_ext)
        s = tl.where(valid[None, :], s * scale, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m - safe)
        p = tl.exp(s - safe[:, None])
        l = l * alpha + tl.sum(p, 1)
        vt = tl.where(in_swa[:, None], _load_key_tile(swa_pool, slot_swa, 256, 149760, dt, slot_swa >= 0, offs),
                      _load_key_tile(ext_pool, slot_ext, ext_tokens, ext_pbytes, dt, slot_ext >= 0, offs))
        acc = acc * alpha[:, None] + tl.dot(p, vt, input_precision="ieee")
        m = m_new
    lse = tl.where(l > 0, m + tl.log(l), -3.4028234663852886e38)
    sink = tl.load(sink_ptr + h)
    o = tl.where(l[:, None] > 0, acc / l[:, None] * tl.sigmoid(lse - sink)[:, None], 0.0)
    if dt == 7:  # de-rotate the rope pairs (2i, 2i + 1)
        o2 = tl.reshape(o, [BH, 32, 2])
        re, im = tl.split(o2)
        c = tl.load(cos_ptr + row * 32 + tl.arange(0, 32))[None, :]
        sn = tl.load(sin_ptr + row * 32 + tl.arange(0, 32))[None, :]
        o = tl.reshape(tl.join(re * c + im * sn, im * c - re * sn), [BH, 64])
    tl.store(out_ptr + (row * heads + h[:, None]) * 512 + dt * 64 + offs[None, :], o.to(tl.bfloat16))
    if dt == 0:
        tl.store(lse_ptr + row * heads + h, lse)


def attention_triton(q, sink, cos, sin, swa_pool, swa_idx, swa_len, ext_pool, ext_tokens, ext_idx, ext_len):
    bs = q.shape[0]
    out = torch.empty_like(q)
    lse = torch.empty(bs, HEADS, dtype=torch.float32, device=q.device)
    grid = (bs, HEADS // 16, 8)
    _attention_kernel[grid](q, sink, cos, sin, out, lse, swa_pool, swa_idx, swa_len.int(), swa_idx.shape[1],
                            ext_pool, ext_tokens, page_bytes(ext_tokens), ext_idx, ext_len.int(), ext_idx.shape[1],
                            HEADS, SCALE, BH=16, BK=32)
    return out, lse


def bytes_moved(bs, ratio, ctx):
    """What a call reads and writes: every row's keys (584 bytes each), q and the output."""
    extra = min(ctx // 4, 512) if ratio == 4 else ctx // 128
    return bs * (WINDOW + extra) * 584 + bs * HEADS * DIMS * 2 * 2


def prefill_bytes(tokens, ratio):
    """A prefill's unique keys (584 bytes each: the request's window tokens and its entries), q and
    the output."""
    return (tokens + max(tokens // ratio, 1)) * 584 + tokens * HEADS * DIMS * 2 * 2


def time_peers(result, inputs, eager, forms, k):
    """eager's time, then each form's after it agrees with eager."""
    want = {}

    def timed_eager():
        want["out"], want["lse"] = eager(**inputs)
        return time_us(lambda i: eager(**inputs), k)

    def checked(name, fn):
        o, l = fn(**inputs)
        check_close(name + " out", o, want["out"], rtol=2e-2, atol=2e-2)
        check_close(name + " lse", l, want["lse"], rtol=1e-4, atol=1e-3)
        return time_us(lambda i: fn(**inputs), k)
    attempt(result, "eager_us", timed_eager)
    for field, name, fn in forms:
        attempt(result, field, lambda: checked(name, fn))


def main():
    args, _ = peer_timing.start(__doc__)
    output = peer_timing.Output("sparse_attention", args.out)
    gen = torch.Generator(device="cuda").manual_seed(2026)
    compiled = torch.compile(attention_torch)
    for ratio in (4, 128):
        for ctx in (8192, 65536):
            for bs in (1, 8, 64, 128, 256):
                result = {"bs": bs, "ratio": ratio, "ctx": ctx}
                inputs = make_inputs(bs, ratio, ctx, gen)
                time_peers(result, inputs, attention_torch, [("compile_us", "torch.compile", compiled),
                                                             ("triton_us", "triton", attention_triton)],
                           launches_per_sample(bytes_moved(bs, ratio, ctx)))
                output.add(result)
    # Prefill (BM_sparse_attention_prefill/tokens:T/ratio:R); bs and ctx as its case's (both T).
    for ratio in (4, 128):
        for tokens in (2048, 8192):
            result = {"prefill": 1, "tokens": tokens, "ratio": ratio, "bs": tokens, "ctx": tokens}
            try:
                inputs = make_prefill_inputs(tokens, ratio, gen)
            except Exception as error:  # the decode results are written already
                result["errors"] = {"inputs": f"{type(error).__name__}: {error}"[:500]}
                output.add(result)
                continue
            time_peers(result, inputs, row_chunks(attention_torch), [("compile_us", "torch.compile", row_chunks(compiled)),
                                                                      ("triton_us", "triton", attention_triton)],
                       launches_per_sample(prefill_bytes(tokens, ratio)))
            output.add(result)


if __name__ == "__main__":
    main()
