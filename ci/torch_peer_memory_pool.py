#!/usr/bin/env python3
"""Torch peer of the memory pool's store and gather, timed on the same GPU in the same call as
tests/bench/bench_memory_pool.cpp, on the same byte layout (spec 4.1, MODEL1 FP8, SWA pages of 256).

- store: pack N bf16 latents [N, 512] (448 nope values quantised to fp8 e4m3 with one power-of-two
  scale per 64 values, 2^ceil(log2(max(amax / 448, 1e-4))); 64 bf16 rope values kept) and scatter
  them with index_put into the pages: the 576 data bytes at page_base + t * 576, the 7 ue8m0 scale
  bytes (+ 1 pad) at page_base + 256 * 576 + t * 8.
- gather: index the same bytes back and unpack them to bf16 [N, 512].
Slots are a random permutation of a 1M-token pool (as our benchmark's decode-like scatter). Timing
as our benchmark: CUDA events around K back-to-back calls over rotating token ranges, K = clamp(256
MB / bytes, 8, 64), mean per call, median of 10 samples. The peer is eager torch; it is a speed
peer, not checked for bits. Writes JSON: {"memory_pool": [{tokens, store_us, gather_us}], "torch",
"device"}.
"""
import argparse
import json
import statistics


MAX_TOKENS, PAGE = 1 << 20, 256
PAGES = MAX_TOKENS // PAGE + 1  # page 0 is the sink
PAGE_BYTES = (PAGE * 584 + 575) // 576 * 576
BYTES_PER_TOKEN = 1024 + 584 + 4  # read bf16 latent, write the entry, read the slot (as our counter)


class Pool:
    def __init__(self):
        self.bytes = torch.zeros(PAGES, PAGE_BYTES, device="cuda", dtype=torch.uint8)
        self.data = self.bytes[:, :PAGE * 576].view(PAGES, PAGE, 576)
        self.scales = self.bytes[:, PAGE * 576:PAGE * 584].view(PAGES, PAGE, 8)
        self.latents = (torch.randn(MAX_TOKENS, 512, device="cuda") * 3).to(torch.bfloat16)
        self.slots = torch.randperm(MAX_TOKENS, device="cuda") + PAGE
        self.gathered = torch.empty_like(self.latents)

    def store(self, first, n):
        x = self.latents[first:first + n]
        slots = self.slots[first:first + n]
        nope = x[:, :448].float().view(n, 7, 64)
        exponent = torch.ceil(torch.log2(torch.clamp(nope.abs().amax(-1) / 448, min=1e-4)))
        q = (nope / torch.exp2(exponent)[..., None]).to(torch.float8_e4m3fn).view(torch.uint8).view(n, 448)
        entry = torch.cat([q, x[:, 448:].contiguous().view(torch.uint8)], dim=1)
        scale_bytes = torch.cat([(exponent + 127).to(torch.uint8), torch.zeros(n, 1, device="cuda", dtype=torch.uint8)], 1)
        page, t = slots // PAGE, slots % PAGE
        self.data[page, t] = entry
        self.scales[page, t] = scale_bytes

    def gather(self, first, n):
        slots = self.slots[first:first + n]
        page, t = slots // PAGE, slots % PAGE
        entry = self.data[page, t]
        scale = torch.exp2(self.scales[page, t][:, :7].float() - 127)
        nope = entry[:, :448].contiguous().view(torch.float8_e4m3fn).float().view(n, 7, 64) * scale[..., None]
        out = self.gathered[first:first + n]
        out[:, :448] = nope.view(n, 448).to(torch.bfloat16)
        out[:, 448:] = entry[:, 448:].contiguous().view(torch.bfloat16)


def time_us(fn, n):
    sets = min(64, MAX_TOKENS // n)
    k = max(8, min(64, (256 << 20) // (n * BYTES_PER_TOKEN)))
    for s in range(sets):
        fn(s * n, n)
    torch.cuda.synchronize()
    samples, i = [], 0
    for _ in range(10):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(k):
            fn((i % sets) * n, n)
            i += 1
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop) * 1e3 / k)
    return statistics.median(samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    global torch
    import torch  # after the arguments: --help works without torch

    torch.manual_seed(0)
    pool = Pool()
    peers = []
    for n in (256, 4096, 65536, MAX_TOKENS):
        r = {"tokens": n, "store_us": time_us(pool.store, n), "gather_us": time_us(pool.gather, n)}
        peers.append(r)
        print(f"torch memory_pool peer tokens={n}: store {r['store_us']:.2f} us, gather {r['gather_us']:.2f} us",
              flush=True)
    with open(args.out, "w") as f:
        json.dump({"memory_pool": peers, "torch": torch.__version__, "device": torch.cuda.get_device_name()}, f, indent=1)


if __name__ == "__main__":
    main()
