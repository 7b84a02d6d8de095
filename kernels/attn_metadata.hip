// Attention metadata of one step (spec 6.2), built into a staging set and, in the same launch,
// copied into a captured graph's buffer set with the tail reset (spec 6.4); and a consumer that
// gathers through swa_page_indices.
//
// The update is latency-bound: a row is at most a few KB, so a block takes as long as the memory
// round trips on its longest chain of dependent accesses, and a second kernel adds a launch and
// its drain (on the H200, build then copy took 5.8 us per replay at bs 1, this one launch 3.9 us,
// an empty kernel's graph 1.4). A store may alias any later int32 load, so the compiler never
// moves a load above a store: each thread here issues all the loads it can before its first
// store, and reads nothing on a chain it does not need.
//
// attn_metadata_update: one block of 128 threads per row of the larger set. 128 is the SWA window,
// so thread k computes column k of swa_page_indices. The chain num_reqs -> request row ->
// req_to_token -> full_to_swa is inherent, but in decode and target verify (tokens per request
// fixed) a row's request is known without the count: its req_pool_indices and seq_lens (and
// out_cache_loc) are read alongside num_reqs, in bounds, and the count only decides afterwards
// where the row goes. With its SWA position each thread also reads req_to_token at the page starts
// 256 c, c = k, k + 128, ... (four per round trip): that one value gives page_table column c and
// c128_page_indices columns 2c and 2c + 1 (column j reads position 256 (j / 2)). Three round trips
// before the stores. Each value of a real row is then stored from the registers into its staging
// row and into the buffer row of the same index: the copy reads nothing back, so it costs no round
// trip. Buffer columns beyond a narrower staging field and buffer rows beyond the real ones get
// the padding (16-byte stores where aligned).
//
// Rows are few (bs x tokens per request, at most a few thousand) and independent, so a block per
// row fills the device without a grid-stride loop; the real counts are read on the device, so the
// grid is the bucket's and is fixed at capture.
//
// Mutants, compiled in only under their DSV4H_MUTANT_* definition:
// META_PADDING_ITEM (review finding 1) reads the real row count back to the host before the launch
// (a sync: capture must fail; an eager run reads the previous step's count) and copies that many
// rows, META_FULL_SHAPE_COPY (finding 2) copies every staging row (those this step does not build
// as memory holds them: stale) and pads no tail row, META_ROW0_BROADCAST gives every buffer row
// row 0's values when one row is real (torch's copy_ of a 1-row src), META_TAIL_NOT_RESET leaves
// the tail rows as an earlier replay left them. NOOP does nothing.
#include "attn_metadata.h"

#include <string>

