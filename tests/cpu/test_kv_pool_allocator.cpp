// The pool's host allocator (spec 5.1, 5.2): slot 0 never handed out, exhaustion leaves everything
// intact, SWA eviction keeps exactly the window, freed pages come back, relocation re-points every
// live token. Also linked with the allocator mutant slot0_handed_out, where it must fail.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "harness/random.h"
#include "reference/kv_pool_allocator.h"

namespace dsv4h::reference {
namespace {

PoolAllocatorConfig small(int64_t full_pages, int64_t swa_pages, int64_t swa_page, int64_t window) {
  PoolAllocatorConfig c;
  c.full_pages = full_pages;
  c.swa_pages = swa_pages;
  c.swa_page = swa_page;
  c.window = window;
  return c;
}

// Every invariant of the model, checked from its public view only.
void check_invariants(const PoolAllocator& a, const std::string& where) {
  const PoolAllocatorConfig& c = a.config();
  std::set<int32_t> full_slots, swa_slots;
  std::vector<bool> owned(a.full_to_swa().size(), false);
  for (int64_t r : a.requests()) {
    const int64_t n = a.length(r), start = n > c.window ? n - c.window : 0;
    for (int64_t pos = 0; pos < n; ++pos) {
      const int32_t full = a.full_loc(r, pos), swa = a.swa_loc(r, pos);
      ASSERT_GE(full, 256) << where << ": request " << r << " position " << pos << " holds full page 0";
      ASSERT_TRUE(full_slots.insert(full).second) << where << ": full slot " << full << " owned twice";
      owned[static_cast<size_t>(full)] = true;
      if (pos < start) {
        ASSERT_EQ(swa, 0) << where << ": request " << r << " position " << pos << " is older than the window";
      } else {
        ASSERT_GE(swa, c.swa_page) << where << ": request " << r << " position " << pos << " holds swa page 0";
        ASSERT_LT(swa, c.swa_pages * c.swa_page) << where;
        ASSERT_TRUE(swa_slots.insert(swa).second) << where << ": swa slot " << swa << " owned twice";
      }
    }
  }
  for (size_t s = 0; s < owned.size(); ++s)
    if (!owned[s]) {
      ASSERT_EQ(a.full_to_swa()[s], 0) << where << ": unowned full slot " << s << " maps to swa";
    }
}

TEST(KvPoolAllocator, SlotZeroIsNeverHandedOut) {
  PoolAllocator a(small(4, 4, 64, 128));
  const int64_t r = a.add_request();
  const std::vector<int32_t> locs = a.extend(r, 3 * 256);
  for (int32_t loc : locs) ASSERT_GE(loc, 256) << "full slot " << loc << " is on page 0";
  for (int64_t pos = 3 * 256 - 128; pos < 3 * 256; ++pos) ASSERT_GE(a.swa_loc(r, pos), 64) << "position " << pos;
  EXPECT_THROW(a.extend(r, 1), PoolExhausted);  // pages 1..3 are all there is
}

TEST(KvPoolAllocator, ExhaustionIsAClearErrorThatChangesNothing) {
  PoolAllocator a(small(3, 3, 64, 100));
  const int64_t r0 = a.add_request(), r1 = a.add_request();
  a.extend(r0, 300);
  const std::vector<int32_t> before = a.full_to_swa();
  const int64_t free_full = a.free_full_pages(), free_swa = a.free_swa_pages();
  try {
    a.extend(r1, 257);
    FAIL() << "no error";
  } catch (const PoolExhausted& e) {
    EXPECT_NE(std::string(e.what()).find("full pool exhausted: request 1 needs 2 more pages of 256 tokens, 0 free of 3"),
              std::string::npos) << e.what();
  }
  EXPECT_EQ(a.full_to_swa(), before);
  EXPECT_EQ(a.free_full_pages(), free_full);
  EXPECT_EQ(a.free_swa_pages(), free_swa);
  EXPECT_EQ(a.length(r1), 0);
  a.free_request(r0);
  a.extend(r1, 100);  // swa: 2 pages of 64 needed, 2 free
  const int64_t r2 = a.add_request();
  const std::vector<int32_t> mid = a.full_to_swa();
  try {
    a.extend(r2, 1);
    FAIL() << "no error";
  } catch (const PoolExhausted& e) {
    EXPECT_NE(std::string(e.what()).find("swa pool exhausted"), std::string::npos) << e.what();
  }
  EXPECT_EQ(a.full_to_swa(), mid);
  EXPECT_EQ(a.length(r2), 0);
  EXPECT_EQ(a.length(r1), 100);
  check_invariants(a, "after exhaustion");
}

TEST(KvPoolAllocator, SwaKeepsExactlyTheWindowAndFreesOlderPages) {
  // 500 tokens would need 32 pages of 16 without eviction; a window of 40 touches at most 4.
  PoolAllocator a(small(8, 5, 16, 40));
  const int64_t r = a.add_request();
  a.extend(r, 10);
  for (int step = 0; step < 500; ++step) {
    a.decode(r);
    check_invariants(a, "decode step " + std::to_string(step));
  }
  EXPECT_EQ(a.length(r), 510);
}

TEST(KvPoolAllocator, FreedPagesAreReusable) {
  PoolAllocator a(small(5, 5, 32, 64));
  const int64_t free_full = a.free_full_pages(), free_swa = a.free_swa_pages();
  for (int round = 0; round < 5; ++round) {
    const int64_t r = a.add_request();
    a.extend(r, 4 * 256);
    a.free_request(r);
    EXPECT_EQ(a.free_full_pages(), free_full);
    EXPECT_EQ(a.free_swa_pages(), free_swa);
    for (int32_t s : a.full_to_swa()) ASSERT_EQ(s, 0);
  }
}

TEST(KvPoolAllocator, RelocationRePointsEveryLiveToken) {
  PoolAllocator a(small(4, 9, 32, 64));
  const int64_t r = a.add_request();
  a.extend(r, 300);
  std::vector<int32_t> before;
  for (int64_t pos = 300 - 64; pos < 300; ++pos) before.push_back(a.swa_loc(r, pos));
  a.relocate_swa(r);
  check_invariants(a, "after relocation");
  for (int64_t pos = 300 - 64; pos < 300; ++pos)
    for (int32_t old : before) ASSERT_NE(a.swa_loc(r, pos), old) << "position " << pos << " kept an old slot";
}

TEST(KvPoolAllocator, UnknownRequestIsBadInputNamingTheId) {
  PoolAllocator a(small(2, 2, 64, 64));
  try {
    a.extend(17, 1);
    FAIL() << "no error";
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find("request id 17 was never allocated"), std::string::npos) << e.what();
  }
  const int64_t r = a.add_request();
  a.free_request(r);
  EXPECT_THROW(a.decode(r), BadInput);
  EXPECT_THROW(PoolAllocator(small(0, 2, 64, 64)), BadInput);
}

TEST(KvPoolAllocator, RandomOperationsKeepEveryInvariant) {
  const uint64_t seed = 4242;
  Rng rng(seed);
  PoolAllocator a(small(12, 10, 64, 128));
  for (int op = 0; op < 400; ++op) {
    const std::vector<int64_t> live = a.requests();
    const int64_t pick = live.empty() ? -1 : live[static_cast<size_t>(rng.integer(0, static_cast<int64_t>(live.size()) - 1))];
    const int64_t kind = live.empty() ? 0 : rng.integer(0, 4);
    try {
      if (kind == 0) a.add_request();
      else if (kind == 1) a.extend(pick, rng.integer(0, 300));
      else if (kind == 2) a.decode(pick);
      else if (kind == 3 && rng.integer(0, 3) == 0) a.free_request(pick);
      else a.relocate_swa(pick);
    } catch (const PoolExhausted&) {
      // a full pool is a normal outcome of a random sequence; invariants must still hold
    }
    check_invariants(a, "seed " + std::to_string(seed) + " op " + std::to_string(op));
  }
}

}  // namespace
}  // namespace dsv4h::reference
