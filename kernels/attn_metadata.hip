// Attention metadata of one step (spec 6.2), its copy into a captured graph's buffers with the tail
// reset (spec 6.4), and a consumer that gathers through swa_page_indices.
//
// The metadata kernels are latency-bound: a row is at most a few KB, so a block takes as long as
// the memory round trips on its longest chain of dependent accesses. A store may alias any later
// int32 load, so the compiler never moves a load above a store: each thread here issues all the
// loads it can before its first store, and reads nothing on a chain it does not need.
//
// attn_metadata_build: one block of 128 threads per staging row. 128 is the SWA window, so thread
// k builds column k of swa_page_indices. The chain num_reqs -> request row -> req_to_token ->
// full_to_swa is inherent, but in decode and target verify (tokens per request fixed) a row's
// request is known without the count: its req_pool_indices and seq_lens (and out_cache_loc) are
// read alongside num_reqs, in bounds, and the count only decides afterwards whether the row is
// written. With its SWA position each thread also reads req_to_token at the page starts 256 c,
// c = k, k + 128, ... (four per round trip): that one value gives page_table column c and
// c128_page_indices columns 2c and 2c + 1 (column j reads position 256 (j / 2)). Three round trips
// before the stores; it was six, and one more per pass of page_table and c128_page_indices.
//
// attn_metadata_copy_into: one block of 256 threads per buffer row. The row's 16 fields are laid
// end to end as work units of 4 columns (one 16-byte access) where both widths are multiples of 4
// and both addresses aligned, else of 1 column (the table is built by the launch wrapper); thread
// t takes units t, t + 256, ..., four in flight at a time. They are loaded from the staging row of
// the same index before the row count arrives (in bounds, unused where the count says padding),
// and the count then picks loaded values or padding: one round trip for rows of up to 4096 int32
// (a ctx 131072 row has about 2200), where every field and pass cost one before.
//
// Rows are few (bs x tokens per request, at most a few thousand) and independent, so a block per
// row fills the device without a grid-stride loop; the real counts are read on the device, so the
// grid is the bucket's and is fixed at capture.
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

constexpr int kThreads = 128;        // build and gather: a thread per SWA column
constexpr int kPagesPerThread = 4;   // page starts a build thread reads in one round trip
constexpr int kCopyThreads = 256;
constexpr int kUnitsPerThread = 4;   // copy units a thread has in flight
constexpr int kFields = 16;
constexpr int64_t kPage = 256;
constexpr int64_t kWindow = 128;

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
  const AttnMetadataBuffers& s = a.staging;
  const int64_t row = blockIdx.x;
  const int64_t token = row / a.row_repeat;
  const int32_t count = *a.num_reqs;
  const int32_t raw = threadIdx.x == 0 && row < s.rows ? a.out_cache_loc[row] : 0;  // one per staging row
  RowSource src;
  if (a.tokens_per_request > 0) {  // the owner without the count; checked against it below
    src.request = token / a.tokens_per_request;
    src.token = token % a.tokens_per_request;
  } else {
    src = locate_by_scan(a, clamp64(count, 0, a.max_reqs), token);
  }
  const bool in_batch = src.request >= 0 && src.request < a.max_reqs;
  const int64_t req = in_batch ? a.req_pool_indices[src.request] : -1;
  const int64_t seq_len = in_batch ? a.seq_lens[src.request] : 0;
  const int64_t extend = a.tokens_per_request > 0 ? a.tokens_per_request : in_batch ? a.extend_lens[src.request] : 0;
  const int64_t L = seq_len - extend + src.token + 1, p = L - 1;
  const bool req_ok = req >= 0 && req < a.pool;
  // The full slot of position pos of this request, -1 where the inputs have none (bad input that
  // the harness refuses before any launch; here it keeps reads in bounds, also for a row that the
  // count then turns out not to own).
  const auto full_slot = [&](int64_t pos) -> int64_t {
    if (!req_ok || pos < 0 || pos >= a.ctx) return -1;
    const int64_t slot = a.req_to_token[req * a.ctx + pos];
    return slot >= 0 && slot < a.full_slots ? slot : -1;
  };
  // Page start c serves page_table column c and c128_page_indices columns 2c and 2c + 1.
  const int64_t k = threadIdx.x;
  const int64_t pages = s.page_cols > (s.c128_cols + 1) / 2 ? s.page_cols : (s.c128_cols + 1) / 2;
  int64_t page_slot[kPagesPerThread];
  const auto read_pages = [&](int64_t first) {
#pragma unroll
    for (int i = 0; i < kPagesPerThread; ++i) {
      const int64_t c = first + i * kThreads + k;
      page_slot[i] = c < pages ? full_slot(kPage * c) : -1;
    }
  };
  const auto write_pages = [&](int64_t first) {
#pragma unroll
    for (int i = 0; i < kPagesPerThread; ++i) {
      const int64_t c = first + i * kThreads + k, slot = page_slot[i];
      if (c < s.page_cols) s.page_table[row * s.page_cols + c] = static_cast<int32_t>(slot >= 0 ? slot / kPage : -1);
      for (int64_t j = 2 * c; j < 2 * c + 2 && j < s.c128_cols; ++j)
        s.c128_page_indices[row * s.c128_cols + j] =
            static_cast<int32_t>(j < L / 128 && slot >= 0 ? slot / kPage * 2 + j % 2 : -1);
    }
  };
  const int64_t swa_full = full_slot(p - k);
  read_pages(0);

  const int64_t n = clamp64(count, 0, a.max_reqs);
  if (a.tokens_per_request > 0) {
    src.tokens = n * a.tokens_per_request;
    if (token >= src.tokens) src.request = -1;
  }
  const int64_t real_rows = src.tokens * a.row_repeat < s.rows ? src.tokens * a.row_repeat : s.rows;
  if (row == 0 && threadIdx.x == 0) *a.num_rows = static_cast<int32_t>(real_rows);
  if (row >= real_rows || src.request < 0) return;

  const int32_t swa = swa_full >= 0 ? a.full_to_swa[swa_full] : -1;
  if (threadIdx.x == 0) {
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
  write_pages(0);
  for (int64_t j = k; j < s.index_topk; j += kThreads) s.c4_sparse_page_indices[row * s.index_topk + j] = -1;
  for (int64_t first = kThreads * kPagesPerThread; first < pages; first += kThreads * kPagesPerThread) {
    read_pages(first);
    write_pages(first);
  }
  s.swa_page_indices[row * kWindow + k] = swa;
}

