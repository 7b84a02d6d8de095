#!/usr/bin/env python3
"""Peers of mtp_expand (kernels/mtp_expand.hip), on the shapes of tests/bench/bench_attn_metadata.cpp's
BM_mtp_expand: bs in {1, 64, 256} requests, topk in {1, 4} draft tokens each, fields=1 (the draft
layer's 5 fields) or fields=0 (all 16 of spec 6.2, their columns as ctx = 8192 needs). Each field
[bs, ...] becomes [bs * topk, ...], every row repeated topk times. The benchmark times a graph
replay, 32 back to back a sample.

- eager_us: torch.repeat_interleave(src, topk, dim=0, output_size=bs * topk) a field (the form
  without a host sync) copied into the buffers, launched eagerly.
- graph_us: the same captured in a CUDA graph, replayed.
- compile_us: torch.compile of the same expansion (as unsqueeze-expand-reshape, which compiles to
  plain indexing; dynamic shapes), captured in a CUDA graph.
- triton_us: one Triton kernel expanding every field (a table of their addresses and sizes),
  captured in a CUDA graph.
Each peer's buffers are checked against repeat_interleave's before it is timed.
"""
import torch
import triton
import triton.language as tl

import peer_timing
from metadata_fields import DRAFT_FIELDS, address_table, field_shapes, random_int32
from peer_timing import attempt, graph_time_us, time_us

K = 32  # replays a sample, as the benchmark
CTX = 8192
BLOCK, MAX_BLOCKS = 1024, 128


def repeat_fields(srcs, dsts, topk):
    for src, dst in zip(srcs, dsts):
        dst.copy_(torch.repeat_interleave(src, topk, dim=0, output_size=src.shape[0] * topk))


def expand_fields(srcs, dsts, topk):
    for src, dst in zip(srcs, dsts):
        rest = src.shape[1:]
        dst.copy_(src.unsqueeze(1).expand(src.shape[0], topk, *rest).reshape(dst.shape))


@triton.jit
def expand_fields_kernel(table, topk, BLOCK: tl.constexpr):
    """Program (f, b): field f's output elements b * BLOCK, b * BLOCK + stride...; element e is row
    e // cols, column e % cols, copied from source row (e // cols) // topk.
    table[f] = (src address, dst address, columns, output numel)."""
    f = tl.program_id(0)
    src = tl.load(table + f * 4).to(tl.pointer_type(tl.int32))
    dst = tl.load(table + f * 4 + 1).to(tl.pointer_type(tl.int32))
    cols = tl.load(table + f * 4 + 2).to(tl.int32)  # a field is far below 2^31 elements
    n = tl.load(table + f * 4 + 3).to(tl.int32)
    for start in range(tl.program_id(1) * BLOCK, n, tl.num_programs(1) * BLOCK):
        offs = start + tl.arange(0, BLOCK)
        row = offs // cols
        values = tl.load(src + (row // topk) * cols + offs % cols, mask=offs < n)
        tl.store(dst + offs, values, mask=offs < n)


def peers(bs, topk, fields):
    shapes = field_shapes(bs, CTX)
    names = DRAFT_FIELDS if fields == 1 else tuple(shapes)
    srcs = [random_int32(shapes[name]) for name in names]
    want = [torch.repeat_interleave(src, topk, dim=0) for src in srcs]
    result = {"bs": bs, "topk": topk, "fields": fields}

    def buffers():
        return [torch.empty(w.shape, device="cuda", dtype=torch.int32) for w in want]

    def check(name, dsts):
        torch.cuda.synchronize()
        for field, w, dst in zip(names, want, dsts):
            if not torch.equal(w, dst):
                raise AssertionError(f"{name}: {field} differs from repeat_interleave's")

    def timed(name, step, dsts):
        return graph_time_us(step, dsts, lambda outputs: check(name, outputs), K)

    eager_dsts = buffers()
    attempt(result, "eager_us", lambda: time_us(lambda i: repeat_fields(srcs, eager_dsts, topk), K))
    attempt(result, "graph_us", lambda: timed("torch in a graph", lambda: repeat_fields(srcs, eager_dsts, topk), eager_dsts))
    compile_dsts = buffers()
    attempt(result, "compile_us", lambda: timed("torch.compile", lambda: compiled(srcs, compile_dsts, topk), compile_dsts))
    triton_dsts = buffers()
    table = address_table([[s.data_ptr(), d.data_ptr(), d[0].numel(), d.numel()] for s, d in zip(srcs, triton_dsts)])
    blocks = min(MAX_BLOCKS, triton.cdiv(max(d.numel() for d in triton_dsts), BLOCK))

    def triton_step():
        expand_fields_kernel[(len(srcs), blocks)](table, topk, BLOCK=BLOCK, num_warps=4)

    attempt(result, "triton_us", lambda: timed("triton", triton_step, triton_dsts))
    return result


compiled = None


def main():
    global compiled
    args, _ = peer_timing.start(__doc__)
    compiled = torch.compile(expand_fields, dynamic=True)
    output = peer_timing.Output("mtp_expand", args.out)
    for bs in (1, 64, 256):
        for topk in (1, 4):
            for fields in (1, 0):
                output.add(peers(bs, topk, fields))


if __name__ == "__main__":
    main()
