#!/usr/bin/env python3
"""Peers of the compressor step (kernels/compressor.hip), on the shapes of tests/bench/bench_compressor.cpp:
prefill of one request of {8192, 65536} tokens from position 0, and decode of bs in {1, 8, 64, 256}
requests of one token each whose token completes a block (emit 1) or not (emit 0), ratio 4 and
128, d 512 (spec 3.2, 4.1, 4.3).

The math: S = score + ape[pos % ratio]; per entry j and channel, a softmax over the candidates
(ratio 4: the first d channels of block j-1's 4 tokens, absent for j = 0, and the last d of block
j's; ratio 128: the block's 128 tokens), the weighted sum of kv; RMSNorm (eps 1e-6) with the norm
weight; rope on the last 64 channels (interleaved pairs) at position ratio * j with the YaRN table
of spec 2.4; bf16; the MODEL1 pack (448 fp8 e4m3 in 7 tiles of 64 with scale
2^ceil(log2(max(amax / 448, 1e-4))), 64 bf16 rope, 7 scale bytes and a pad) into the entry's slot
of pages of 64 (ratio 4) or 2 (ratio 128) entries. Decode first writes the token's [kv | S] into
its request's ring row (ring of 8 or 128 rows, row = pos % R) and then pools the block from the
ring where the token completes one.
Peers: eager_us (torch, vectorised), compile_us (torch.compile of the same function, static shapes,
compiled before timing), triton_us (a plain Triton kernel, a program an entry, in fp32, reading the
candidates through an index table worked out before timing, as an engine's plan; decode's ring
write in torch). Each form writes a pool (and decode a ring) of its own, checked against eager's
(the entries dequantised: an fp8 code may round the other way); each is timed as CUDA graph
replays (peer_timing.form_us, as an engine replays its step), prefill rotating over input sets
beyond the L2 as the benchmark does.

usage: python3 tests/peers/compressor.py --out FILE [--budget S]   (results [{"bench", "op", "ratio",
"dims", "tokens" or "bs" and "emit", "eager_us", "compile_us", "triton_us", ...}]; timing, budget,
progress lines and output, rewritten after every shape, as tests/peers/peer_timing.py)
"""
import math

import torch
import triton
import triton.language as tl

import peer_timing
from peer_timing import Compiled, attempt, check_close, form_us, launches_per_sample, progress

D, ROPE = 512, 64
PREFILL_TOKENS = (8192, 65536)
DECODE_BS = (1, 8, 64, 256)


def series(ratio):
    return 2 if ratio == 4 else 1


def ring_rows(ratio):
    return 8 if ratio == 4 else 128


def page_entries(ratio):
    return 64 if ratio == 4 else 2


def page_bytes(ratio):
    return (page_entries(ratio) * 584 + 575) // 576 * 576