// The copy of one row of every field, as work units (built by the launch wrapper): field f's
// buffer row has dst_cols[f] columns, the first src_cols[f] from its staging row, the rest
// padding[f]; its units are width[f] columns each (4: one 16-byte access; both widths are then
// multiples of 4, so a unit is all staging or all padding).
struct RowFields {
  int count;
  int64_t units;                  // of all fields
  int32_t* dst[kFields];
  const int32_t* src[kFields];
  int64_t dst_cols[kFields], src_cols[kFields];
  int64_t units_end[kFields];     // units of fields 0..f
  int32_t width[kFields];
  int32_t padding[kFields];
};

struct CopyKernelArgs {
  RowFields fields;
  const int32_t* num_rows;
  int64_t buffer_rows, staging_rows;
#if defined(DSV4H_MUTANT_META_PADDING_ITEM)
  int64_t rows_read_on_host;
#endif
};

// The units a thread copies in one pass (units first + threadIdx.x + i * kCopyThreads), loaded.
struct Pass {
  int field[kUnitsPerThread];  // -1: no unit
  int64_t col[kUnitsPerThread];
  uint4 value[kUnitsPerThread];
};

// Locates the thread's units of the pass at `first` and loads them from staging row `src_row`
// (-1: none); no stores, so every load is in flight at once.
__device__ __forceinline__ Pass load_pass(const RowFields& f, int64_t first, int64_t src_row) {
  Pass pass;
  int field = 0;
#pragma unroll
  for (int i = 0; i < kUnitsPerThread; ++i) {
    const int64_t unit = first + i * kCopyThreads + threadIdx.x;
    pass.field[i] = -1;
    pass.col[i] = 0;
    pass.value[i] = make_uint4(0, 0, 0, 0);
    if (unit >= f.units) continue;
    while (unit >= f.units_end[field]) ++field;
    const int64_t col = (unit - (field > 0 ? f.units_end[field - 1] : 0)) * f.width[field];
    pass.field[i] = field;
    pass.col[i] = col;
    if (src_row < 0 || col >= f.src_cols[field]) continue;
    const int32_t* const from = f.src[field] + src_row * f.src_cols[field] + col;
    if (f.width[field] == 4) pass.value[i] = load_read_only(reinterpret_cast<const uint4*>(from));
    else pass.value[i].x = static_cast<uint32_t>(*from);
  }
  return pass;
}

// Stores the pass's units into buffer row `row`: staging row `src_row`'s values (-1: none) in
// its columns, padding elsewhere.
__device__ __forceinline__ void store_pass(const RowFields& f, const Pass& pass, int64_t row, int64_t src_row) {
#pragma unroll
  for (int i = 0; i < kUnitsPerThread; ++i) {
    const int field = pass.field[i];
    if (field < 0) continue;
    const bool staged = src_row >= 0 && pass.col[i] < f.src_cols[field];
    const uint32_t pad = static_cast<uint32_t>(f.padding[field]);
    int32_t* const to = f.dst[field] + row * f.dst_cols[field] + pass.col[i];
    if (f.width[field] == 4) *reinterpret_cast<uint4*>(to) = staged ? pass.value[i] : make_uint4(pad, pad, pad, pad);
    else *to = static_cast<int32_t>(staged ? pass.value[i].x : pad);
  }
}

// Staging rows to copy: the builder's count, clamped to both sets.
__device__ __forceinline__ int64_t rows_to_copy(const CopyKernelArgs& k) {
#if defined(DSV4H_MUTANT_META_PADDING_ITEM)
  const int64_t device_rows = k.rows_read_on_host;
#else
  const int64_t device_rows = *k.num_rows;
#endif
  return clamp64(device_rows, 0, k.buffer_rows < k.staging_rows ? k.buffer_rows : k.staging_rows);
}

