#!/usr/bin/env python3
"""Peers of attn_metadata's update (kernels/attn_metadata.hip), on the shapes of
tests/bench/bench_attn_metadata.cpp's BM_attn_metadata_update: bs in {1, 8, 64, 256} full buckets,
verify in {0, 1} (target verify: 4 rows a request), ctx in {8192, 131072} (the widths of page_table
and c128_page_indices). The benchmark times a graph replay, 32 back to back a sample.

What an engine does without our kernel, for each field of spec 6.2 (metadata_fields.py): copy the
rows the step built into the graph buffers, `dst[:n].copy_(src)`, and reset the tail, `dst[n:] =
-1`. The buckets are full (n = rows): the tails are empty. The peers do only these copies, not the
build our kernel also does, which favours them.
- eager_us: torch's per-field copy_ and fill_, launched eagerly (what an engine runs before a replay).
- graph_us: the same captured in a CUDA graph, replayed.
- compile_us: torch.compile of the same (dynamic shapes: a compilation or two, not one a shape),
  captured in a CUDA graph.
- triton_us: one Triton kernel copying every field (a table of their addresses and sizes; the tail
  of a field beyond its source written -1), captured in a CUDA graph.
Each peer's buffers are checked against the sources before it is timed.
"""
import torch
import triton
import triton.language as tl

import peer_timing
from metadata_fields import address_table, field_shapes, random_int32
from peer_timing import attempt, graph_time_us, time_us

K = 32  # replays a sample, as the benchmark
BLOCK, MAX_BLOCKS = 1024, 128


def copy_fields(srcs, dsts, rows):
    for src, dst in zip(srcs, dsts):
        dst[:rows].copy_(src)
        dst[rows:].fill_(-1)


@triton.jit
def copy_fields_kernel(table, BLOCK: tl.constexpr):
    """Program (f, b): field f's elements b * BLOCK, b * BLOCK + stride... of its destination: the
    source's where it has them, else -1. table[f] = (src address, dst address, src numel, dst numel)."""
    f = tl.program_id(0)
    src = tl.load(table + f * 4).to(tl.pointer_type(tl.int32))
    dst = tl.load(table + f * 4 + 1).to(tl.pointer_type(tl.int32))
    n_src = tl.load(table + f * 4 + 2).to(tl.int32)  # a field is far below 2^31 elements
    n_dst = tl.load(table + f * 4 + 3).to(tl.int32)
    for start in range(tl.program_id(1) * BLOCK, n_dst, tl.num_programs(1) * BLOCK):
        offs = start + tl.arange(0, BLOCK)
        values = tl.load(src + offs, mask=offs < n_src, other=-1)
        tl.store(dst + offs, values, mask=offs < n_dst)


def peers(bs, verify, ctx):
    rows = bs * (4 if verify else 1)
    shapes = field_shapes(rows, ctx)
    srcs = [random_int32(shape) for shape in shapes.values()]
    result = {"bs": bs, "verify": verify, "ctx": ctx, "rows": rows}

    def buffers():
        return [torch.empty(shape, device="cuda", dtype=torch.int32) for shape in shapes.values()]

    def check(name, dsts):
        torch.cuda.synchronize()
        for field, src, dst in zip(shapes, srcs, dsts):
            if not torch.equal(src, dst[:rows]):
                raise AssertionError(f"{name}: {field} differs from its source")

    def timed(name, step, dsts):
        return graph_time_us(step, dsts, lambda outputs: check(name, outputs), K)

    eager_dsts = buffers()
    attempt(result, "eager_us", lambda: time_us(lambda i: copy_fields(srcs, eager_dsts, rows), K))
    attempt(result, "graph_us", lambda: timed("torch in a graph", lambda: copy_fields(srcs, eager_dsts, rows), eager_dsts))
    compile_dsts = buffers()
    attempt(result, "compile_us", lambda: timed("torch.compile", lambda: compiled(srcs, compile_dsts, rows), compile_dsts))
    triton_dsts = buffers()
    table = address_table([[s.data_ptr(), d.data_ptr(), s.numel(), d.numel()] for s, d in zip(srcs, triton_dsts)])
    blocks = min(MAX_BLOCKS, triton.cdiv(max(d.numel() for d in triton_dsts), BLOCK))

    def triton_step():
        copy_fields_kernel[(len(srcs), blocks)](table, BLOCK=BLOCK, num_warps=4)

    attempt(result, "triton_us", lambda: timed("triton", triton_step, triton_dsts))
    return result


compiled = None


def main():
    global compiled
    args, _ = peer_timing.start(__doc__)
    compiled = torch.compile(copy_fields, dynamic=True)
    output = peer_timing.Output("attn_metadata", args.out)
    for bs in (1, 8, 64, 256):
        for verify in (0, 1):
            for ctx in (8192, 131072):
                output.add(peers(bs, verify, ctx))


if __name__ == "__main__":
    main()
