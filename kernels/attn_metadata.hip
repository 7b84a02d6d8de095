// Attention metadata of one step (spec 6.2), its copy into a captured graph's buffers with the tail
// reset (spec 6.4), and a consumer that gathers through swa_page_indices.
//
// Grid and block: one block of 128 threads per metadata row, in both kernels. 128 is the SWA
// window, so thread k builds column k of swa_page_indices (two dependent gathers, the row's
// dominant cost) and the wider fields (c4_sparse_page_indices, c128_page_indices, page_table) are
// covered in a few strided passes with coalesced writes. Rows are few (bs x tokens per request,
// at most a few thousand) and independent, so a block per row fills the device without a
// grid-stride loop; the real counts are read on the device, so the grid is the bucket's and is
// fixed at capture.
//
// Mutants of review findings 1 and 2, compiled in only under their DSV4H_MUTANT_* definition:
// META_PADDING_ITEM reads the real row count back to the host (a sync: capture must fail),
// META_FULL_SHAPE_COPY copies every staging row (the tail gets stale rows, no reset),
// META_ROW0_BROADCAST broadcasts a one-row source to every row (torch's copy_ of a 1-row src),
// META_TAIL_NOT_RESET leaves the tail rows as an earlier replay left them. NOOP does nothing.
#include "attn_metadata.h"

#include <string>