__global__ void __launch_bounds__(kCopyThreads) attn_metadata_copy_into(CopyKernelArgs k) {
#if defined(DSV4H_MUTANT_NOOP)
  if (k.buffer_rows >= 0) return;
#endif
  const int64_t row = blockIdx.x;
  for (int64_t first = 0; first < k.fields.units; first += kCopyThreads * kUnitsPerThread) {
    // Loaded before the count is known: the staging row of the same index, where there is one
    // (the mutant's row 0 needs the count first).
#if defined(DSV4H_MUTANT_META_ROW0_BROADCAST)
    const int64_t load_row = rows_to_copy(k) == 1 ? 0 : row < k.staging_rows ? row : -1;
#else
    const int64_t load_row = row < k.staging_rows ? row : -1;
#endif
    const Pass pass = load_pass(k.fields, first, load_row);
    // The count, read after the pass's loads are issued so that they do not wait for it.
    const int64_t n = rows_to_copy(k);
    int64_t src_row = row < n ? row : -1;  // load_row or -1: the loaded values are the ones to copy
#if defined(DSV4H_MUTANT_META_ROW0_BROADCAST)
    if (n == 1) src_row = 0;
#elif defined(DSV4H_MUTANT_META_FULL_SHAPE_COPY)
    if (row >= k.staging_rows) return;
    src_row = row;
#elif defined(DSV4H_MUTANT_META_TAIL_NOT_RESET)
    if (src_row < 0) return;
#endif
    store_pass(k.fields, pass, row, src_row);
  }
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

// Appends a field to the copy's table, in 16-byte units where widths and addresses allow.
void add_field(RowFields& f, int32_t* dst, int64_t dst_cols, const int32_t* src, int64_t src_cols, int32_t padding) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool quad = dst_cols % 4 == 0 && src_cols % 4 == 0 && aligned(dst) && aligned(src);
  const int i = f.count++;
  f.dst[i] = dst;
  f.src[i] = src;
  f.dst_cols[i] = dst_cols;
  f.src_cols[i] = src_cols;
  f.width[i] = quad ? 4 : 1;
  f.padding[i] = padding;
  f.units += dst_cols / f.width[i];
  f.units_end[i] = f.units;
}

// Every field of the copy with its padding (spec 6.4): the per-row scalars, then the index arrays.
RowFields copy_fields(const AttnMetadataBuffers& b, const AttnMetadataBuffers& s) {
  RowFields f{};
  add_field(f, b.raw_out_loc, 1, s.raw_out_loc, 1, 0);
  add_field(f, b.seq_lens_casual, 1, s.seq_lens_casual, 1, 1);
  add_field(f, b.positions_casual, 1, s.positions_casual, 1, 0);
  add_field(f, b.swa_topk_lengths, 1, s.swa_topk_lengths, 1, 1);
  add_field(f, b.c4_out_loc, 1, s.c4_out_loc, 1, 0);
  add_field(f, b.c4_positions, 1, s.c4_positions, 1, 0);
  add_field(f, b.c4_topk_lengths_raw, 1, s.c4_topk_lengths_raw, 1, 0);
  add_field(f, b.c4_topk_lengths_clamp1, 1, s.c4_topk_lengths_clamp1, 1, 1);
  add_field(f, b.c4_sparse_topk_lengths, 1, s.c4_sparse_topk_lengths, 1, 1);
  add_field(f, b.c128_out_loc, 1, s.c128_out_loc, 1, 0);
  add_field(f, b.c128_positions, 1, s.c128_positions, 1, 0);
  add_field(f, b.c128_topk_lengths_clamp1, 1, s.c128_topk_lengths_clamp1, 1, 1);
  add_field(f, b.swa_page_indices, kWindow, s.swa_page_indices, kWindow, -1);
  add_field(f, b.c4_sparse_page_indices, b.index_topk, s.c4_sparse_page_indices, s.index_topk, -1);
  add_field(f, b.c128_page_indices, b.c128_cols, s.c128_page_indices, s.c128_cols, -1);
  add_field(f, b.page_table, b.page_cols, s.page_table, s.page_cols, 0);  // page 0: the write sink
  return f;
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
  k.fields = copy_fields(args.buffers, args.staging);
  k.num_rows = args.num_rows;
  k.buffer_rows = args.buffers.rows;
  k.staging_rows = args.staging.rows;
#if defined(DSV4H_MUTANT_META_PADDING_ITEM)
  // Review finding 1: the row count read with .item(), a device-to-host synchronisation.
  int32_t rows_on_host = 0;
  DSV4H_HIP_CHECK(hipMemcpy(&rows_on_host, args.num_rows, sizeof rows_on_host, hipMemcpyDeviceToHost));
  k.rows_read_on_host = rows_on_host;
#endif
  attn_metadata_copy_into<<<static_cast<unsigned>(args.buffers.rows), kCopyThreads, 0, stream>>>(k);
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
