// The host allocator of the DeepSeek-V4 KV memory pool (spec 5.1, 5.2), as a plain model: requests
// own full-cache pages of 256 tokens; the SWA pool keeps only the last `window` tokens of each
// request alive; `full_to_swa` maps every full slot to its SWA slot, 0 (the dummy) where none.
//
// Rules the model fixes [INF where the spec is silent]:
// - Page 0 of the full and of the SWA pool is never handed out, so slot 0 (the sink) of every pool,
//   the compressed ones included (their slots derive from full pages), never holds live data.
// - After every operation a request of length n has SWA slots exactly for positions
//   [max(0, n - window), n): an extend allocates SWA only for the new positions inside that window
//   and evicts (maps to 0, frees pages no longer touched) the ones that fell out of it. A forward
//   step therefore stores out-of-window tokens of a long prefill into the sink.
// - Free pages are handed out lowest first, so that a run is reproducible.
// - Running out of pages throws PoolExhausted before anything changes.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "errors.h"

namespace dsv4h::reference {

class PoolExhausted : public BadInput {
 public:
  using BadInput::BadInput;
};

struct PoolAllocatorConfig {
  int64_t full_pages = 8;   // pages of 256 tokens, page 0 included
  int64_t swa_pages = 8;    // pages of swa_page tokens, page 0 included
  int64_t swa_page = 256;
  int64_t window = 128;
};

class PoolAllocator {
 public:
  explicit PoolAllocator(const PoolAllocatorConfig& config);  // BadInput naming an impossible field

  int64_t add_request();  // a new empty request; ids are never reused
  // Appends n tokens; returns their full slots (the step's out_cache_loc rows).
  std::vector<int32_t> extend(int64_t request, int64_t n);
  std::vector<int32_t> decode(int64_t request) { return extend(request, 1); }
  void free_request(int64_t request);
  // Moves the request's live SWA tokens to freshly allocated pages and frees the old ones (as
  // eviction re-pointing or a cache load-back does): every live entry of full_to_swa changes.
  void relocate_swa(int64_t request);

  const PoolAllocatorConfig& config() const { return config_; }
  const std::vector<int32_t>& full_to_swa() const { return full_to_swa_; }
  std::vector<int64_t> requests() const;
  int64_t length(int64_t request) const;
  int32_t full_loc(int64_t request, int64_t position) const;
  int32_t swa_loc(int64_t request, int64_t position) const;  // 0 once the position left the window
  int64_t free_full_pages() const { return static_cast<int64_t>(free_full_.size()); }
  int64_t free_swa_pages() const { return static_cast<int64_t>(free_swa_.size()); }

 private:
  struct Request {
    int64_t length = 0;
    std::vector<int64_t> full_pages;
    std::map<int64_t, int64_t> swa_pages;  // position / swa_page -> SWA page id
  };
  const Request& get(int64_t request) const;  // BadInput naming an unknown id
  int64_t window_start(int64_t length) const { return length > config_.window ? length - config_.window : 0; }
  static int64_t take(std::set<int64_t>& free_pages);

  PoolAllocatorConfig config_;
  std::set<int64_t> free_full_, free_swa_;
  std::vector<int32_t> full_to_swa_;
  std::map<int64_t, Request> requests_;
  int64_t next_id_ = 0;
};

}  // namespace dsv4h::reference
