// What the memory_pool descriptor shares with its GPU binding and the pool's GPU tests: a case's
// typed parameters, its sizes and its store order.
#pragma once

#include <cstdint>
#include <vector>

#include "../params.h"

namespace dsv4h {

enum class StoreOrder : int64_t { ascending = 0, descending = 1, shuffled = 2 };

struct MemoryPoolParams {
  int64_t tokens = 6, layers = 4, first_layer = 0;
  StoreOrder order = StoreOrder::ascending;
  int64_t per_request = 1, history = 600, swa_page = 256, window = 128, full_pages = 32, swa_pages = 16;
  double invalid = 0.1;
  template <typename F>
  void fields(F& f) {
    f("tokens", tokens, "rows of the step (tokens stored)");
    f("layers", layers, "layers of the model, ratios [0, 4, 128, 4, 128, ...] (>= 3)");
    f("first_layer", first_layer, "first layer of this pipeline stage; layers below it do not store");
    f("order", order, "store order of the layers: 0 ascending, 1 descending, 2 shuffled by seed");
    f("per_request", per_request, "tokens a request adds in this step (1 = decode)");
    f("history", history, "most tokens a request holds before the step (drawn uniformly)");
    f("swa_page", swa_page, "tokens per page of the swa pool");
    f("window", window, "sliding window: swa slots a request keeps alive");
    f("full_pages", full_pages, "pages of 256 tokens in the full pool (and c4/c128/indexer pages)");
    f("swa_pages", swa_pages, "pages of the swa pool");
    f("invalid", invalid, "probability that a row's out_cache_loc is -1 (not stored)");
  }
};
using MemoryPoolCase = CaseOf<MemoryPoolParams>;

struct MemoryPoolSizes : MemoryPoolParams {
  int64_t full_slots() const { return full_pages * 256; }
  int64_t swa_slots() const { return swa_pages * swa_page; }
};

// BadInput naming an impossible parameter.
MemoryPoolSizes memory_pool_sizes(const MemoryPoolCase& c);
inline MemoryPoolSizes memory_pool_sizes(const Case& c) { return memory_pool_sizes(MemoryPoolCase(c)); }

// The layers this step stores, in the order they store: [first_layer, layers) ascending,
// descending, or shuffled by the case's seed.
std::vector<int> memory_pool_store_order(const MemoryPoolCase& c);
inline std::vector<int> memory_pool_store_order(const Case& c) { return memory_pool_store_order(MemoryPoolCase(c)); }

}  // namespace dsv4h
