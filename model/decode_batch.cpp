// The host side of the model's batched decode: see decode_batch.h.
#include "decode_batch.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace dsv4h::model {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

}  // namespace

std::vector<int64_t> decode_buckets(int64_t max_batch) {
  if (max_batch < 1) throw std::invalid_argument("decode_buckets: max_batch must be >= 1, got " + str(max_batch));
  std::vector<int64_t> buckets;
  for (int64_t b : {1, 2, 4, 8})
    if (b < max_batch) buckets.push_back(b);
  for (int64_t b = 16; b < max_batch; b += 8) buckets.push_back(b);
  buckets.push_back(max_batch);
  return buckets;
}

int64_t bucket_for(const std::vector<int64_t>& buckets, int64_t n) {
  const auto it = std::find_if(buckets.begin(), buckets.end(), [&](int64_t b) { return b >= n; });
  if (n < 1 || it == buckets.end())
    throw std::invalid_argument("bucket_for: no captured bucket holds a batch of " + str(n) + " rows (largest " +
                                (buckets.empty() ? std::string("none") : str(buckets.back())) + ")");
  return *it;
}

SharedPoolLayout SharedPoolLayout::for_requests(int64_t requests, int64_t max_tokens) {
  if (requests < 1) throw std::invalid_argument("SharedPoolLayout: requests must be >= 1, got " + str(requests));
  if (max_tokens < 1) throw std::invalid_argument("SharedPoolLayout: max_tokens must be >= 1, got " + str(max_tokens));
  return {requests, (max_tokens + kFullPageTokens - 1) / kFullPageTokens * kFullPageTokens};
}

int32_t SharedPoolLayout::full_slot(int64_t request, int64_t position) const {
  if (request < 0 || request >= requests) throw std::out_of_range("SharedPoolLayout: request " + str(request) + " outside [0, " + str(requests) + ")");
  if (position < 0 || position >= ctx) throw std::out_of_range("SharedPoolLayout: position " + str(position) + " outside [0, " + str(ctx) + ")");
  return static_cast<int32_t>((first_page(request) + position / kFullPageTokens) * kFullPageTokens + position % kFullPageTokens);
}

std::vector<int32_t> SharedPoolLayout::req_to_token() const {
  std::vector<int32_t> table(static_cast<size_t>(requests * ctx));
  for (int64_t q = 0; q < requests; ++q)
    for (int64_t p = 0; p < ctx; ++p) table[static_cast<size_t>(q * ctx + p)] = full_slot(q, p);
  return table;
}

DecodeStepInputs decode_step_inputs(const std::vector<DecodeRow>& rows, int64_t bucket, const SharedPoolLayout& layout) {
  const int64_t n = static_cast<int64_t>(rows.size());
  if (n > bucket) throw std::invalid_argument("decode_step_inputs: " + str(n) + " rows do not fit bucket " + str(bucket));
  DecodeStepInputs in;
  in.real = n;
  const auto rows_of = [&](int32_t padding) { return std::vector<int32_t>(static_cast<size_t>(bucket), padding); };
  in.tokens = rows_of(0), in.next_tokens = rows_of(0), in.req_pool_indices = rows_of(0), in.seq_lens = rows_of(1);
  in.out_cache_loc = rows_of(0), in.extend_lens = rows_of(0), in.ring_index = rows_of(0);
  for (int64_t i = 0; i < n; ++i) {
    const DecodeRow& r = rows[static_cast<size_t>(i)];
    const std::string row = "decode_step_inputs: row " + str(i) + ": ";
    if (r.token < 0 || r.token > INT32_MAX) throw std::invalid_argument(row + "token " + str(r.token) + " is not an int32 id");
    const size_t k = static_cast<size_t>(i);
    try {
      in.out_cache_loc[k] = layout.full_slot(r.request, r.position);
    } catch (const std::out_of_range& e) {
      throw std::invalid_argument(row + e.what());
    }
    in.tokens[k] = static_cast<int32_t>(r.token);
    in.next_tokens[k] = static_cast<int32_t>(std::max<int64_t>(r.next_token, 0));
    in.req_pool_indices[k] = static_cast<int32_t>(r.request);
    in.seq_lens[k] = static_cast<int32_t>(r.position + 1);
    in.extend_lens[k] = 1;
    in.ring_index[k] = static_cast<int32_t>(1 + r.request);  // ring 0 is the padding's
  }
  return in;
}

}  // namespace dsv4h::model
