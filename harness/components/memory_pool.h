// What the memory_pool descriptor and its GPU binding share: a case's sizes and its store order.
#pragma once

#include <cstdint>
#include <vector>

#include "../case_spec.h"

namespace dsv4h {

struct MemoryPoolSizes {
  int64_t tokens, layers, first_layer, order, per_request, history, swa_page, window, full_pages, swa_pages;
  double invalid;
  int64_t full_slots() const { return full_pages * 256; }
  int64_t swa_slots() const { return swa_pages * swa_page; }
};

MemoryPoolSizes memory_pool_sizes(const Case& c);  // BadInput naming an impossible parameter

// The layers this step stores, in the order they store: [first_layer, layers) ascending (order 0),
// descending (1), or shuffled by the case's seed (2).
std::vector<int> memory_pool_store_order(const Case& c);

}  // namespace dsv4h
