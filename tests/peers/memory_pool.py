#!/usr/bin/env python3
"""Peers of the memory pool's store and gather (kernels/kv_pool*.hip), on the shapes and byte layout
of tests/bench/bench_memory_pool.cpp (spec 4.1, MODEL1 FP8, SWA pages of 256 tokens): op store at
tokens {1, 8, 64, 256} (scatter 1) and op gather at 256 (scatter 1), both at tokens {4096, 65536,
1M} in both slot orders. scatter 1: every token at a random slot of a 1M-token pool (a decode's);
scatter 0: runs of 256 tokens filling a page, the pages in random order (a prefill's). Calls
rotate over token ranges; K = clamp(256 MB / bytes, 8, 64) a sample.

- store: pack bf16 latents [N, 512] (the 448 nope values quantised to fp8 e4m3 with one power-of-two
  scale a 64, 2^ceil(log2(max(amax / 448, 1e-4))); the 64 rope values kept as bf16) and write them
  at their slots: the 576 data bytes at page_base + t * 576, the 7 ue8m0 scale bytes (+ 1 pad) at
  page_base + 256 * 576 + t * 8.
- gather: read the same bytes back at the slots and unpack them to bf16 [N, 512].
Peers: eager_us (torch, index_put / indexing), compile_us (torch.compile of the same, dynamic
shapes), triton_us (a plain Triton kernel, a program a token). Each is checked before it is timed:
a store by gathering its entries back (within fp8's rounding), a gather against torch's.
"""
import torch
import triton
import triton.language as tl

import peer_timing
from peer_timing import attempt, check_close, launches_per_sample, time_us

MAX_TOKENS, PAGE = 1 << 20, 256
PAGES = MAX_TOKENS // PAGE + 1  # page 0 is the sink
PAGE_BYTES = (PAGE * 584 + 575) // 576 * 576
BYTES_PER_TOKEN = 1024 + 584 + 4  # read the bf16 latent, write the entry, read the slot (as the benchmark)
STORE_SHAPES = [(n, 1) for n in (1, 8, 64, 256)] + [(n, s) for n in (4096, 65536, MAX_TOKENS) for s in (0, 1)]
GATHER_SHAPES = [(256, 1)] + [(n, s) for n in (4096, 65536, MAX_TOKENS) for s in (0, 1)]


def store(x, slots, data, scales):
    n = x.shape[0]
    nope = x[:, :448].float().view(n, 7, 64)
    exponent = torch.ceil(torch.log2(torch.clamp(nope.abs().amax(-1) / 448, min=1e-4)))
    q = (nope / torch.exp2(exponent)[..., None]).to(torch.float8_e4m3fn).view(torch.uint8).view(n, 448)
    entry = torch.cat([q, x[:, 448:].contiguous().view(torch.uint8)], dim=1)
    scale_bytes = torch.cat([(exponent + 127).to(torch.uint8), torch.zeros(n, 1, device=x.device, dtype=torch.uint8)], 1)
    page, t = slots // PAGE, slots % PAGE
    data[page, t] = entry
    scales[page, t] = scale_bytes


def gather(slots, data, scales, out):
    n = slots.shape[0]
    page, t = slots // PAGE, slots % PAGE
    entry = data[page, t]
    scale = torch.exp2(scales[page, t][:, :7].float() - 127)
    nope = entry[:, :448].contiguous().view(torch.float8_e4m3fn).float().view(n, 7, 64) * scale[..., None]
    out[:, :448] = nope.view(n, 448).to(torch.bfloat16)
    out[:, 448:] = entry[:, 448:].contiguous().view(torch.bfloat16)


