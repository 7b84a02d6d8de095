// Attention metadata of one step (spec 6.2), built into a staging set and, in the same launch,
// copied into a captured graph's buffer set with the tail reset (spec 6.4); and a consumer that
// gathers through swa_page_indices.
//
// The update is latency-bound: a row is at most a few KB, so a block takes as long as its longest
// warp's chain of dependent memory round trips and instructions. Measured on the H200 (graph
// replays, device time): build then copy as two kernels took 5.8 us per replay at bs 1, one launch
// 3.7 us, an empty kernel's graph 1.4; a 1-block launch of the 64-bit version issued 650
// instructions a warp at ~6 cycles each, more than its three round trips cost. So (3.85 -> 3.09 us
// at bs 1, 4.12 -> 3.32 at bs 64, decode at ctx 8192, both builds timed in one device call; ncu
// of this version at bs 1, ctx 131072: one block, about 470 instructions a warp at 7.4 cycles each;
// then 2.96 -> 2.64 us at bs 1 decode ctx 8192 and 3.32 -> 3.04 at ctx 131072, medians of six
// rounds of ci/gpu-ab, reports/gpu/2026-12-03-6265b98-h200-ab-meta-special-v3.json):
// - Four kernels, each holding only its own code (a branch not taken still costs its instruction
//   fetches and its test): tokens per request fixed (decode, verify, draft) or found by the prefill
//   scan; every vector field's rows 16-byte aligned in both sets or not. Loops run once in the
//   common case, so they are not unrolled.
// - 32-bit arithmetic throughout (every size is checked on the host to fit), divisions by the
//   step's topk and tokens per request as magic multiplications (divider.h), and the parameters
//   that the first round trip needs together at the start of the kernel's parameters.
// - Each round trip's wait is filled with the stores that the previous one made possible, in
//   program order (a store may alias any later int32 load, so the compiler keeps that order):
//   round trip 1 reads the count, the row's request, its kv length and out location; round trip 2
//   the full slots of the SWA position and of the page starts, while the row's twelve one-value
//   fields are stored (three a warp, one store a lane of lanes 0-5: staging and buffer); round
//   trip 3 the SWA slot, while page_table and c128_page_indices are stored. The
//   c4_sparse_page_indices fill (-1, two thirds of a row's bytes at ctx 8192) comes last, after the
//   SWA stores: under round trip 3 it was 0.06-0.13 us slower at 256 and 1024 rows (6 of 6 rounds;
//   reports/gpu/2026-12-04-43153aa-h200-ab-meta-c4-last.json), as if its stores lengthened that
//   round trip; moving the page stores, or them and the one-value fields, after the SWA stores too
//   was slower than this (reports/gpu/2026-12-04-43153aa-h200-meta-store-order.json), and so was
//   moving half of the page stores, c128's or the buffer row's, though at ctx 131072 they cost
//   0.22-0.32 us (reports/gpu/2026-12-04-5095ac5-h200-meta-store-parts.json).
//   A round trip's loads are all issued before the first of them is checked: a check in between
//   makes the next load wait for the value (ncu's SASS of exp/meta-special v2 showed five serial
//   loads in round trip 2; reports/gpu/2026-12-03-6265b98-h200-ab-meta-special.json).
// - Each value is stored from registers into the staging row and into the buffer row of the same
//   index: the copy reads nothing back. Buffer columns beyond a narrower staging field and buffer
//   rows beyond the real ones get the padding (16-byte stores where the host found a field's rows
//   aligned).
//
// One block of 128 threads per row of the larger set: 128 is the SWA window, so thread k computes
// column k of swa_page_indices, and it reads req_to_token at the page starts 256 c, c = 4k, ...,
// 4k + 3 (then 512 further a round trip): that one value gives page_table column c and
// c128_page_indices columns 2c and 2c + 1, so a thread stores 16 bytes of page_table and 32 of
// c128_page_indices a round in 16-byte stores (where the rows are aligned). Against one page start
// every 128 columns, on the H200: ctx 131072 bs 1-64 decode and bs 1-8 verify 0.14-0.26 us faster,
// but bs 256 verify ctx 131072 8.9 -> 10.9 us and ctx 8192 bs 64-256 up to 0.19 us slower (a warp's
// c128 stores, lanes 32 bytes apart, cover each sector in two instructions;
// reports/gpu/2026-12-03-80df6eb-h200-ab-meta-pages4.json). Pairs of page starts, 8- and 16-byte
// stores lane after lane, undo the bs 256 cost but lose 0.1-0.2 us at ctx 131072 bs 8-64
// (reports/gpu/2026-12-03-3904df9-h200-ab-meta-pairs.json). One or two page starts a thread where a
// row has at most 128 or 256 (coalesced stores) changed nothing measurable at ctx 8192; that build
// also issued round trip 2 before the count, its loads guarded by one count, and was 0.1-0.16 us
// slower at ctx 131072 bs 8-64 decode and bs 1 verify, where its SASS has the SWA load, which round
// trip 3 waits for, after all four page loads (128 requests a warp), here after the first
// (reports/gpu/2026-12-03-b86392d-h200-ab-meta-raw-rt1.json). The c4_sparse_page_indices fill
// (-1, 2 KB of a row's 3 at ctx 8192) issued early, the buffer row's under round trip 1 and the
// staging row's under round trip 2, made bs 256 verify 0.24-0.36 us faster but bs 256 decode ctx
// 8192 0.125 us slower than under round trip 3 (5 of 6 rounds;
// reports/gpu/2026-12-03-9f34ada-h200-ab-meta-c4-early.json).
// Rows are few (bs x tokens per request) and independent, so a block per row fills the device; the
// real counts are read on the device, so the grid is the bucket's, fixed at capture.
// Blocks of 256 threads (two page starts each) and of 512 (one) were slower on the H200 at ctx 8192
// and 131072 (bs 64 verify, ctx 131072: 4.1 -> 4.5 and 4.7 us; reports/gpu/*-e2d1856-*-partial.json).
// In decode and target verify (tokens per request fixed) a row's request is known without the
// count, and the count only decides where the row goes; prefill finds it by a scan of extend_lens.
//
// Mutants, compiled in only under their DSV4H_MUTANT_* definition:
// META_PADDING_ITEM (review finding 1) reads the real row count back to the host before the launch
// (a sync: capture must fail; an eager run reads the previous step's count) and copies that many
// rows, META_FULL_SHAPE_COPY (finding 2) copies every staging row (those this step does not build
// as memory holds them: stale) and pads no tail row, META_ROW0_BROADCAST gives every buffer row
// row 0's values when one row is real (torch's copy_ of a 1-row src), META_TAIL_NOT_RESET leaves
// the tail rows as an earlier replay left them, META_EXTRA_COLUMNS_STALE copies a narrower staging
// field into the real rows (`dst[:n, :w].copy_(src)`, spec 6.4) and leaves the columns beyond w as an
// earlier replay left them. META_MISSING_BARRIER (issue 27) drops the barrier between a prefill
// scan chunk's read of its total and the next chunk's rewrite of the scratch (more than 128
// requests): a race that gives warps 0-2 a wrong base only when warp 3 runs ahead by the next
// chunk's first store, which the card's own schedule rarely does and the perturbation build
// (portability.h) often. NOOP does nothing.
#include "attn_metadata.h"

