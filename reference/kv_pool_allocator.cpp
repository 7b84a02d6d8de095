// Built twice: as the allocator, and with DSV4H_MUTANT_POOL_SLOT0_HANDED_OUT as the mutant that
// hands out page 0 (the sink); the CPU allocator tests must catch it (tests/CMakeLists.txt).
#include "kv_pool_allocator.h"

#include <algorithm>
#include <string>

#include "kv_pool.h"

namespace dsv4h::reference {
namespace {

#if defined(DSV4H_MUTANT_POOL_SLOT0_HANDED_OUT)
constexpr int64_t kFirstPage = 0;
#else
constexpr int64_t kFirstPage = 1;
#endif

std::string str(int64_t v) { return std::to_string(v); }

}  // namespace

PoolAllocator::PoolAllocator(const PoolAllocatorConfig& config) : config_(config) {
  const auto bad = [](const std::string& why) { return BadInput("memory_pool allocator: " + why); };
  if (config.full_pages < 1) throw bad("full_pages must be >= 1 (page 0 is the sink), got " + str(config.full_pages));
  if (config.swa_pages < 1) throw bad("swa_pages must be >= 1 (page 0 is the sink), got " + str(config.swa_pages));
  if (config.swa_page < 1) throw bad("swa_page must be >= 1, got " + str(config.swa_page));
  if (config.window < 1) throw bad("window must be >= 1, got " + str(config.window));
  if (config.full_pages * kFullPageTokens > INT32_MAX || config.swa_pages * config.swa_page > INT32_MAX)
    throw bad("pools above 2^31 slots do not fit int32 locations");
  for (int64_t p = kFirstPage; p < config.full_pages; ++p) free_full_.insert(p);
  for (int64_t p = kFirstPage; p < config.swa_pages; ++p) free_swa_.insert(p);
  full_to_swa_.assign(static_cast<size_t>(config.full_pages * kFullPageTokens), 0);
}

int64_t PoolAllocator::take(std::set<int64_t>& free_pages) {
  const int64_t page = *free_pages.begin();
  free_pages.erase(free_pages.begin());
  return page;
}

const PoolAllocator::Request& PoolAllocator::get(int64_t request) const {
  auto it = requests_.find(request);
  if (it == requests_.end()) throw BadInput("memory_pool allocator: request id " + str(request) + " was never allocated or is freed");
  return it->second;
}

int64_t PoolAllocator::add_request() {
  requests_[next_id_] = Request{};
  return next_id_++;
}

std::vector<int32_t> PoolAllocator::extend(int64_t request, int64_t n) {
  const Request& r = get(request);
  if (n < 0) throw BadInput("memory_pool allocator: extend by n = " + str(n) + " tokens; n must be >= 0");
  const int64_t new_length = r.length + n;
  const int64_t full_needed = (new_length + kFullPageTokens - 1) / kFullPageTokens - static_cast<int64_t>(r.full_pages.size());
  if (full_needed > free_full_pages())
    throw PoolExhausted("memory_pool allocator: full pool exhausted: request " + str(request) + " needs " +
                        str(full_needed) + " more pages of 256 tokens, " + str(free_full_pages()) + " free of " +
                        str(config_.full_pages));
  // SWA pages the new window touches, and those of the old window it no longer touches.
  const int64_t P = config_.swa_page, start = window_start(new_length);
  std::set<int64_t> wanted;  // the SWA page indices of the new positions inside the window
  const int64_t first_new = std::max(start, r.length);
  for (int64_t idx = first_new / P; first_new < new_length && idx <= (new_length - 1) / P; ++idx) wanted.insert(idx);
  int64_t swa_needed = 0, swa_released = 0;
  for (int64_t idx : wanted) swa_needed += r.swa_pages.count(idx) == 0;
  for (const auto& [idx, page] : r.swa_pages) swa_released += (idx + 1) * P <= start;
  if (swa_needed > free_swa_pages() + swa_released)
    throw PoolExhausted("memory_pool allocator: swa pool exhausted: request " + str(request) + " needs " +
                        str(swa_needed) + " more pages of " + str(P) + " tokens, " +
                        str(free_swa_pages() + swa_released) + " free of " + str(config_.swa_pages));

  Request& w = requests_.at(request);
  for (int64_t pos = window_start(w.length); pos < start && pos < w.length; ++pos)  // evict
    full_to_swa_[static_cast<size_t>(full_loc(request, pos))] = 0;
  for (auto it = w.swa_pages.begin(); it != w.swa_pages.end();) {
    if ((it->first + 1) * P <= start) {
      free_swa_.insert(it->second);
      it = w.swa_pages.erase(it);
    } else {
      ++it;
    }
  }
  for (int64_t i = 0; i < full_needed; ++i) w.full_pages.push_back(take(free_full_));
  for (int64_t idx : wanted)
    if (w.swa_pages.count(idx) == 0) w.swa_pages[idx] = take(free_swa_);
  const int64_t old_length = w.length;
  w.length = new_length;
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (int64_t pos = old_length; pos < new_length; ++pos) {
    const int32_t loc = full_loc(request, pos);
    out[static_cast<size_t>(pos - old_length)] = loc;
    full_to_swa_[static_cast<size_t>(loc)] = pos >= start ? static_cast<int32_t>(w.swa_pages.at(pos / P) * P + pos % P) : 0;
  }
  return out;
}

void PoolAllocator::free_request(int64_t request) {
  const Request& r = get(request);
  for (int64_t pos = 0; pos < r.length; ++pos) full_to_swa_[static_cast<size_t>(full_loc(request, pos))] = 0;
  for (int64_t page : r.full_pages) free_full_.insert(page);
  for (const auto& [idx, page] : r.swa_pages) free_swa_.insert(page);
  requests_.erase(request);
}

void PoolAllocator::relocate_swa(int64_t request) {
  const Request& r = get(request);
  const int64_t held = static_cast<int64_t>(r.swa_pages.size());
  if (held > free_swa_pages())
    throw PoolExhausted("memory_pool allocator: swa pool exhausted: relocating request " + str(request) + " needs " +
                        str(held) + " free pages, " + str(free_swa_pages()) + " free of " + str(config_.swa_pages));
  Request& w = requests_.at(request);
  std::vector<int64_t> old_pages;
  for (auto& [idx, page] : w.swa_pages) {
    old_pages.push_back(page);
    page = take(free_swa_);
  }
  for (int64_t page : old_pages) free_swa_.insert(page);
  const int64_t P = config_.swa_page;
  for (int64_t pos = window_start(w.length); pos < w.length; ++pos)
    full_to_swa_[static_cast<size_t>(full_loc(request, pos))] = static_cast<int32_t>(w.swa_pages.at(pos / P) * P + pos % P);
}

std::vector<int64_t> PoolAllocator::requests() const {
  std::vector<int64_t> ids;
  for (const auto& [id, r] : requests_) ids.push_back(id);
  return ids;
}

int64_t PoolAllocator::length(int64_t request) const { return get(request).length; }

int32_t PoolAllocator::full_loc(int64_t request, int64_t position) const {
  const Request& r = get(request);
  if (position < 0 || position >= static_cast<int64_t>(r.full_pages.size()) * kFullPageTokens)
    throw BadInput("memory_pool allocator: position " + str(position) + " of request " + str(request) +
                   " is outside its pages");
  return static_cast<int32_t>(r.full_pages[static_cast<size_t>(position / kFullPageTokens)] * kFullPageTokens +
                              position % kFullPageTokens);
}

int32_t PoolAllocator::swa_loc(int64_t request, int64_t position) const {
  return full_to_swa_[static_cast<size_t>(full_loc(request, position))];
}

}  // namespace dsv4h::reference