@triton.jit
def store_kernel(latents, latents_i16, slots, pool, pool_i16, PAGE: tl.constexpr, PAGE_BYTES: tl.constexpr):
    token = tl.program_id(0).to(tl.int64)
    slot = tl.load(slots + token).to(tl.int64)
    base = (slot // PAGE) * PAGE_BYTES
    entry = base + (slot % PAGE) * 576
    rows = tl.arange(0, 8)  # the 7 blocks of 64 nope values, and one masked off
    cols = tl.arange(0, 64)
    at = rows[:, None] * 64 + cols[None, :]
    nope = rows[:, None] < 7
    x = tl.load(latents + token * 512 + at, mask=nope, other=0.0).to(tl.float32)
    exponent = tl.ceil(tl.log2(tl.maximum(tl.max(tl.abs(x), axis=1) / 448.0, 1e-4)))
    q = (x * tl.exp2(-exponent)[:, None]).to(tl.float8e4nv)  # a power of two: exact
    tl.store(pool + entry + at, q.to(tl.uint8, bitcast=True), mask=nope)
    tl.store(pool + base + PAGE * 576 + (slot % PAGE) * 8 + rows, tl.where(rows < 7, exponent + 127.0, 0.0).to(tl.uint8))
    rope = tl.load(latents_i16 + token * 512 + 448 + cols)
    tl.store(pool_i16 + (entry + 448) // 2 + cols, rope)


@triton.jit
def gather_kernel(slots, pool, pool_i16, out, out_i16, PAGE: tl.constexpr, PAGE_BYTES: tl.constexpr):
    token = tl.program_id(0).to(tl.int64)
    slot = tl.load(slots + token).to(tl.int64)
    base = (slot // PAGE) * PAGE_BYTES
    entry = base + (slot % PAGE) * 576
    rows = tl.arange(0, 8)
    cols = tl.arange(0, 64)
    at = rows[:, None] * 64 + cols[None, :]
    nope = rows[:, None] < 7
    q = tl.load(pool + entry + at, mask=nope, other=0).to(tl.float8e4nv, bitcast=True).to(tl.float32)
    exponent = tl.load(pool + base + PAGE * 576 + (slot % PAGE) * 8 + rows, mask=rows < 7, other=127).to(tl.float32)
    tl.store(out + token * 512 + at, (q * tl.exp2(exponent - 127.0)[:, None]).to(tl.bfloat16), mask=nope)
    rope = tl.load(pool_i16 + (entry + 448) // 2 + cols)
    tl.store(out_i16 + token * 512 + 448 + cols, rope)


class Pool:
    def __init__(self):
        self.bytes = torch.zeros(PAGES, PAGE_BYTES, device="cuda", dtype=torch.uint8)
        self.i16 = self.bytes.view(torch.int16)  # the rope values' bf16 bits (every offset is even)
        self.data = self.bytes[:, :PAGE * 576].view(PAGES, PAGE, 576)
        self.scales = self.bytes[:, PAGE * 576:PAGE * 584].view(PAGES, PAGE, 8)
        self.latents = (torch.randn(MAX_TOKENS, 512, device="cuda") * 3).to(torch.bfloat16)
        self.gathered = torch.empty_like(self.latents)
        shuffled = torch.randperm(MAX_TOKENS, device="cuda") + PAGE
        pages = torch.randperm(PAGES - 1, device="cuda") + 1
        token = torch.arange(MAX_TOKENS, device="cuda")
        self.slots = {1: shuffled, 0: pages[token // PAGE] * PAGE + token % PAGE}
        for first in range(0, MAX_TOKENS, 65536):  # every slot a gather reads holds an entry
            store(self.latents[first:first + 65536], shuffled[first:first + 65536], self.data, self.scales)

    def triton_store(self, x, slots):
        store_kernel[(x.shape[0],)](x, x.view(torch.int16), slots, self.bytes, self.i16, PAGE=PAGE,
                                    PAGE_BYTES=PAGE_BYTES, num_warps=2)

    def triton_gather(self, slots, out):
        gather_kernel[(slots.shape[0],)](slots, self.bytes, self.i16, out, out.view(torch.int16), PAGE=PAGE,
                                         PAGE_BYTES=PAGE_BYTES, num_warps=2)


def peers(pool, op, n, scatter, compiled):
    sets = min(64, MAX_TOKENS // n)
    k = launches_per_sample(n * BYTES_PER_TOKEN)
    xs = [pool.latents[s * n:(s + 1) * n] for s in range(sets)]
    slots = [pool.slots[scatter][s * n:(s + 1) * n] for s in range(sets)]
    outs = [pool.gathered[s * n:(s + 1) * n] for s in range(sets)]
    result = {"op": op, "tokens": n, "scatter": scatter}
    if op == "store":
        forms = {"eager_us": lambda i: store(xs[i], slots[i], pool.data, pool.scales),
                 "compile_us": lambda i: compiled(xs[i], slots[i], pool.data, pool.scales),
                 "triton_us": lambda i: pool.triton_store(xs[i], slots[i])}
    else:
        forms = {"eager_us": lambda i: gather(slots[i], pool.data, pool.scales, outs[i]),
                 "compile_us": lambda i: compiled(slots[i], pool.data, pool.scales, outs[i]),
                 "triton_us": lambda i: pool.triton_gather(slots[i], outs[i])}

    def check(field):
        """The form's result at set 0: a store's entries gathered back by torch are the latents within
        fp8's rounding (3 mantissa bits; the rope values exact); a gather equals torch's."""
        if op == "store":
            forms[field](0)
            got = torch.empty_like(xs[0])
            gather(slots[0], pool.data, pool.scales, got)
            check_close(f"store {field}", got, xs[0], rtol=0.07, atol=1e-3)
        else:
            want = torch.empty_like(xs[0])
            gather(slots[0], pool.data, pool.scales, want)
            outs[0].zero_()
            forms[field](0)
            check_close(f"gather {field}", outs[0], want, rtol=1e-2, atol=1e-6)

    for field in ("eager_us", "compile_us", "triton_us"):
        def measure(field=field):
            check(field)
            return time_us(forms[field], k, sets)
        attempt(result, field, measure)
    return result


def main():
    args, _ = peer_timing.start(__doc__)
    output = peer_timing.Output("memory_pool", args.out)
    pool = Pool()
    compiled = {"store": torch.compile(store, dynamic=True), "gather": torch.compile(gather, dynamic=True)}
    for op, shapes in (("store", STORE_SHAPES), ("gather", GATHER_SHAPES)):
        for n, scatter in shapes:
            output.add(peers(pool, op, n, scatter, compiled[op]))


if __name__ == "__main__":
    main()