namespace dsv4h {
namespace {

constexpr int kThreads = 128;
constexpr int64_t kPage = 256;
constexpr int64_t kWindow = 128;
constexpr int kScalarFields = 12;  // the per-row fields of one column

__device__ __forceinline__ int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Inclusive sum of `value` over the block's threads (Hillis-Steele in shared memory).
__device__ int64_t block_inclusive_sum(int64_t value, int64_t* scratch) {
  scratch[threadIdx.x] = value;
  __syncthreads();
  for (int offset = 1; offset < kThreads; offset <<= 1) {
    const int64_t add = static_cast<int>(threadIdx.x) >= offset ? scratch[threadIdx.x - offset] : 0;
    __syncthreads();
    scratch[threadIdx.x] += add;
    __syncthreads();
  }
  return scratch[threadIdx.x];
}

struct RowSource {
  int64_t request = -1, token = 0;  // request -1: the row belongs to nobody
  int64_t tokens = 0;               // the step's tokens over all real requests
};

// Prefill: the request that owns token `token`, from a running scan of extend_lens.
__device__ RowSource locate_by_scan(const AttnMetadataBuildArgs& a, int64_t n, int64_t token) {
  __shared__ int64_t scratch[kThreads];
  __shared__ int64_t found_request, found_token;
  if (threadIdx.x == 0) found_request = -1, found_token = 0;
  int64_t base = 0;
  for (int64_t first = 0; first < n; first += kThreads) {
    const int64_t r = first + threadIdx.x;
    const int64_t extend = r < n ? clamp64(a.extend_lens[r], 0, a.staging.rows) : 0;
    const int64_t end = base + block_inclusive_sum(extend, scratch);
    if (r < n && token >= end - extend && token < end) found_request = r, found_token = token - (end - extend);
    base += scratch[kThreads - 1];
    __syncthreads();  // scratch is rewritten by the next chunk
  }
  __syncthreads();
  RowSource s;
  s.request = found_request;
  s.token = found_token;
  s.tokens = base;
  return s;
}

__global__ void __launch_bounds__(kThreads) attn_metadata_build(AttnMetadataBuildArgs a) {
#if defined(DSV4H_MUTANT_NOOP)
  if (a.max_reqs >= 0) return;
#endif
  const int64_t n = clamp64(*a.num_reqs, 0, a.max_reqs);
  const int64_t row = blockIdx.x;
  const int64_t token = row / a.row_repeat;
  RowSource src;
  if (a.tokens_per_request > 0) {
    src.tokens = n * a.tokens_per_request;
    src.request = token < src.tokens ? token / a.tokens_per_request : -1;
    src.token = token % a.tokens_per_request;
  } else {
    src = locate_by_scan(a, n, token);
  }
  const int64_t real_rows = src.tokens * a.row_repeat < a.staging.rows ? src.tokens * a.row_repeat : a.staging.rows;
  if (row == 0 && threadIdx.x == 0) *a.num_rows = static_cast<int32_t>(real_rows);
  if (row >= real_rows || src.request < 0) return;

  const AttnMetadataBuffers& s = a.staging;
  const int64_t req = a.req_pool_indices[src.request];
  const int64_t extend = a.tokens_per_request > 0 ? a.tokens_per_request : a.extend_lens[src.request];
  const int64_t L = a.seq_lens[src.request] - extend + src.token + 1, p = L - 1;
  const bool req_ok = req >= 0 && req < a.pool;
  // The full slot of position pos of this request, -1 where the inputs have none (bad input that
  // the harness refuses before any launch; here it only keeps reads in bounds).
  const auto full_slot = [&](int64_t pos) -> int64_t {
    if (!req_ok || pos < 0 || pos >= a.ctx) return -1;
    const int64_t slot = a.req_to_token[req * a.ctx + pos];
    return slot >= 0 && slot < a.full_slots ? slot : -1;
  };

  if (threadIdx.x == 0) {
    const int32_t raw = a.out_cache_loc[row];
    s.raw_out_loc[row] = raw;
    s.seq_lens_casual[row] = static_cast<int32_t>(L);
    s.positions_casual[row] = static_cast<int32_t>(p);
    s.swa_topk_lengths[row] = static_cast<int32_t>(L < kWindow ? L : kWindow);
    s.c4_out_loc[row] = L % 4 == 0 ? raw / 4 : 0;
    s.c4_positions[row] = static_cast<int32_t>(p & ~int64_t{3});
    s.c4_topk_lengths_raw[row] = static_cast<int32_t>(L / 4);
    const int64_t c4_clamp1 = L / 4 > 1 ? L / 4 : 1;
    s.c4_topk_lengths_clamp1[row] = static_cast<int32_t>(c4_clamp1);
    s.c4_sparse_topk_lengths[row] = static_cast<int32_t>(c4_clamp1 < s.index_topk ? c4_clamp1 : s.index_topk);
    s.c128_out_loc[row] = L % 128 == 0 ? raw / 128 : 0;
    s.c128_positions[row] = static_cast<int32_t>(p & ~int64_t{127});
    s.c128_topk_lengths_clamp1[row] = static_cast<int32_t>(L / 128 > 1 ? L / 128 : 1);
  }
  {
    const int64_t k = threadIdx.x;
    const int64_t slot = p - k >= 0 ? full_slot(p - k) : -1;
    s.swa_page_indices[row * kWindow + k] = slot >= 0 ? a.full_to_swa[slot] : -1;
  }
  for (int64_t c = threadIdx.x; c < s.page_cols; c += kThreads) {
    const int64_t slot = full_slot(kPage * c);
    s.page_table[row * s.page_cols + c] = static_cast<int32_t>(slot >= 0 ? slot / kPage : -1);
  }
  for (int64_t j = threadIdx.x; j < s.c128_cols; j += kThreads) {
    const int64_t slot = j < L / 128 ? full_slot(kPage * (j / 2)) : -1;
    s.c128_page_indices[row * s.c128_cols + j] = static_cast<int32_t>(slot >= 0 ? slot / kPage * 2 + j % 2 : -1);
  }
  for (int64_t j = threadIdx.x; j < s.index_topk; j += kThreads) s.c4_sparse_page_indices[row * s.index_topk + j] = -1;
}

struct CopyKernelArgs {
  AttnMetadataCopyArgs a;
#if defined(DSV4H_MUTANT_META_PADDING_ITEM)
  int64_t rows_read_on_host;
#endif
};

// Row `row` of one field: staging row `src_row` (-1: none) in its columns, padding elsewhere.
__device__ __forceinline__ void copy_row(int32_t* dst, int64_t dst_cols, const int32_t* src, int64_t src_cols,
                                         int64_t row, int64_t src_row, int32_t padding) {
  for (int64_t c = threadIdx.x; c < dst_cols; c += kThreads)
    dst[row * dst_cols + c] = src_row >= 0 && c < src_cols ? src[src_row * src_cols + c] : padding;
}

__global__ void __launch_bounds__(kThreads) attn_metadata_copy_into(CopyKernelArgs k) {
#if defined(DSV4H_MUTANT_NOOP)
  if (k.a.buffers.rows >= 0) return;
#endif
  const AttnMetadataBuffers& b = k.a.buffers;
  const AttnMetadataBuffers& s = k.a.staging;
#if defined(DSV4H_MUTANT_META_PADDING_ITEM)
  const int64_t device_rows = k.rows_read_on_host;
#else
  const int64_t device_rows = *k.a.num_rows;
#endif
  const int64_t n = clamp64(device_rows, 0, b.rows < s.rows ? b.rows : s.rows);
  const int64_t row = blockIdx.x;
  int64_t src_row = row < n ? row : -1;
#if defined(DSV4H_MUTANT_META_ROW0_BROADCAST)
  if (n == 1) src_row = 0;
#elif defined(DSV4H_MUTANT_META_FULL_SHAPE_COPY)
  if (row >= s.rows) return;
  src_row = row;
#elif defined(DSV4H_MUTANT_META_TAIL_NOT_RESET)
  if (src_row < 0) return;
#endif
  // The per-row scalars: one field per thread. Padding values: spec 6.4.
  int32_t* const dst[kScalarFields] = {b.raw_out_loc, b.seq_lens_casual, b.positions_casual, b.swa_topk_lengths,
                                       b.c4_out_loc, b.c4_positions, b.c4_topk_lengths_raw, b.c4_topk_lengths_clamp1,
                                       b.c4_sparse_topk_lengths, b.c128_out_loc, b.c128_positions,
                                       b.c128_topk_lengths_clamp1};
  const int32_t* const src[kScalarFields] = {s.raw_out_loc, s.seq_lens_casual, s.positions_casual, s.swa_topk_lengths,
                                             s.c4_out_loc, s.c4_positions, s.c4_topk_lengths_raw,
                                             s.c4_topk_lengths_clamp1, s.c4_sparse_topk_lengths, s.c128_out_loc,
                                             s.c128_positions, s.c128_topk_lengths_clamp1};
  const int32_t padding[kScalarFields] = {0, 1, 0, 1, 0, 0, 0, 1, 1, 0, 0, 1};
  if (threadIdx.x < kScalarFields)
    dst[threadIdx.x][row] = src_row >= 0 ? src[threadIdx.x][src_row] : padding[threadIdx.x];
  copy_row(b.swa_page_indices, kWindow, s.swa_page_indices, kWindow, row, src_row, -1);
  copy_row(b.c4_sparse_page_indices, b.index_topk, s.c4_sparse_page_indices, s.index_topk, row, src_row, -1);
  copy_row(b.c128_page_indices, b.c128_cols, s.c128_page_indices, s.c128_cols, row, src_row, -1);
  copy_row(b.page_table, b.page_cols, s.page_table, s.page_cols, row, src_row, 0);  // page 0: the write sink
}

__global__ void __launch_bounds__(kThreads) swa_gather(SwaGatherArgs a) {
#if defined(DSV4H_MUTANT_NOOP)
  if (a.rows >= 0) return;
#endif
  const int64_t row = blockIdx.x, k = threadIdx.x;
  const int64_t slot = a.swa_page_indices[row * kWindow + k];
  a.gathered[row * kWindow + k] = k < a.swa_topk_lengths[row] && slot >= 0 && slot < a.swa_slots ? a.swa_kv[slot] : 0;
}

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument(message);
}

void check_buffers(const AttnMetadataBuffers& b, const std::string& which) {
  require(b.rows >= 0 && b.rows <= (int64_t{1} << 24), which + ".rows must be in [0, 2^24], got " + std::to_string(b.rows));
  require(b.page_cols >= 0 && b.c128_cols >= 0 && b.index_topk >= 0, which + ": widths must be >= 0");
  if (b.rows == 0) return;
  const void* fields[] = {b.page_table, b.raw_out_loc, b.seq_lens_casual, b.positions_casual, b.swa_page_indices,
                          b.swa_topk_lengths, b.c4_out_loc, b.c4_positions, b.c4_topk_lengths_raw,
                          b.c4_topk_lengths_clamp1, b.c4_sparse_topk_lengths, b.c4_sparse_page_indices,
                          b.c128_out_loc, b.c128_positions, b.c128_topk_lengths_clamp1, b.c128_page_indices};
  for (const void* f : fields) require(f != nullptr, which + ": null device pointer");
}

}  // namespace

