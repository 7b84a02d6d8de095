"""The per-request fields of spec 6.2 (int32), as tests/peers/attn_metadata.py and mtp_expand.py
build them: their shapes at `rows` rows with columns as wide as `ctx` tokens need (as the
benchmark's cases, tests/bench/bench_attn_metadata.cpp, capture them), and a table of device
addresses that lets one Triton kernel walk several tensors.
"""
import torch

INDEX_TOPK = 512
DRAFT_FIELDS = ("raw_out_loc", "seq_lens_casual", "positions_casual", "swa_page_indices", "swa_topk_lengths")
SCALAR_FIELDS = ("raw_out_loc", "seq_lens_casual", "positions_casual", "swa_topk_lengths", "c4_out_loc",
                 "c4_positions", "c4_topk_lengths_raw", "c4_topk_lengths_clamp1", "c4_sparse_topk_lengths",
                 "c128_out_loc", "c128_positions", "c128_topk_lengths_clamp1")


def field_shapes(rows, ctx):
    """Every field of spec 6.2 at `rows` rows: 12 of one column; page_table (a column per page of
    256 tokens), swa_page_indices (128), c4_sparse_page_indices (512), c128_page_indices (padded to 64)."""
    page_cols = (ctx + 255) // 256
    c128_cols = (2 * page_cols + 63) // 64 * 64
    shapes = {name: (rows,) for name in SCALAR_FIELDS}
    shapes.update(page_table=(rows, page_cols), swa_page_indices=(rows, 128),
                  c4_sparse_page_indices=(rows, INDEX_TOPK), c128_page_indices=(rows, c128_cols))
    return shapes


def random_int32(shape):
    return torch.randint(-1, 1 << 20, shape, device="cuda", dtype=torch.int32)


def address_table(rows):
    """An int64 [len(rows), len(rows[0])] device table of (addresses and sizes) rows: a Triton
    kernel loads a tensor's address from it and casts it to a pointer."""
    return torch.tensor(rows, device="cuda", dtype=torch.int64)
