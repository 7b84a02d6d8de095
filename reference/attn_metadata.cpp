// The builder follows the pseudo-code of spec 6.2 row by row, with no shortcut of its own.
#include "attn_metadata.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace dsv4h::reference {

const std::array<MetadataField, 16> kMetadataFields = {{
    {"page_table", &AttnMetadata::page_table, 0},
    {"raw_out_loc", &AttnMetadata::raw_out_loc, 0},
    {"seq_lens_casual", &AttnMetadata::seq_lens_casual, 1},
    {"positions_casual", &AttnMetadata::positions_casual, 0},
    {"swa_page_indices", &AttnMetadata::swa_page_indices, -1},
    {"swa_topk_lengths", &AttnMetadata::swa_topk_lengths, 1},
    {"c4_out_loc", &AttnMetadata::c4_out_loc, 0},
    {"c4_positions", &AttnMetadata::c4_positions, 0},
    {"c4_topk_lengths_raw", &AttnMetadata::c4_topk_lengths_raw, 0},
    {"c4_topk_lengths_clamp1", &AttnMetadata::c4_topk_lengths_clamp1, 1},
    {"c4_sparse_topk_lengths", &AttnMetadata::c4_sparse_topk_lengths, 1},
    {"c4_sparse_page_indices", &AttnMetadata::c4_sparse_page_indices, -1},
    {"c128_out_loc", &AttnMetadata::c128_out_loc, 0},
    {"c128_positions", &AttnMetadata::c128_positions, 0},
    {"c128_topk_lengths_clamp1", &AttnMetadata::c128_topk_lengths_clamp1, 1},
    {"c128_page_indices", &AttnMetadata::c128_page_indices, -1},
}};

namespace {

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument("attn_metadata: " + what); }

int32_t at(const IndexMatrix& m, int64_t i, const char* name) {
  if (i < 0 || i >= m.rows()) bad(std::string(name) + " has no row " + std::to_string(i));
  return m(i, 0);
}

}  // namespace

int64_t field_columns(const MetadataField& field, const MetadataWidths& widths) {
  const std::string name = field.name;
  if (name == "page_table") return widths.page_cols;
  if (name == "swa_page_indices") return kSwaWindow;
  if (name == "c4_sparse_page_indices") return widths.index_topk;
  if (name == "c128_page_indices") return widths.c128_cols;
  return 1;
}

MetadataWidths MetadataWidths::for_seq_len(int64_t max_seq_len, int64_t index_topk) {
  const int64_t page_cols = (max_seq_len + kPageSize - 1) / kPageSize;
  return {page_cols, (2 * page_cols + 63) / 64 * 64, index_topk};
}

int64_t query_rows(const StepInputs& in) {
  int64_t tokens = 0;
  for (int64_t r = 0; r < in.num_reqs; ++r) tokens += at(in.extend_lens, r, "extend_lens");
  return tokens * in.row_repeat;
}

AttnMetadata padding_metadata(int64_t rows, const MetadataWidths& widths) {
  AttnMetadata m;
  for (const MetadataField& f : kMetadataFields)
    m.*f.member = IndexMatrix::Constant(rows, field_columns(f, widths), f.padding);
  return m;
}

AttnMetadata build_attn_metadata(const StepInputs& in, const MetadataWidths& widths) {
  AttnMetadata m = padding_metadata(query_rows(in), widths);
  const int64_t ctx = in.req_to_token.cols();
  const auto full_slot = [&](int32_t req, int64_t pos) {
    if (req < 0 || req >= in.req_to_token.rows()) bad("req_pool_indices value " + std::to_string(req) + " outside the pool");
    if (pos >= ctx) bad("position " + std::to_string(pos) + " beyond req_to_token's " + std::to_string(ctx) + " columns");
    return in.req_to_token(req, pos);
  };
  int64_t row = 0;
  for (int64_t r = 0; r < in.num_reqs; ++r) {
    const int32_t req = at(in.req_pool_indices, r, "req_pool_indices");
    const int64_t extend = at(in.extend_lens, r, "extend_lens");
    const int64_t prefix = at(in.seq_lens, r, "seq_lens") - extend;
    if (extend < 1 || prefix < 0) bad("request " + std::to_string(r) + " needs 1 <= extend_lens <= seq_lens");
    for (int64_t i = 0; i < extend; ++i) {
      for (int64_t copy = 0; copy < in.row_repeat; ++copy, ++row) {
        const int64_t L = prefix + i + 1, p = L - 1;
        const int32_t raw = at(in.out_cache_loc, row, "out_cache_loc");
        m.seq_lens_casual(row, 0) = static_cast<int32_t>(L);
        m.positions_casual(row, 0) = static_cast<int32_t>(p);
        m.raw_out_loc(row, 0) = raw;
        for (int64_t k = 0; k < kSwaWindow; ++k)
          m.swa_page_indices(row, k) = p - k >= 0 ? at(in.full_to_swa, full_slot(req, p - k), "full_to_swa") : -1;
        m.swa_topk_lengths(row, 0) = static_cast<int32_t>(std::min<int64_t>(L, kSwaWindow));
        for (int64_t c = 0; c < widths.page_cols; ++c)
          m.page_table(row, c) = static_cast<int32_t>(full_slot(req, kPageSize * c) / kPageSize);
        m.c4_out_loc(row, 0) = L % 4 == 0 ? raw / 4 : 0;
        m.c4_positions(row, 0) = static_cast<int32_t>(p & ~int64_t{3});
        m.c4_topk_lengths_raw(row, 0) = static_cast<int32_t>(L / 4);
        m.c4_topk_lengths_clamp1(row, 0) = static_cast<int32_t>(std::max<int64_t>(L / 4, 1));
        m.c4_sparse_topk_lengths(row, 0) = std::min<int32_t>(m.c4_topk_lengths_clamp1(row, 0), static_cast<int32_t>(widths.index_topk));
        m.c128_out_loc(row, 0) = L % 128 == 0 ? raw / 128 : 0;
        m.c128_positions(row, 0) = static_cast<int32_t>(p & ~int64_t{127});
        m.c128_topk_lengths_clamp1(row, 0) = static_cast<int32_t>(std::max<int64_t>(L / 128, 1));
        for (int64_t j = 0; j < widths.c128_cols; ++j) {
          if (j >= L / 128) continue;
          if (j / 2 >= widths.page_cols) bad("seq_len " + std::to_string(L) + " longer than the metadata's max_seq_len");
          m.c128_page_indices(row, j) = static_cast<int32_t>(m.page_table(row, j / 2) * 2 + j % 2);
        }
      }
    }
  }
  return m;
}

void copy_into(AttnMetadata& buffers, const AttnMetadata& temp) {
  const int64_t n = temp.rows(), bucket = buffers.rows();
  if (n > bucket) bad("copy_into: " + std::to_string(n) + " rows into a buffer set of " + std::to_string(bucket));
  for (const MetadataField& f : kMetadataFields) {
    IndexMatrix& dst = buffers.*f.member;
    const IndexMatrix& src = temp.*f.member;
    if (src.cols() > dst.cols())
      bad(std::string("copy_into: ") + f.name + " is " + std::to_string(src.cols()) + " wide, its buffer " +
          std::to_string(dst.cols()));
    dst.setConstant(f.padding);
    dst.topLeftCorner(n, src.cols()) = src;
  }
}

}  // namespace dsv4h::reference