void launch_attn_metadata_build(const AttnMetadataBuildArgs& args, hipStream_t stream) {
  const std::string name = "attn_metadata_build: ";
  check_buffers(args.staging, name + "staging");
  require(args.pool >= 1 && args.ctx >= 1 && args.full_slots >= 1, name + "pool, ctx and full_slots must be >= 1");
  require(args.max_reqs >= 0, name + "max_reqs must be >= 0");
  require(args.tokens_per_request >= 0, name + "tokens_per_request must be >= 0 (0 = from extend_lens)");
  require(args.row_repeat >= 1, name + "row_repeat (topk) must be >= 1, got " + std::to_string(args.row_repeat));
  require(int64_t{kPage} * (args.staging.page_cols - 1) < args.ctx,
          name + "staging.page_cols " + std::to_string(args.staging.page_cols) + " reach beyond ctx " + std::to_string(args.ctx));
  // An empty batch (max_reqs 0) has empty per-request arrays, which the allocator may give as null.
  require(args.req_to_token && args.full_to_swa && args.num_reqs && args.num_rows &&
              (args.staging.rows == 0 || args.out_cache_loc) &&
              (args.max_reqs == 0 || (args.req_pool_indices && args.seq_lens &&
                                      (args.tokens_per_request > 0 || args.extend_lens))),
          name + "null device pointer");
  // At least one block, so that the row count is written even for an empty staging set.
  const int64_t blocks = args.staging.rows > 0 ? args.staging.rows : 1;
  attn_metadata_build<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(args);
  DSV4H_LAUNCH_CHECK("attn_metadata_build");
}