def yarn_freqs(device):
    base = 160000.0
    corr = lambda rotations: ROPE * math.log(65536 / (rotations * 2 * math.pi)) / (2 * math.log(base))
    low, high = max(math.floor(corr(32)), 0), min(math.ceil(corr(1)), ROPE - 1)
    freqs = []
    for i in range(ROPE // 2):
        f = base ** (-2 * i / ROPE)
        ramp = min(max((i - low) / (high - low), 0), 1)
        freqs.append(f / 16 * ramp + f * (1 - ramp))
    return torch.tensor(freqs, dtype=torch.float64, device=device)


def finish_and_pack(pooled, positions, slots, norm_weight, freqs, pool, ratio):
    """pooled [n, D] fp32; writes the entries into pool (uint8 [pages, page_bytes])."""
    n = pooled.shape[0]
    y = pooled * torch.rsqrt(pooled.pow(2).mean(-1, keepdim=True) + 1e-6) * norm_weight
    angle = (positions.double()[:, None] * freqs[None, :]).float()
    cos, sin = torch.cos(angle), torch.sin(angle)
    re, im = y[:, D - ROPE::2], y[:, D - ROPE + 1::2]
    rope = torch.stack([re * cos - im * sin, re * sin + im * cos], dim=-1).view(n, ROPE)
    y = torch.cat([y[:, :D - ROPE], rope], dim=1).to(torch.bfloat16)
    nope = y[:, :448].float().view(n, 7, 64)
    exponent = torch.ceil(torch.log2(torch.clamp(nope.abs().amax(-1) / 448, min=1e-4)))
    q = (nope / torch.exp2(exponent)[..., None]).to(torch.float8_e4m3fn).view(torch.uint8).view(n, 448)
    entry = torch.cat([q, y[:, 448:].contiguous().view(torch.uint8)], dim=1)
    scale_bytes = torch.cat([(exponent + 127).to(torch.uint8), torch.zeros(n, 1, device=y.device, dtype=torch.uint8)], 1)
    p = page_entries(ratio)
    data = pool[:, :p * 576].view(-1, p, 576)
    scales = pool[:, p * 576:p * 576 + p * 8].view(-1, p, 8)
    data[slots // p, slots % p] = entry
    scales[slots // p, slots % p] = scale_bytes


def pool_candidates(cand_kv, cand_s):
    """[n, C, D] each: the softmax-weighted sum over C, per channel."""
    return (torch.softmax(cand_s, dim=1) * cand_kv).sum(1)


def prefill_torch(kv, score, ape, norm_weight, freqs, slots, pool, ratio):
    t = kv.shape[0]
    n = t // ratio
    s = (score.view(n, ratio, -1) + ape[None]).view(t, -1)
    if ratio == 4:
        kvb, sb = kv[:4 * n].view(n, 4, 2 * D), s[:4 * n].view(n, 4, 2 * D)
        prev_kv = torch.cat([torch.zeros_like(kvb[:1, :, :D]), kvb[:-1, :, :D]])
        prev_s = torch.cat([torch.full_like(sb[:1, :, :D], -math.inf), sb[:-1, :, :D]])
        pooled = pool_candidates(torch.cat([prev_kv, kvb[:, :, D:]], 1), torch.cat([prev_s, sb[:, :, D:]], 1))
    else:
        pooled = pool_candidates(kv[:128 * n].view(n, 128, D), s[:128 * n].view(n, 128, D))
    positions = torch.arange(n, device=kv.device) * ratio
    finish_and_pack(pooled, positions, slots, norm_weight, freqs, pool, ratio)


def decode_torch(kv, score, ape, norm_weight, freqs, starts, ring, emit_rows, emit_slots, pool, ratio):
    """kv, score [bs, width]; ring [bs + 1, R, 2 width]; request b uses ring b + 1."""
    bs, width = kv.shape
    r = ring_rows(ratio)
    requests = torch.arange(bs, device=kv.device)
    ring[requests + 1, starts % r] = torch.cat([kv, score + ape[starts % ratio]], dim=1)
    if emit_rows.numel() == 0:
        return
    blocks = ring[emit_rows + 1]  # [e, R, 2 width], rows in position order modulo R
    if ratio == 4:
        first = (starts[emit_rows] + 1) // 4 * 4 - 8  # block j - 1's first position, 4 j - 4
        order = (first[:, None] + torch.arange(8, device=kv.device)[None, :]) % 8
        rows = torch.gather(blocks, 1, order[..., None].expand(-1, -1, 2 * width))
        cand_kv = torch.cat([rows[:, :4, :D], rows[:, 4:, D:width]], 1)
        cand_s = torch.cat([rows[:, :4, width:width + D], rows[:, 4:, width + D:]], 1)
    else:
        cand_kv, cand_s = blocks[:, :, :D], blocks[:, :, width:]
    positions = (starts[emit_rows] + 1) // ratio * ratio - ratio
    finish_and_pack(pool_candidates(cand_kv, cand_s), positions, emit_slots, norm_weight, freqs, pool, ratio)


@triton.jit
def entry_kernel(kv, s, s_offset, row_stride, index, half_of, positions, slots, norm_weight, freqs, pool,
                 CANDIDATES: tl.constexpr, D_: tl.constexpr, PAGE: tl.constexpr, PAGE_BYTES: tl.constexpr):
    """One entry: candidate c is the row index[e, c] (-1 absent) of kv and s (S = score + ape), its
    channels from half_of[c] * D; pairs (2i, 2i + 1) are held apart so that the rope pairs them."""
    e = tl.program_id(0).to(tl.int64)
    pair = tl.arange(0, D_ // 2)
    m_even = tl.full([D_ // 2], -float("inf"), tl.float32)
    m_odd = tl.full([D_ // 2], -float("inf"), tl.float32)
    z_even = tl.zeros([D_ // 2], tl.float32)
    z_odd = tl.zeros([D_ // 2], tl.float32)
    a_even = tl.zeros([D_ // 2], tl.float32)
    a_odd = tl.zeros([D_ // 2], tl.float32)
    for c in range(CANDIDATES):
        row = tl.load(index + e * CANDIDATES + c).to(tl.int64)
        if row >= 0:
            base = row * row_stride + tl.load(half_of + c) * D_
            k_even = tl.load(kv + base + 2 * pair)
            k_odd = tl.load(kv + base + 2 * pair + 1)
            s_even = tl.load(s + s_offset + base + 2 * pair)
            s_odd = tl.load(s + s_offset + base + 2 * pair + 1)
            new_even, new_odd = tl.maximum(m_even, s_even), tl.maximum(m_odd, s_odd)
            z_even = z_even * tl.exp(m_even - new_even) + tl.exp(s_even - new_even)
            a_even = a_even * tl.exp(m_even - new_even) + tl.exp(s_even - new_even) * k_even
            z_odd = z_odd * tl.exp(m_odd - new_odd) + tl.exp(s_odd - new_odd)
            a_odd = a_odd * tl.exp(m_odd - new_odd) + tl.exp(s_odd - new_odd) * k_odd
            m_even, m_odd = new_even, new_odd
    y_even, y_odd = a_even / z_even, a_odd / z_odd
    rms = tl.sqrt((tl.sum(y_even * y_even, 0) + tl.sum(y_odd * y_odd, 0)) / D_ + 1e-6)
    y_even = y_even * tl.load(norm_weight + 2 * pair) / rms
    y_odd = y_odd * tl.load(norm_weight + 2 * pair + 1) / rms
    rope_pair = pair - (D_ - 64) // 2
    is_rope = rope_pair >= 0
    f = tl.load(freqs + rope_pair, mask=is_rope, other=0.0)
    angle = (tl.load(positions + e).to(tl.float64) * f).to(tl.float32)
    cos, sin = tl.cos(angle), tl.sin(angle)
    r_even = tl.where(is_rope, y_even * cos - y_odd * sin, y_even)
    r_odd = tl.where(is_rope, y_even * sin + y_odd * cos, y_odd)
    b_even, b_odd = r_even.to(tl.bfloat16), r_odd.to(tl.bfloat16)
    slot = tl.load(slots + e).to(tl.int64)
    page = pool + (slot // PAGE) * PAGE_BYTES
    t = slot % PAGE
    tile = tl.reshape(tl.maximum(tl.abs(b_even.to(tl.float32)), tl.abs(b_odd.to(tl.float32))), (D_ // 64, 32))
    amax = tl.max(tile, 1)
    exponent = tl.ceil(tl.log2(tl.maximum(amax / 448.0, 1e-4)))
    scale = tl.reshape(tl.broadcast_to(tl.exp2(exponent)[:, None], (D_ // 64, 32)), (D_ // 2,))
    nope = pair < 224
    q_even = (b_even.to(tl.float32) / scale).to(tl.float8e4nv).to(tl.uint8, bitcast=True)
    q_odd = (b_odd.to(tl.float32) / scale).to(tl.float8e4nv).to(tl.uint8, bitcast=True)
    tl.store(page + t * 576 + 2 * pair, q_even, mask=nope)
    tl.store(page + t * 576 + 2 * pair + 1, q_odd, mask=nope)
    rope_ptr = (page + t * 576 + 448).to(tl.pointer_type(tl.bfloat16))
    tl.store(rope_ptr + 2 * rope_pair, b_even, mask=is_rope)
    tl.store(rope_ptr + 2 * rope_pair + 1, b_odd, mask=is_rope)
    tiles = tl.arange(0, D_ // 64)
    tl.store(page + PAGE * 576 + t * 8 + tiles, tl.where(tiles < 7, exponent + 127, 0).to(tl.uint8))  # 7 scales, a pad


def triton_entries(kv, s, s_offset, row_stride, index, half_of, positions, slots, norm_weight, freqs, pool, ratio):
    entry_kernel[(index.shape[0],)](kv, s, s_offset, row_stride, index, half_of, positions, slots, norm_weight, freqs,
                                    pool, CANDIDATES=index.shape[1], D_=D, PAGE=page_entries(ratio),
                                    PAGE_BYTES=page_bytes(ratio))


def prefill_plan(t, ratio, device):
    """The candidates' rows (index [n, C]) and halves of every entry of a prefill of t tokens."""
    n = t // ratio
    j = torch.arange(n, device=device)[:, None]
    if ratio == 4:
        prev = 4 * j - 4 + torch.arange(4, device=device)[None]
        own = 4 * j + torch.arange(4, device=device)[None]
        index = torch.cat([torch.where(prev >= 0, prev, -1), own], 1)
        half_of = torch.tensor([0] * 4 + [1] * 4, device=device, dtype=torch.int32)
    else:
        index = 128 * j + torch.arange(128, device=device)[None]
        half_of = torch.zeros(128, device=device, dtype=torch.int32)
    return index.to(torch.int32).contiguous(), half_of


def entries_of(pool, slots, ratio):
    """The pool's entries at `slots` dequantised to fp32 [n, D] (codes times their tile's scale, the
    rope slice bf16): what a peer's check compares."""
    p = page_entries(ratio)
    slot = slots.long()
    data = pool[:, :p * 576].view(-1, p, 576)[slot // p, slot % p]
    exps = pool[:, p * 576:p * 576 + p * 8].view(-1, p, 8)[slot // p, slot % p][:, :7].float()
    nope = data[:, :448].contiguous().view(torch.float8_e4m3fn).float().view(-1, 7, 64) * torch.exp2(exps - 127)[..., None]
    return torch.cat([nope.flatten(1), data[:, 448:].contiguous().view(torch.bfloat16).float()], 1)


def check_entries(name, got_pool, want_pool, slots, ratio):
    """A form's entries against eager's: an e4m3 code may round the other way where the fp32 sums
    differ in their last bits (one code step is 1/8 of the value at most), nothing more."""
    check_close(name + " entries", entries_of(got_pool, slots, ratio), entries_of(want_pool, slots, ratio),
                rtol=0.13, atol=1e-3)


def bench_prefill(result, ratio, tokens, device, freqs, compiled, reserve_s):
    """BM_compressor_prefill's step over rotating input sets (as the benchmark rotates its windows of
    a large pool, so that no step finds its inputs in L2), each form into a pool of its own."""
    width = series(ratio) * D
    input_bytes = 8 * width * tokens
    sets = max(1, min(8, (512 << 20) // input_bytes))
    kvs = [torch.randn(tokens, width, device=device) for _ in range(sets)]
    scores = [torch.randn(tokens, width, device=device) * 1.5 for _ in range(sets)]
    ape = torch.randn(ratio, width, device=device)
    norm_weight = 1 + 0.25 * torch.randn(D, device=device)
    n = tokens // ratio
    slots = torch.arange(1, n + 1, device=device)
    pools = {form: torch.zeros((n + 1) // page_entries(ratio) + 1, page_bytes(ratio), dtype=torch.uint8, device=device)
             for form in ("eager", "compile", "triton")}
    k = launches_per_sample(input_bytes + 584 * n)
    index, half_of = prefill_plan(tokens, ratio, device)
    positions = torch.arange(n, device=device) * ratio
    freqs32 = freqs.float()

    def eager(i):
        prefill_torch(kvs[i], scores[i], ape, norm_weight, freqs, slots, pools["eager"], ratio)
        return pools["eager"]

    def plain_triton(i):
        s = (scores[i].view(n, ratio, -1) + ape[None]).view(tokens, -1)
        triton_entries(kvs[i], s, 0, width, index, half_of, positions, slots, norm_weight, freqs32, pools["triton"], ratio)
        return pools["triton"]

    want = eager(0).clone()

    def check(name):
        return lambda got: check_entries(name, got, want, slots, ratio)
    attempt(result, "eager_us", lambda: form_us(result, "eager_us", lambda: eager(0), check("eager"), k,
                                                more=[lambda i=i: eager(i) for i in range(1, sets)]))

    def compiled_step(fn):
        def step(i=0):
            fn(kvs[i], scores[i], ape, norm_weight, freqs, slots, pools["compile"], ratio)
            return pools["compile"]
        return step
    peer_timing.compile_us(result, compiled, compiled_step, check("torch.compile"), k, reserve_s,
                           more=lambda step: [lambda i=i: step(i) for i in range(1, sets)])
    attempt(result, "triton_us", lambda: form_us(result, "triton_us", lambda: plain_triton(0), check("triton"), k,
                                                 more=[lambda i=i: plain_triton(i) for i in range(1, sets)]))
    result["input_sets"] = sets


def bench_decode(result, ratio, bs, emit, device, freqs, compiled, reserve_s):
    """BM_compressor_decode's step (the ring rows written, the completed blocks pooled and packed),
    each form on a ring and a pool of its own, checked against eager's ring and entries."""
    width, r = series(ratio) * D, ring_rows(ratio)
    gen = torch.Generator().manual_seed(7)
    blocks = torch.randint(1, 501, (bs,), generator=gen)
    offsets = torch.full((bs,), ratio - 1) if emit else torch.randint(0, ratio - 1, (bs,), generator=gen)
    starts = (blocks * ratio + offsets).to(device)
    kv = torch.randn(bs, width, device=device)
    score = torch.randn(bs, width, device=device) * 1.5
    ape = torch.randn(ratio, width, device=device)
    norm_weight = 1 + 0.25 * torch.randn(D, device=device)
    ring0 = torch.randn(bs + 1, r, 2 * width, device=device)
    emit_rows = torch.nonzero((starts + 1) % ratio == 0).flatten()
    emit_slots = torch.arange(1, emit_rows.numel() + 1, device=device)
    state = {form: (ring0.clone(), torch.zeros(bs // page_entries(ratio) + 2, page_bytes(ratio), dtype=torch.uint8,
                                               device=device)) for form in ("eager", "compile", "triton")}
    bytes_moved = bs * (8 * width * 2 + 4) + emit_rows.numel() * (8 * width * r + 584)
    k = launches_per_sample(bytes_moved)

    def eager():
        ring, pool = state["eager"]
        decode_torch(kv, score, ape, norm_weight, freqs, starts, ring, emit_rows, emit_slots, pool, ratio)
        return state["eager"]

    # The ring viewed as rows of [kv | S]; entry e's candidates are its ring's rows in position order.
    requests = torch.arange(bs, device=device)
    first = (starts[emit_rows] + 1) // ratio * ratio - (8 if ratio == 4 else 128)  # the first candidate's position
    order = (first[:, None] + torch.arange(r, device=device)[None, :]) % r
    index = ((emit_rows[:, None] + 1) * r + order).to(torch.int32).contiguous()
    half_of = torch.tensor([0] * 4 + [1] * 4 if ratio == 4 else [0] * 128, device=device, dtype=torch.int32)
    positions = (starts[emit_rows] + 1) // ratio * ratio - ratio
    freqs32 = freqs.float()

    def plain_triton():
        ring, pool = state["triton"]
        ring[requests + 1, starts % r] = torch.cat([kv, score + ape[starts % ratio]], dim=1)
        if emit_rows.numel():
            triton_entries(ring, ring, width, 2 * width, index, half_of, positions, emit_slots, norm_weight, freqs32,
                           pool, ratio)
        return state["triton"]

    want_ring, want_pool = (t.clone() for t in eager())

    def check(name):
        def check_state(got):
            check_close(name + " ring", got[0], want_ring, rtol=1e-6, atol=1e-6)
            check_entries(name, got[1], want_pool, emit_slots, ratio)
        return check_state
    attempt(result, "eager_us", lambda: form_us(result, "eager_us", eager, check("eager"), k))

    def compiled_step(fn):
        def step():
            ring, pool = state["compile"]
            fn(kv, score, ape, norm_weight, freqs, starts, ring, emit_rows, emit_slots, pool, ratio)
            return state["compile"]
        return step
    peer_timing.compile_us(result, compiled, compiled_step, check("torch.compile"), k, reserve_s)
    attempt(result, "triton_us", lambda: form_us(result, "triton_us", plain_triton, check("triton"), k))


SHAPE_S = 3.0  # seconds a shape's eager and Triton forms take at most: kept from the compiles for the shapes to come


def main():
    args, _ = peer_timing.start(__doc__)
    output = peer_timing.Output("compressor", args.out)
    device = torch.device("cuda")
    torch.manual_seed(2029)
    freqs = yarn_freqs(device)
    prefill, decode = Compiled(prefill_torch), Compiled(decode_torch)
    shapes = [("prefill", ratio, tokens, None) for ratio in (4, 128) for tokens in PREFILL_TOKENS] + \
             [("decode", ratio, bs, emit) for ratio in (4, 128) for bs in DECODE_BS for emit in (0, 1)]
    for i, (op, ratio, size, emit) in enumerate(shapes):
        reserve = peer_timing.reserve_s(len(shapes) - i - 1, SHAPE_S)
        if op == "prefill":
            result = {"bench": f"BM_compressor_prefill/ratio:{ratio}/dims:{D}/tokens:{size}/manual_time", "op": op,
                      "ratio": ratio, "dims": D, "tokens": size}
        else:
            result = {"bench": f"BM_compressor_decode/ratio:{ratio}/dims:{D}/bs:{size}/emit:{emit}/manual_time",
                      "op": op, "ratio": ratio, "dims": D, "bs": size, "emit": emit}
        progress(result["bench"])
        if peer_timing.budget_left() < SHAPE_S:
            result["errors"] = {"eager": "skipped: the time budget is spent"}
        else:
            try:
                if op == "prefill":
                    bench_prefill(result, ratio, size, device, freqs, prefill, reserve)
                else:
                    bench_decode(result, ratio, size, emit, device, freqs, decode, reserve)
            except Exception as error:  # eager's anchor or the inputs: the shape has no check, so no peer
                result.setdefault("errors", {})["eager"] = f"{type(error).__name__}: {error}"[:500]
        output.add(result)


if __name__ == "__main__":
    main()