#include <algorithm>
#include <string>

#include "divider.h"

namespace dsv4h {
namespace {

constexpr int kThreads = 128;       // a thread per SWA column
constexpr int kWarps = kThreads / 32;
constexpr int kPagesPerThread = 4;  // consecutive page starts a thread reads in one round trip
constexpr int32_t kPage = 256;
constexpr int32_t kWindow = 128;
constexpr int64_t kMaxSize = int64_t{1} << 24;  // widths, tokens per request and topk: 32-bit products stay exact

// The fields of AttnMetadataBuffers: first the twelve of one value a row (a lane finds its field
// by its index), then the four of many.
enum Field : int {
  kRawOutLoc, kSeqLens, kPositions, kSwaTopkLengths, kC4OutLoc, kC4Positions, kC4TopkRaw, kC4TopkClamp1,
  kC4SparseTopk, kC128OutLoc, kC128Positions, kC128TopkClamp1,
  kPageTable, kSwaPageIndices, kC4SparsePageIndices, kC128PageIndices, kFields
};
constexpr int kScalars = 12;
constexpr int kScalarsPerWarp = kScalars / kWarps;

// One set of buffers as the kernel sees it.
struct Set {
  int32_t* field[kFields];
  uint32_t rows, page_cols, c128_cols, index_topk;
  uint32_t aligned;  // bit f: every row of field f starts 16-byte aligned (its base and its width)
};

// The fields written with vector stores where their rows are aligned.
constexpr uint32_t kVectorFields = 1u << kPageTable | 1u << kC4SparsePageIndices | 1u << kC128PageIndices;

// Whether field f of set s has aligned rows; kAllAligned: the kernel was chosen for sets where
// every vector field's rows are, so each store's width is known at compile time.
template <bool kAllAligned>
__device__ __forceinline__ bool aligned_rows(const Set& s, int f) {
  return kAllAligned || (s.aligned >> f & 1);
}

__host__ __device__ inline uint32_t cols_of(const Set& s, int f) {
  return f == kPageTable ? s.page_cols
         : f == kSwaPageIndices ? kWindow
         : f == kC4SparsePageIndices ? s.index_topk
         : f == kC128PageIndices ? s.c128_cols
                                 : 1;
}

__device__ __forceinline__ int32_t* row_of(const Set& s, int f, uint32_t row) {
  return s.field[f] + static_cast<size_t>(row) * cols_of(s, f);
}

struct UpdateKernelArgs {
  // What round trip 1 needs, first and together: the first 64 bytes of the parameters.
  const int32_t* num_reqs;
  const int32_t* req_pool_indices;
  const int32_t* seq_lens;
  const int32_t* out_cache_loc;
  Divider by_row_repeat;
  Divider by_tokens;               // tokens_per_request (1 in prefill: unused)
  uint32_t tokens_per_request;     // 0: prefill
  uint32_t max_reqs;
  uint32_t staging_rows;
  // Tokens per request fixed: a count of at least full_reqs makes max_rows real rows, a smaller
  // count `count * rows_per_request` (below staging_rows: 32 bits suffice).
  uint32_t full_reqs, max_rows, rows_per_request;
  uint32_t row_repeat;
  // Round trips 2 and 3.
  const int32_t* req_to_token;     // [pool, ctx]
  const int32_t* full_to_swa;      // [full_slots]
  uint32_t pool, ctx, full_slots;
  uint32_t page_starts;            // max(page_cols, ceil(c128_cols / 2)) of the staging set
  const int32_t* extend_lens;
  int32_t* num_rows;
  uint32_t wider;                  // some buffer field has more columns than its staging field
  Set staging, buffers;
#if defined(DSV4H_MUTANT_META_PADDING_ITEM)
  uint32_t rows_read_on_host;
#endif
};

// Inclusive sum of `value` over the block's threads (Hillis-Steele in shared memory).
__device__ int64_t block_inclusive_sum(int64_t value, int64_t* scratch) {
  scratch[threadIdx.x] = value;
  sync_block();
  for (int offset = 1; offset < kThreads; offset <<= 1) {
    const int64_t add = static_cast<int>(threadIdx.x) >= offset ? scratch[threadIdx.x - offset] : 0;
    sync_block();
    scratch[threadIdx.x] += add;
    sync_block();
  }
  return scratch[threadIdx.x];
}

struct RowSource {
  uint32_t request = UINT32_MAX, token = 0;  // request UINT32_MAX: the row belongs to nobody
  int64_t tokens = 0;                        // prefill: the step's tokens over all real requests
};

// Prefill: the request that owns token `token`, from a running scan of extend_lens (64-bit: a sum
// over up to max_reqs requests).
__device__ RowSource locate_by_scan(const UpdateKernelArgs& a, uint32_t n, uint32_t token) {
  __shared__ int64_t scratch[kThreads];
  __shared__ uint32_t found_request, found_token;
  if (threadIdx.x == 0) found_request = UINT32_MAX, found_token = 0;
  int64_t base = 0;
  for (uint32_t first = 0; first < n; first += kThreads) {
    const uint32_t r = first + threadIdx.x;
    const int32_t raw_extend = r < n ? a.extend_lens[r] : 0;
    const int64_t extend = raw_extend < 0 ? 0 : raw_extend > int64_t{a.staging_rows} ? a.staging_rows : raw_extend;
    const int64_t end = base + block_inclusive_sum(extend, scratch);
    if (r < n && token >= end - extend && token < end) {
      found_request = r;
      found_token = static_cast<uint32_t>(token - (end - extend));
    }
    base += scratch[kThreads - 1];
#if !defined(DSV4H_MUTANT_META_MISSING_BARRIER)
    sync_block();  // scratch is rewritten by the next chunk
#endif
  }
  sync_block();
  RowSource s;
  s.request = found_request;
  s.token = found_token;
  s.tokens = base;
  return s;
}

// What a row needs from round trip 1, and the step's real row count.
struct Row {
  uint32_t real_rows;  // rows below it are real: the scan's or the count's tokens cover them
  int32_t req, L;      // the request's req_to_token row (may be out of range) and its kv length
  int32_t raw;         // out_cache_loc of the row
};

template <bool kFixedTokens>
__device__ __forceinline__ Row load_row(const UpdateKernelArgs& a, uint32_t index) {
  const uint32_t token = divide(index, a.by_row_repeat);
  const int32_t count = *a.num_reqs;
  Row row;
  row.raw = index < a.staging_rows ? a.out_cache_loc[index] : 0;
  RowSource src;
  if constexpr (kFixedTokens) {  // the owner without the count; the count decides below
    src.request = divide(token, a.by_tokens);
    src.token = token - src.request * a.tokens_per_request;
  } else {
    const uint32_t reqs = count < 0 ? 0 : static_cast<uint32_t>(count) < a.max_reqs ? count : a.max_reqs;
    src = locate_by_scan(a, reqs, token);
  }
  const bool in_batch = src.request < a.max_reqs;
  row.req = in_batch ? a.req_pool_indices[src.request] : -1;
  const int32_t seq_len = in_batch ? a.seq_lens[src.request] : 0;
  const int32_t extend = kFixedTokens ? static_cast<int32_t>(a.tokens_per_request)
                         : in_batch                ? a.extend_lens[src.request]
                                                   : 0;
  // Unsigned: garbage lengths wrap instead of overflowing (the harness refuses them before launch).
  row.L = static_cast<int32_t>(static_cast<uint32_t>(seq_len) - static_cast<uint32_t>(extend) + src.token + 1);
  if constexpr (kFixedTokens) {
    row.real_rows = count <= 0 ? 0
                    : static_cast<uint32_t>(count) >= a.full_reqs ? a.max_rows
                                                                  : static_cast<uint32_t>(count) * a.rows_per_request;
  } else {
    // Tokens clamped to the staging rows first, so that the product stays below 2^48.
    const int64_t tokens = src.tokens < a.staging_rows ? src.tokens : a.staging_rows;
    const int64_t rows = tokens * a.row_repeat;
    row.real_rows = static_cast<uint32_t>(rows < a.staging_rows ? rows : a.staging_rows);
  }
  return row;
}

// req_to_token at position pos of pool row req, -1 where the inputs have none (bad input that
// the harness refuses before any launch; here it keeps reads in bounds, also for a row that the
// count then turns out not to own). checked_slot then makes it a full slot or -1: apart, so that
// a round trip's loads are all issued before the first check waits for its value (a check between
// two loads made the second wait for the first: reports/gpu/2026-12-03-6265b98-h200-ab-meta-special.json).
__device__ __forceinline__ int32_t load_slot(const UpdateKernelArgs& a, int32_t req, uint32_t pos) {
  if (static_cast<uint32_t>(req) >= a.pool || pos >= a.ctx) return -1;
  return a.req_to_token[static_cast<size_t>(req) * a.ctx + pos];
}

__device__ __forceinline__ int32_t checked_slot(const UpdateKernelArgs& a, int32_t slot) {
  return static_cast<uint32_t>(slot) < a.full_slots ? slot : -1;
}

// The thread's first page start of the round from `first`: it has four consecutive ones, so that
// their page_table values are one 16-byte store and their c128_page_indices values two.
__device__ __forceinline__ uint32_t first_page_start(uint32_t first) { return first + kPagesPerThread * threadIdx.x; }

// Whether no thread of this warp has a page start in the round from `first` (uniform in the warp).
__device__ __forceinline__ bool warp_has_no_pages(uint32_t first, uint32_t page_starts) {
  return first + kPagesPerThread * (threadIdx.x & ~31u) >= page_starts;
}

// req_to_token at the thread's page starts (load_slot's values).
__device__ __forceinline__ void load_pages(const UpdateKernelArgs& a, int32_t req, uint32_t first,
                                           int32_t (&slots)[kPagesPerThread]) {
  const uint32_t c = first_page_start(first);
  const bool none = warp_has_no_pages(first, a.page_starts);
#pragma unroll
  for (int i = 0; i < kPagesPerThread; ++i) slots[i] = !none && c + i < a.page_starts ? load_slot(a, req, (c + i) * kPage) : -1;
}

__device__ __forceinline__ void check_pages(const UpdateKernelArgs& a, int32_t (&slots)[kPagesPerThread]) {
#pragma unroll
  for (int i = 0; i < kPagesPerThread; ++i) slots[i] = checked_slot(a, slots[i]);
}

// Where a built row goes: staging row `row` and/or buffer row `row`.
struct RowSink {
  const Set& s;
  const Set& b;
  uint32_t row;
  bool to_staging, to_buffers;
};

// value[First + i] of i = 0, 1, 2.
template <int First>
__device__ __forceinline__ int32_t pick_scalar(const int32_t (&value)[kScalars], uint32_t i) {
  return i == 0 ? value[First] : i == 1 ? value[First + 1] : value[First + 2];
}

// The one-value fields of row `row`: warp w's lanes 0-2 store fields 3w, 3w + 1 and 3w + 2 of the
// staging row, its lanes 3-5 the same of the buffer row, one store a lane (the switch is uniform
// in each warp).
__device__ __forceinline__ void put_scalars(const RowSink& o, const int32_t (&value)[kScalars]) {
  static_assert(kWarps == 4 && kScalarsPerWarp == 3, "the switch below gives each warp three fields");
  const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const bool staging = lane < kScalarsPerWarp;
  if (lane >= 2 * kScalarsPerWarp || !(staging ? o.to_staging : o.to_buffers)) return;
  const uint32_t i = staging ? lane : lane - kScalarsPerWarp;
  int32_t v;
  switch (warp) {
    case 0: v = pick_scalar<0>(value, i); break;
    case 1: v = pick_scalar<3>(value, i); break;
    case 2: v = pick_scalar<6>(value, i); break;
    default: v = pick_scalar<9>(value, i); break;
  }
  (staging ? o.s : o.b).field[warp * kScalarsPerWarp + i][o.row] = v;
}

// Columns [from, to) of field f's rows, in the staging and/or the buffer set as `o` says, in one
// loop: 16 bytes a store where `vector` (both rows aligned, from and to multiples of 4).
__device__ __forceinline__ void fill_columns(const RowSink& o, Field f, uint32_t from, uint32_t to, bool vector,
                                             int32_t value) {
  int32_t* const s_row = row_of(o.s, f, o.row);
  int32_t* const b_row = row_of(o.b, f, o.row);
  if (vector) {
    const int4 v = make_int4(value, value, value, value);
#pragma unroll 1
    for (uint32_t q = from / 4 + threadIdx.x; q < to / 4; q += kThreads) {
      if (o.to_staging) reinterpret_cast<int4*>(s_row)[q] = v;
      if (o.to_buffers) reinterpret_cast<int4*>(b_row)[q] = v;
    }
  } else {
#pragma unroll 1
    for (uint32_t c = from + threadIdx.x; c < to; c += kThreads) {
      if (o.to_staging) s_row[c] = value;
      if (o.to_buffers) b_row[c] = value;
    }
  }
}

// Columns [c, c + 4) of a row, those below cols: one 16-byte store where `vector` (the row aligned,
// c and cols multiples of 4).
__device__ __forceinline__ void put_quad(int32_t* row, uint32_t c, uint32_t cols, bool vector, int4 v) {
  if (vector) {
    if (c < cols) *reinterpret_cast<int4*>(row + c) = v;
  } else {
    if (c < cols) row[c] = v.x;
    if (c + 1 < cols) row[c + 1] = v.y;
    if (c + 2 < cols) row[c + 2] = v.z;
    if (c + 3 < cols) row[c + 3] = v.w;
  }
}

// page_table columns c and c128_page_indices columns 2c, 2c + 1 of the thread's page starts c, in
// the staging widths.
template <bool kAllAligned>
__device__ __forceinline__ void put_pages(const RowSink& o, int32_t L, uint32_t first, uint32_t page_starts,
                                          const int32_t (&slots)[kPagesPerThread]) {
  if (warp_has_no_pages(first, page_starts)) return;
  const uint32_t c = first_page_start(first);
  const int32_t c128_blocks = L / 128;
  int32_t page[kPagesPerThread], c128[2 * kPagesPerThread];
#pragma unroll
  for (int i = 0; i < kPagesPerThread; ++i) {
    page[i] = slots[i] >= 0 ? slots[i] / kPage : -1;
    const int32_t j = static_cast<int32_t>(2 * (c + i));
    c128[2 * i] = j < c128_blocks && slots[i] >= 0 ? page[i] * 2 : -1;
    c128[2 * i + 1] = j + 1 < c128_blocks && slots[i] >= 0 ? page[i] * 2 + 1 : -1;
  }
  const int4 pages = make_int4(page[0], page[1], page[2], page[3]);
  const int4 c128_lo = make_int4(c128[0], c128[1], c128[2], c128[3]);
  const int4 c128_hi = make_int4(c128[4], c128[5], c128[6], c128[7]);
  // An aligned staging row has a multiple of 4 columns, so the buffer row (at least as wide) has
  // every column of a quad that the staging row has.
  const bool pages_s = aligned_rows<kAllAligned>(o.s, kPageTable);
  const bool pages_b = pages_s && aligned_rows<kAllAligned>(o.b, kPageTable);
  const bool c128_s = aligned_rows<kAllAligned>(o.s, kC128PageIndices);
  const bool c128_b = c128_s && aligned_rows<kAllAligned>(o.b, kC128PageIndices);
  if (o.to_staging) {
    put_quad(row_of(o.s, kPageTable, o.row), c, o.s.page_cols, pages_s, pages);
    put_quad(row_of(o.s, kC128PageIndices, o.row), 2 * c, o.s.c128_cols, c128_s, c128_lo);
    put_quad(row_of(o.s, kC128PageIndices, o.row), 2 * c + 4, o.s.c128_cols, c128_s, c128_hi);
  }
  if (o.to_buffers) {
    put_quad(row_of(o.b, kPageTable, o.row), c, o.s.page_cols, pages_b, pages);
    put_quad(row_of(o.b, kC128PageIndices, o.row), 2 * c, o.s.c128_cols, c128_b, c128_lo);
    put_quad(row_of(o.b, kC128PageIndices, o.row), 2 * c + 4, o.s.c128_cols, c128_b, c128_hi);
  }
}

// Builds `row` in the staging widths (the buffer's wider columns are left to pad_extra_columns).
template <bool kAllAligned>
__device__ __forceinline__ void build_row(const UpdateKernelArgs& a, const Row& row, const RowSink& o) {
  const uint32_t k = threadIdx.x;
  const int32_t L = row.L, p = L - 1;
  // Round trip 2, every load before any check.
  const int32_t swa_loaded = load_slot(a, row.req, static_cast<uint32_t>(L) - 1 - k);
  int32_t slots[kPagesPerThread];
  load_pages(a, row.req, 0, slots);
  // Under it: the one-value fields, from round trip 1's values.
  const int32_t c4_clamp1 = L / 4 > 1 ? L / 4 : 1;
  const int32_t index_topk = static_cast<int32_t>(o.s.index_topk);
  const int32_t scalars[kScalars] = {row.raw,
                                     L,
                                     p,
                                     L < kWindow ? L : kWindow,
                                     L % 4 == 0 ? row.raw / 4 : 0,
                                     p & ~3,
                                     L / 4,
                                     c4_clamp1,
                                     c4_clamp1 < index_topk ? c4_clamp1 : index_topk,
                                     L % 128 == 0 ? row.raw / 128 : 0,
                                     p & ~127,
                                     L / 128 > 1 ? L / 128 : 1};
  put_scalars(o, scalars);
  // Round trip 3.
  const int32_t swa_full = checked_slot(a, swa_loaded);
  const int32_t swa = swa_full >= 0 ? a.full_to_swa[swa_full] : -1;
  // Under it: the page starts' columns.
  check_pages(a, slots);
  put_pages<kAllAligned>(o, L, 0, a.page_starts, slots);
  // Page starts beyond the first round trip's (ctx above 131072): a round trip each.
#pragma unroll 1
  for (uint32_t first = kThreads * kPagesPerThread; first < a.page_starts; first += kThreads * kPagesPerThread) {
    load_pages(a, row.req, first, slots);
    check_pages(a, slots);
    put_pages<kAllAligned>(o, L, first, a.page_starts, slots);
  }
  if (o.to_staging) row_of(o.s, kSwaPageIndices, o.row)[k] = swa;
  if (o.to_buffers) row_of(o.b, kSwaPageIndices, o.row)[k] = swa;
  // The sparse indices (none yet: -1) last, not under round trip 3 (measured faster; see the top).
  const bool c4_aligned = aligned_rows<kAllAligned>(o.s, kC4SparsePageIndices) &&
                          aligned_rows<kAllAligned>(o.b, kC4SparsePageIndices);
  fill_columns(o, kC4SparsePageIndices, 0, o.s.index_topk, c4_aligned, -1);
}

// Spec 6.4's padding in every column of buffer row `row` (a row of no real request); unused by
// the mutants that leave the tail rows.
template <bool kAllAligned>
[[maybe_unused]] __device__ __forceinline__ void pad_row(const Set& b, uint32_t row) {
  constexpr int32_t padding[kScalars] = {0, 1, 0, 1, 0, 0, 0, 1, 1, 0, 0, 1};
  const RowSink o{b, b, row, false, true};
  put_scalars(o, padding);
  row_of(b, kSwaPageIndices, row)[threadIdx.x] = -1;
  fill_columns(o, kC4SparsePageIndices, 0, b.index_topk, aligned_rows<kAllAligned>(b, kC4SparsePageIndices), -1);
  fill_columns(o, kC128PageIndices, 0, b.c128_cols, aligned_rows<kAllAligned>(b, kC128PageIndices), -1);
  fill_columns(o, kPageTable, 0, b.page_cols, aligned_rows<kAllAligned>(b, kPageTable), 0);  // page 0: the write sink
}

// The padding in the columns of buffer row `row` beyond the narrower staging fields.
__device__ __forceinline__ void pad_extra_columns(const Set& b, const Set& s, uint32_t row) {
  const auto pad = [&](Field f, int32_t value) {
    fill_columns(RowSink{b, b, row, false, true}, f, cols_of(s, f), cols_of(b, f), false, value);
  };
  if (s.index_topk < b.index_topk) pad(kC4SparsePageIndices, -1);
  if (s.c128_cols < b.c128_cols) pad(kC128PageIndices, -1);
  if (s.page_cols < b.page_cols) pad(kPageTable, 0);
}

#if defined(DSV4H_MUTANT_META_PADDING_ITEM) || defined(DSV4H_MUTANT_META_FULL_SHAPE_COPY)
// Staging row `row` as memory holds it into buffer row `row`, for a row this launch does not build
// (so no block writes it while it is read).
__device__ void copy_staging_row(const Set& b, const Set& s, uint32_t row) {
  for (int f = 0; f < kFields; ++f) {
    const int32_t* const from = row_of(s, f, row);
    int32_t* const to = row_of(b, f, row);
    for (uint32_t c = threadIdx.x; c < cols_of(s, f); c += kThreads) to[c] = from[c];
  }
}
#endif

// Block `index` builds staging row `index` where it is real and writes buffer row `index`.
// kFixedTokens: tokens_per_request > 0 (no scan of extend_lens); kAllAligned: every vector field's
// rows aligned in both sets; kStaging: the staging set is written (an eager step's temp metadata;
// a replay's update builds straight into the buffers, and its staging set holds only the widths).
// Each variant holds only its own code: the update is short enough that the branches and the
// instruction fetches of the others cost it time.
template <bool kFixedTokens, bool kAllAligned, bool kStaging>
__global__ void __launch_bounds__(kThreads) attn_metadata_update(const UpdateKernelArgs a) {
  schedule_point();
#if defined(DSV4H_MUTANT_NOOP)
  if (a.max_reqs < UINT32_MAX) return;
#endif
  const Set& s = a.staging;
  const Set& b = a.buffers;
  const uint32_t index = blockIdx.x;
  const Row row = load_row<kFixedTokens>(a, index);
  if (index == 0 && threadIdx.x == 0) *a.num_rows = static_cast<int32_t>(row.real_rows);
  // Buffer rows below n are copies of the staging rows of the same index, the rest padding.
#if defined(DSV4H_MUTANT_META_PADDING_ITEM)
  const uint32_t n = a.rows_read_on_host < s.rows && a.rows_read_on_host < b.rows ? a.rows_read_on_host
                                                                                   : (b.rows < s.rows ? b.rows : s.rows);
#elif defined(DSV4H_MUTANT_META_FULL_SHAPE_COPY)
  const uint32_t n = b.rows < s.rows ? b.rows : s.rows;  // every staging row
#else
  const uint32_t n = row.real_rows < b.rows ? row.real_rows : b.rows;
#endif
#if defined(DSV4H_MUTANT_META_ROW0_BROADCAST)
  if (n == 1 && index > 0 && index < b.rows) {  // then real_rows is 1: this block builds no row
    sync_block();  // every thread has read locate_by_scan's shared result before it is reused
    build_row<kAllAligned>(a, load_row<kFixedTokens>(a, 0), RowSink{s, b, index, false, true});
    pad_extra_columns(b, s, index);
    return;
  }
#endif
  const bool copied = index < n;  // so index < real_rows, but in the mutants that copy stale rows
  if (index < row.real_rows && (kStaging || copied)) build_row<kAllAligned>(a, row, RowSink{s, b, index, kStaging, copied});
  if (index >= b.rows) return;
  if (!copied) {
#if !defined(DSV4H_MUTANT_META_TAIL_NOT_RESET) && !defined(DSV4H_MUTANT_META_FULL_SHAPE_COPY)
    pad_row<kAllAligned>(b, index);
#endif
    return;
  }
#if defined(DSV4H_MUTANT_META_PADDING_ITEM) || defined(DSV4H_MUTANT_META_FULL_SHAPE_COPY)
  if (kStaging && index >= row.real_rows) copy_staging_row(b, s, index);  // without staging: left stale
#endif
#if defined(DSV4H_MUTANT_META_EXTRA_COLUMNS_STALE)
  constexpr bool pad_columns = false;
#else
  const bool pad_columns = a.wider;
#endif
  if (pad_columns) pad_extra_columns(b, s, index);
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

// The kernel's view of a set, its sizes checked to fit its 32-bit arithmetic. `may_be_absent`: the
// set may have no fields (every pointer null), its sizes alone counting (its alignment then
// follows from the widths).
Set set_of(const AttnMetadataBuffers& b, const std::string& which, bool may_be_absent = false) {
  require(b.rows >= 0 && b.rows <= (int64_t{1} << 24), which + ".rows must be in [0, 2^24], got " + std::to_string(b.rows));
  require(b.page_cols >= 0 && b.c128_cols >= 0 && b.index_topk >= 0, which + ": widths must be >= 0");
  require(b.page_cols <= kMaxSize && b.c128_cols <= kMaxSize && b.index_topk <= kMaxSize,
          which + ": widths must be <= 2^24 (page_cols " + std::to_string(b.page_cols) + ", c128_cols " +
              std::to_string(b.c128_cols) + ", index_topk " + std::to_string(b.index_topk) + ")");
  Set s{{b.raw_out_loc, b.seq_lens_casual, b.positions_casual, b.swa_topk_lengths, b.c4_out_loc, b.c4_positions,
         b.c4_topk_lengths_raw, b.c4_topk_lengths_clamp1, b.c4_sparse_topk_lengths, b.c128_out_loc, b.c128_positions,
         b.c128_topk_lengths_clamp1, b.page_table, b.swa_page_indices, b.c4_sparse_page_indices, b.c128_page_indices},
        static_cast<uint32_t>(b.rows), static_cast<uint32_t>(b.page_cols), static_cast<uint32_t>(b.c128_cols),
        static_cast<uint32_t>(b.index_topk), 0};
  if (b.rows == 0) return s;
  const int nulls = static_cast<int>(std::count(s.field, s.field + kFields, nullptr));
  require(nulls == 0 || (may_be_absent && nulls == kFields),
          which + (may_be_absent ? ": some fields null, some not (all null: a set not written)" : ": null device pointer"));
  for (int f = 0; f < kFields; ++f) {
    const bool aligned = reinterpret_cast<uintptr_t>(s.field[f]) % 16 == 0 && cols_of(s, f) % 4 == 0;
    s.aligned |= static_cast<uint32_t>(aligned) << f;
  }
  return s;
}

}  // namespace

void launch_attn_metadata_update(const AttnMetadataUpdateArgs& args, hipStream_t stream) {
  const std::string name = "attn_metadata_update: ";
  UpdateKernelArgs k{};
  k.staging = set_of(args.staging, name + "staging", true);
  const bool staging = k.staging.field[0] != nullptr;
  k.buffers = set_of(args.buffers, name + "buffers");
  const auto fits = [&](const char* field, int64_t staging, int64_t buffer) {
    require(staging <= buffer, name + field + " of the staging set is " + std::to_string(staging) +
                                   " wide, wider than its buffer (" + std::to_string(buffer) + ")");
  };
  fits("page_table", args.staging.page_cols, args.buffers.page_cols);
  fits("c128_page_indices", args.staging.c128_cols, args.buffers.c128_cols);
  fits("c4_sparse_page_indices", args.staging.index_topk, args.buffers.index_topk);
  const int64_t int32_max = INT32_MAX;
  require(args.pool >= 1 && args.ctx >= 1 && args.full_slots >= 1 && args.pool <= int32_max &&
              args.ctx <= int32_max && args.full_slots <= int32_max,
          name + "pool, ctx and full_slots must be in [1, 2^31 - 1]");
  require(args.max_reqs >= 0 && args.max_reqs <= int32_max, name + "max_reqs must be in [0, 2^31 - 1]");
  require(args.tokens_per_request >= 0 && args.tokens_per_request <= kMaxSize,
          name + "tokens_per_request must be in [0, 2^24] (0 = from extend_lens), got " +
              std::to_string(args.tokens_per_request));
  require(args.row_repeat >= 1, name + "row_repeat (topk) must be >= 1, got " + std::to_string(args.row_repeat));
  require(args.row_repeat <= kMaxSize, name + "row_repeat (topk) must be <= 2^24, got " + std::to_string(args.row_repeat));
  require(int64_t{kPage} * (args.staging.page_cols - 1) < args.ctx,
          name + "staging.page_cols " + std::to_string(args.staging.page_cols) + " reach beyond ctx " + std::to_string(args.ctx));
  // An empty batch (max_reqs 0) has empty per-request arrays, which the allocator may give as null.
  require(args.req_to_token && args.full_to_swa && args.num_reqs && args.num_rows &&
              (args.staging.rows == 0 || args.out_cache_loc) &&
              (args.max_reqs == 0 || (args.req_pool_indices && args.seq_lens &&
                                      (args.tokens_per_request > 0 || args.extend_lens))),
          name + "null device pointer");
  k.num_reqs = args.num_reqs;
  k.req_pool_indices = args.req_pool_indices;
  k.seq_lens = args.seq_lens;
  k.out_cache_loc = args.out_cache_loc;
  k.by_row_repeat = divider_for(static_cast<uint32_t>(args.row_repeat));
  k.by_tokens = divider_for(static_cast<uint32_t>(args.tokens_per_request > 0 ? args.tokens_per_request : 1));
  k.tokens_per_request = static_cast<uint32_t>(args.tokens_per_request);
  k.max_reqs = static_cast<uint32_t>(args.max_reqs);
  k.row_repeat = static_cast<uint32_t>(args.row_repeat);
  k.staging_rows = k.staging.rows;
  if (args.tokens_per_request > 0) {  // 64-bit here: each product is at most 2^48 before the clamps
    const int64_t per_request = args.tokens_per_request * args.row_repeat, staging = k.staging.rows;
    const int64_t full = std::min<int64_t>(args.max_reqs, (staging + per_request - 1) / per_request);
    k.full_reqs = static_cast<uint32_t>(full);
    k.max_rows = static_cast<uint32_t>(std::min(full * per_request, staging));
    k.rows_per_request = static_cast<uint32_t>(std::min(per_request, staging));
  }
  k.req_to_token = args.req_to_token;
  k.full_to_swa = args.full_to_swa;
  k.pool = static_cast<uint32_t>(args.pool);
  k.ctx = static_cast<uint32_t>(args.ctx);
  k.full_slots = static_cast<uint32_t>(args.full_slots);
  k.page_starts = k.staging.page_cols > (k.staging.c128_cols + 1) / 2 ? k.staging.page_cols : (k.staging.c128_cols + 1) / 2;
  k.extend_lens = args.extend_lens;
  k.num_rows = args.num_rows;
  k.wider = args.staging.page_cols < args.buffers.page_cols || args.staging.c128_cols < args.buffers.c128_cols ||
            args.staging.index_topk < args.buffers.index_topk;
#if defined(DSV4H_MUTANT_META_PADDING_ITEM)
  // Review finding 1: the row count read with .item(), a device-to-host synchronisation.
  int32_t rows_on_host = 0;
  DSV4H_HIP_CHECK(hipMemcpy(&rows_on_host, args.num_rows, sizeof rows_on_host, hipMemcpyDeviceToHost));
  k.rows_read_on_host = rows_on_host < 0 ? 0 : static_cast<uint32_t>(rows_on_host);
#endif
  // A block per row of the larger set, at least one so that the row count is always written.
  const uint32_t rows = k.staging.rows > k.buffers.rows ? k.staging.rows : k.buffers.rows;
  const dim3 grid(rows > 0 ? rows : 1);
  const bool fixed_tokens = k.tokens_per_request > 0;
  const bool all_aligned = (k.staging.aligned & k.buffers.aligned & kVectorFields) == kVectorFields;
  const auto launch = [&](auto kernel) { kernel<<<grid, kThreads, 0, stream>>>(k); };
  if (staging) {
    if (fixed_tokens && all_aligned) launch(attn_metadata_update<true, true, true>);
    else if (fixed_tokens) launch(attn_metadata_update<true, false, true>);
    else if (all_aligned) launch(attn_metadata_update<false, true, true>);
    else launch(attn_metadata_update<false, false, true>);
  } else {
    if (fixed_tokens && all_aligned) launch(attn_metadata_update<true, true, false>);
    else if (fixed_tokens) launch(attn_metadata_update<true, false, false>);
    else if (all_aligned) launch(attn_metadata_update<false, true, false>);
    else launch(attn_metadata_update<false, false, false>);
  }
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