void launch_attn_metadata_copy_into(const AttnMetadataCopyArgs& args, hipStream_t stream) {
  const std::string name = "attn_metadata_copy_into: ";
  check_buffers(args.buffers, name + "buffers");
  check_buffers(args.staging, name + "staging");
  const auto fits = [&](const char* field, int64_t staging, int64_t buffer) {
    require(staging <= buffer, name + field + " of the staging set is " + std::to_string(staging) +
                                   " wide, wider than its buffer (" + std::to_string(buffer) + ")");
  };
  fits("page_table", args.staging.page_cols, args.buffers.page_cols);
  fits("c128_page_indices", args.staging.c128_cols, args.buffers.c128_cols);
  fits("c4_sparse_page_indices", args.staging.index_topk, args.buffers.index_topk);
  require(args.num_rows != nullptr, name + "null device pointer");
  if (args.buffers.rows == 0) return;
  CopyKernelArgs k{};
  k.a = args;
#if defined(DSV4H_MUTANT_META_PADDING_ITEM)
  // Review finding 1: the row count read with .item(), a device-to-host synchronisation.
  int32_t rows_on_host = 0;
  DSV4H_HIP_CHECK(hipMemcpy(&rows_on_host, args.num_rows, sizeof rows_on_host, hipMemcpyDeviceToHost));
  k.rows_read_on_host = rows_on_host;
#endif
  attn_metadata_copy_into<<<static_cast<unsigned>(args.buffers.rows), kThreads, 0, stream>>>(k);
  DSV4H_LAUNCH_CHECK("attn_metadata_copy_into");
}

void launch_swa_gather(const SwaGatherArgs& args, hipStream_t stream) {
  require(args.rows >= 0 && args.rows <= (int64_t{1} << 24), "swa_gather: rows must be in [0, 2^24]");
  require(args.swa_slots >= 1, "swa_gather: swa_slots must be >= 1");
  if (args.rows == 0) return;
  require(args.swa_page_indices && args.swa_topk_lengths && args.swa_kv && args.gathered, "swa_gather: null device pointer");
  swa_gather<<<static_cast<unsigned>(args.rows), kThreads, 0, stream>>>(args);
  DSV4H_LAUNCH_CHECK("swa_gather");
}

}  // namespace dsv4h