namespace dsv4h {
namespace {

constexpr int kThreads = 128;       // a thread per SWA column
constexpr int kPagesPerThread = 4;  // page starts a thread reads in one round trip
constexpr int64_t kPage = 256;
constexpr int64_t kWindow = 128;

using Buffers = AttnMetadataBuffers;
using Field = int32_t* Buffers::*;  // one field of a set

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
__device__ RowSource locate_by_scan(const AttnMetadataUpdateArgs& a, int64_t n, int64_t token) {
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

// The full slot of position pos of pool row req, -1 where the inputs have none (bad input that
// the harness refuses before any launch; here it keeps reads in bounds, also for a row that the
// count then turns out not to own).
__device__ __forceinline__ int64_t full_slot(const AttnMetadataUpdateArgs& a, int64_t req, int64_t pos) {
  if (req < 0 || req >= a.pool || pos < 0 || pos >= a.ctx) return -1;
  const int64_t slot = a.req_to_token[req * a.ctx + pos];
  return slot >= 0 && slot < a.full_slots ? slot : -1;
}

// Page start c serves page_table column c and c128_page_indices columns 2c and 2c + 1.
__device__ __forceinline__ int64_t page_starts(const Buffers& s) {
  return s.page_cols > (s.c128_cols + 1) / 2 ? s.page_cols : (s.c128_cols + 1) / 2;
}

// The full slots of the thread's page starts first + i * kThreads + threadIdx.x.
__device__ __forceinline__ void read_pages(const AttnMetadataUpdateArgs& a, int64_t req, int64_t first,
                                           int64_t (&slots)[kPagesPerThread]) {
  const int64_t pages = page_starts(a.staging);
#pragma unroll
  for (int i = 0; i < kPagesPerThread; ++i) {
    const int64_t c = first + i * kThreads + threadIdx.x;
    slots[i] = c < pages ? full_slot(a, req, kPage * c) : -1;
  }
}

// What a thread loads of row `index` before its first store, and the step's real row count.
struct Row {
  int64_t real_rows;  // rows below it are real: the scan's or the count's tokens cover them
  int64_t req, L;     // the request's req_to_token row (may be out of range) and its kv length
  int32_t raw;        // out_cache_loc[index], thread 0 only
  int64_t swa_full;   // full slot of position L - 1 - threadIdx.x
  int64_t page_slots[kPagesPerThread];  // full slots of the thread's first page starts
};

__device__ __forceinline__ Row load_row(const AttnMetadataUpdateArgs& a, int64_t index) {
  const Buffers& s = a.staging;
  const int64_t k = threadIdx.x;
  const int64_t token = index / a.row_repeat;
  const int32_t count = *a.num_reqs;
  Row row;
  row.raw = k == 0 && index < s.rows ? a.out_cache_loc[index] : 0;  // one per staging row
  RowSource src;
  if (a.tokens_per_request > 0) {  // the owner without the count; the count decides below
    src.request = token / a.tokens_per_request;
    src.token = token % a.tokens_per_request;
  } else {
    src = locate_by_scan(a, clamp64(count, 0, a.max_reqs), token);
  }
  const bool in_batch = src.request >= 0 && src.request < a.max_reqs;
  row.req = in_batch ? a.req_pool_indices[src.request] : -1;
  const int64_t seq_len = in_batch ? a.seq_lens[src.request] : 0;
  const int64_t extend = a.tokens_per_request > 0 ? a.tokens_per_request : in_batch ? a.extend_lens[src.request] : 0;
  row.L = seq_len - extend + src.token + 1;
  row.swa_full = full_slot(a, row.req, row.L - 1 - k);
  read_pages(a, row.req, 0, row.page_slots);

  if (a.tokens_per_request > 0) src.tokens = clamp64(count, 0, a.max_reqs) * a.tokens_per_request;
  row.real_rows = src.tokens * a.row_repeat < s.rows ? src.tokens * a.row_repeat : s.rows;
  return row;
}

// Where write_row stores a row's values: staging row `row` and/or buffer row `row`.
struct RowSink {
  const Buffers& staging;
  const Buffers& buffers;
  int64_t row;
  bool to_staging, to_buffers;

  // Column `col` of `field`, whose rows are staging_cols and buffer_cols wide.
  __device__ __forceinline__ void put(Field field, int64_t staging_cols, int64_t buffer_cols, int64_t col,
                                      int64_t value) const {
    if (to_staging) (staging.*field)[row * staging_cols + col] = static_cast<int32_t>(value);
    if (to_buffers) (buffers.*field)[row * buffer_cols + col] = static_cast<int32_t>(value);
  }
};

// Stores the values of `row` in the staging widths (the buffer's wider columns are left to
// pad_buffer_row). Every load precedes the first store but those of the page starts beyond the
// first kThreads * kPagesPerThread (ctx above 131072), a round trip per kThreads * kPagesPerThread.
__device__ __forceinline__ void write_row(const AttnMetadataUpdateArgs& a, const Row& row, const RowSink& sink) {
  const Buffers& s = a.staging;
  const Buffers& b = a.buffers;
  const int64_t k = threadIdx.x, L = row.L, p = L - 1;
  const int32_t swa = row.swa_full >= 0 ? a.full_to_swa[row.swa_full] : -1;
  if (k == 0) {
    const auto scalar = [&](Field field, int64_t value) { sink.put(field, 1, 1, 0, value); };
    const int32_t raw = row.raw;
    const int64_t c4_clamp1 = L / 4 > 1 ? L / 4 : 1;
    scalar(&Buffers::raw_out_loc, raw);
    scalar(&Buffers::seq_lens_casual, L);
    scalar(&Buffers::positions_casual, p);
    scalar(&Buffers::swa_topk_lengths, L < kWindow ? L : kWindow);
    scalar(&Buffers::c4_out_loc, L % 4 == 0 ? raw / 4 : 0);
    scalar(&Buffers::c4_positions, p & ~int64_t{3});
    scalar(&Buffers::c4_topk_lengths_raw, L / 4);
    scalar(&Buffers::c4_topk_lengths_clamp1, c4_clamp1);
    scalar(&Buffers::c4_sparse_topk_lengths, c4_clamp1 < s.index_topk ? c4_clamp1 : s.index_topk);
    scalar(&Buffers::c128_out_loc, L % 128 == 0 ? raw / 128 : 0);
    scalar(&Buffers::c128_positions, p & ~int64_t{127});
    scalar(&Buffers::c128_topk_lengths_clamp1, L / 128 > 1 ? L / 128 : 1);
  }
  int64_t slots[kPagesPerThread];
#pragma unroll
  for (int i = 0; i < kPagesPerThread; ++i) slots[i] = row.page_slots[i];
  const auto write_pages = [&](int64_t first) {
#pragma unroll
    for (int i = 0; i < kPagesPerThread; ++i) {
      const int64_t c = first + i * kThreads + k, slot = slots[i];
      if (c < s.page_cols) sink.put(&Buffers::page_table, s.page_cols, b.page_cols, c, slot >= 0 ? slot / kPage : -1);
      for (int64_t j = 2 * c; j < 2 * c + 2 && j < s.c128_cols; ++j)
        sink.put(&Buffers::c128_page_indices, s.c128_cols, b.c128_cols, j,
                 j < L / 128 && slot >= 0 ? slot / kPage * 2 + j % 2 : -1);
    }
  };
  write_pages(0);
  for (int64_t j = k; j < s.index_topk; j += kThreads)
    sink.put(&Buffers::c4_sparse_page_indices, s.index_topk, b.index_topk, j, -1);
  const int64_t pages = page_starts(s);
  for (int64_t first = kThreads * kPagesPerThread; first < pages; first += kThreads * kPagesPerThread) {
    read_pages(a, row.req, first, slots);
    write_pages(first);
  }
  sink.put(&Buffers::swa_page_indices, kWindow, kWindow, k, swa);
}

// Stores `value` into columns [from, end) of the row at `to`, 16 bytes at a time where aligned.
__device__ __forceinline__ void fill(int32_t* to, int64_t from, int64_t end, int32_t value) {
  const int64_t k = threadIdx.x;
  const int64_t misaligned = static_cast<int64_t>(reinterpret_cast<uintptr_t>(to + from) / sizeof(int32_t) % 4);
  const int64_t head = from + (4 - misaligned) % 4 < end ? from + (4 - misaligned) % 4 : end;
  const int64_t quads = end > head ? (end - head) / 4 : 0;
  const uint32_t u = static_cast<uint32_t>(value);
  for (int64_t c = from + k; c < head; c += kThreads) to[c] = value;
  for (int64_t q = k; q < quads; q += kThreads) reinterpret_cast<uint4*>(to + head)[q] = make_uint4(u, u, u, u);
  for (int64_t c = head + 4 * quads + k; c < end; c += kThreads) to[c] = value;
}

// Spec 6.4's padding in buffer row `row`: in every column (a row of no real request) or only in
// the columns beyond the narrower staging fields (a copied row).
__device__ __forceinline__ void pad_buffer_row(const Buffers& b, const Buffers& s, int64_t row, bool whole) {
  if (whole) {
    if (threadIdx.x == 0) {
      b.raw_out_loc[row] = 0;
      b.seq_lens_casual[row] = 1;
      b.positions_casual[row] = 0;
      b.swa_topk_lengths[row] = 1;
      b.c4_out_loc[row] = 0;
      b.c4_positions[row] = 0;
      b.c4_topk_lengths_raw[row] = 0;
      b.c4_topk_lengths_clamp1[row] = 1;
      b.c4_sparse_topk_lengths[row] = 1;
      b.c128_out_loc[row] = 0;
      b.c128_positions[row] = 0;
      b.c128_topk_lengths_clamp1[row] = 1;
    }
    b.swa_page_indices[row * kWindow + threadIdx.x] = -1;
  }
  fill(b.c4_sparse_page_indices + row * b.index_topk, whole ? 0 : s.index_topk, b.index_topk, -1);
  fill(b.c128_page_indices + row * b.c128_cols, whole ? 0 : s.c128_cols, b.c128_cols, -1);
  fill(b.page_table + row * b.page_cols, whole ? 0 : s.page_cols, b.page_cols, 0);  // page 0: the write sink
}

#if defined(DSV4H_MUTANT_META_PADDING_ITEM) || defined(DSV4H_MUTANT_META_FULL_SHAPE_COPY)
// Staging row `row` as memory holds it into buffer row `row`, for a row this launch does not build
// (so no block writes it while it is read).
__device__ void copy_staging_row(const Buffers& b, const Buffers& s, int64_t row) {
  const auto copy = [&](Field field, int64_t staging_cols, int64_t buffer_cols) {
    for (int64_t c = threadIdx.x; c < staging_cols; c += kThreads)
      (b.*field)[row * buffer_cols + c] = (s.*field)[row * staging_cols + c];
  };
  const Field scalars[] = {&Buffers::raw_out_loc, &Buffers::seq_lens_casual, &Buffers::positions_casual,
                           &Buffers::swa_topk_lengths, &Buffers::c4_out_loc, &Buffers::c4_positions,
                           &Buffers::c4_topk_lengths_raw, &Buffers::c4_topk_lengths_clamp1,
                           &Buffers::c4_sparse_topk_lengths, &Buffers::c128_out_loc, &Buffers::c128_positions,
                           &Buffers::c128_topk_lengths_clamp1};
  for (const Field field : scalars) copy(field, 1, 1);
  copy(&Buffers::swa_page_indices, kWindow, kWindow);
  copy(&Buffers::c4_sparse_page_indices, s.index_topk, b.index_topk);
  copy(&Buffers::c128_page_indices, s.c128_cols, b.c128_cols);
  copy(&Buffers::page_table, s.page_cols, b.page_cols);
}
#endif

struct UpdateKernelArgs {
  AttnMetadataUpdateArgs a;
#if defined(DSV4H_MUTANT_META_PADDING_ITEM)
  int64_t rows_read_on_host;
#endif
};

// Block `index` builds staging row `index` where it is real and writes buffer row `index`.
__global__ void __launch_bounds__(kThreads) attn_metadata_update(UpdateKernelArgs k) {
  const AttnMetadataUpdateArgs& a = k.a;
#if defined(DSV4H_MUTANT_NOOP)
  if (a.max_reqs >= 0) return;
#endif
  const Buffers& s = a.staging;
  const Buffers& b = a.buffers;
  const int64_t index = blockIdx.x;
  const Row row = load_row(a, index);
  if (index == 0 && threadIdx.x == 0) *a.num_rows = static_cast<int32_t>(row.real_rows);
  // Buffer rows below n are copies of the staging rows of the same index, the rest padding.
#if defined(DSV4H_MUTANT_META_PADDING_ITEM)
  const int64_t n = clamp64(k.rows_read_on_host, 0, b.rows < s.rows ? b.rows : s.rows);
#elif defined(DSV4H_MUTANT_META_FULL_SHAPE_COPY)
  const int64_t n = b.rows < s.rows ? b.rows : s.rows;  // every staging row
#else
  const int64_t n = row.real_rows < b.rows ? row.real_rows : b.rows;
#endif
#if defined(DSV4H_MUTANT_META_ROW0_BROADCAST)
  if (n == 1 && index > 0 && index < b.rows) {  // then real_rows is 1: this block builds no row
    __syncthreads();  // every thread has read locate_by_scan's shared result before it is reused
    write_row(a, load_row(a, 0), RowSink{s, b, index, false, true});
    pad_buffer_row(b, s, index, false);
    return;
  }
#endif
  const bool copied = index < n;  // so index < real_rows, but in the mutants that copy stale rows
  if (index < row.real_rows) write_row(a, row, RowSink{s, b, index, true, copied});
  if (index >= b.rows) return;
  if (!copied) {
#if !defined(DSV4H_MUTANT_META_TAIL_NOT_RESET) && !defined(DSV4H_MUTANT_META_FULL_SHAPE_COPY)
    pad_buffer_row(b, s, index, true);
#endif
    return;
  }
#if defined(DSV4H_MUTANT_META_PADDING_ITEM) || defined(DSV4H_MUTANT_META_FULL_SHAPE_COPY)
  if (index >= row.real_rows) copy_staging_row(b, s, index);
#endif
  pad_buffer_row(b, s, index, false);
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

void launch_attn_metadata_update(const AttnMetadataUpdateArgs& args, hipStream_t stream) {
  const std::string name = "attn_metadata_update: ";
  check_buffers(args.staging, name + "staging");
  check_buffers(args.buffers, name + "buffers");
  const auto fits = [&](const char* field, int64_t staging, int64_t buffer) {
    require(staging <= buffer, name + field + " of the staging set is " + std::to_string(staging) +
                                   " wide, wider than its buffer (" + std::to_string(buffer) + ")");
  };
  fits("page_table", args.staging.page_cols, args.buffers.page_cols);
  fits("c128_page_indices", args.staging.c128_cols, args.buffers.c128_cols);
  fits("c4_sparse_page_indices", args.staging.index_topk, args.buffers.index_topk);
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
  UpdateKernelArgs k{};
  k.a = args;
#if defined(DSV4H_MUTANT_META_PADDING_ITEM)
  // Review finding 1: the row count read with .item(), a device-to-host synchronisation.
  int32_t rows_on_host = 0;
  DSV4H_HIP_CHECK(hipMemcpy(&rows_on_host, args.num_rows, sizeof rows_on_host, hipMemcpyDeviceToHost));
  k.rows_read_on_host = rows_on_host;
#endif
  // A block per row of the larger set, at least one so that the row count is always written.
  const int64_t rows = args.staging.rows > args.buffers.rows ? args.staging.rows : args.buffers.rows;
  attn_metadata_update<<<static_cast<unsigned>(rows > 0 ? rows : 1), kThreads, 0, stream>>>(k);
  DSV4H_LAUNCH_CHECK("attn_metadata_update");
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
