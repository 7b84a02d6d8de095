#!/usr/bin/env python3
"""Torch peers of attn_metadata and mtp_expand, timed on the same GPU in the same call as
tests/bench/bench_attn_metadata.cpp, on the same shapes.

- attn_metadata update: what an engine does without our kernel, one torch op per field of spec 6.2:
  `dst[:n].copy_(src)` into the graph buffers (the 16 int32 fields; page_table and c128_page_indices
  as wide as `ctx` needs), and the tail reset `dst[n:].fill_(pad)` where the batch is partial. The
  benchmarks time full buckets (n = rows), so the peer's tails are empty and cost nothing: the peer
  is the per-field copy alone, not the build, which favours the peer.
- mtp_expand: `torch.repeat_interleave(x, topk, dim=0, output_size=bs * topk)` per field (the form
  without a host sync), for the draft layer's 5 fields (fields=1) or all 16 (fields=0).
Each is timed eagerly and captured in a torch CUDA graph, as our benchmark times its graph: K
back-to-back calls or replays between CUDA events, mean per call, median of 10 samples.
Writes JSON: {"attn_metadata": [{bs, verify, ctx, rows, eager_us, graph_us}], "mtp_expand": [{bs,
topk, fields, eager_us, graph_us}], "torch", "device"}.
"""
import argparse
import json
import statistics


K = 32
INDEX_TOPK = 512
DRAFT_FIELDS = ("raw_out_loc", "seq_lens_casual", "positions_casual", "swa_page_indices", "swa_topk_lengths")
SCALAR_FIELDS = ("raw_out_loc", "seq_lens_casual", "positions_casual", "swa_topk_lengths", "c4_out_loc",
                 "c4_positions", "c4_topk_lengths_raw", "c4_topk_lengths_clamp1", "c4_sparse_topk_lengths",
                 "c128_out_loc", "c128_positions", "c128_topk_lengths_clamp1")


def field_shapes(rows, ctx):
    """Every field of spec 6.2 at `rows` rows, its columns as wide as `ctx` tokens need."""
    page_cols = (ctx + 255) // 256
    c128_cols = (2 * page_cols + 63) // 64 * 64
    shapes = {name: (rows,) for name in SCALAR_FIELDS}
    shapes.update(page_table=(rows, page_cols), swa_page_indices=(rows, 128),
                  c4_sparse_page_indices=(rows, INDEX_TOPK), c128_page_indices=(rows, c128_cols))
    return shapes


def random_int32(shape):
    return torch.randint(-1, 1 << 20, shape, device="cuda", dtype=torch.int32)


def time_us(fn):
    """Mean device time per call of K back-to-back calls, median of 10 samples (after a warm-up)."""
    fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(10):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(K):
            fn()
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop) * 1e3 / K)
    return statistics.median(samples)


def eager_and_graph_us(step):
    """`step` timed eagerly, and captured once in a CUDA graph then replayed."""
    eager = time_us(step)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step()  # warm-up outside the capture, as torch asks
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return eager, time_us(graph.replay)


def metadata_update_peer(bs, verify, ctx):
    rows = bs * (4 if verify else 1)
    shapes = field_shapes(rows, ctx)
    src = {name: random_int32(shape) for name, shape in shapes.items()}
    dst = {name: torch.empty(shape, device="cuda", dtype=torch.int32) for name, shape in shapes.items()}

    def step():
        for name in shapes:
            dst[name][:rows].copy_(src[name])
            dst[name][rows:].fill_(-1)

    eager, graph = eager_and_graph_us(step)
    return {"bs": bs, "verify": verify, "ctx": ctx, "rows": rows, "eager_us": eager, "graph_us": graph}


def mtp_expand_peer(bs, topk, fields):
    shapes = field_shapes(bs, 8192)
    names = DRAFT_FIELDS if fields == 1 else tuple(shapes)
    src = {name: random_int32(shapes[name]) for name in names}
    dst = {name: torch.empty((bs * topk,) + shapes[name][1:], device="cuda", dtype=torch.int32) for name in names}

    def step():
        for name in names:
            dst[name].copy_(torch.repeat_interleave(src[name], topk, dim=0, output_size=bs * topk))

    eager, graph = eager_and_graph_us(step)
    return {"bs": bs, "topk": topk, "fields": fields, "eager_us": eager, "graph_us": graph}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    global torch
    import torch  # after the arguments: --help works without torch

    torch.manual_seed(0)
    updates, expansions = [], []
    for bs in (1, 8, 64, 256):
        for verify in (0, 1):
            for ctx in (8192, 131072):
                r = metadata_update_peer(bs, verify, ctx)
                updates.append(r)
                print(f"torch attn_metadata peer bs={bs} verify={verify} ctx={ctx}: eager {r['eager_us']:.2f} us, "
                      f"graph {r['graph_us']:.2f} us", flush=True)
    for bs in (1, 64, 256):
        for topk in (1, 4):
            for fields in (1, 0):
                r = mtp_expand_peer(bs, topk, fields)
                expansions.append(r)
                print(f"torch mtp_expand peer bs={bs} topk={topk} fields={fields}: eager {r['eager_us']:.2f} us, "
                      f"graph {r['graph_us']:.2f} us", flush=True)
    with open(args.out, "w") as f:
        json.dump({"attn_metadata": updates, "mtp_expand": expansions, "torch": torch.__version__,
                   "device": torch.cuda.get_device_name()}, f, indent=1)


if __name__ == "__main__":
    main()
