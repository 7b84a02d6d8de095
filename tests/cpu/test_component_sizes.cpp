// Sizes no run can hold are refused up front, naming the parameter: before this, products of
// sizes overflowed (bs * topk wrapped to 0 rows and the case passed; swa_pages * swa_page wrapped
// and the allocator built 2^52 pages) or the host ran out of memory minutes later.
#include <gtest/gtest.h>

#include <chrono>

#include "harness/component.h"
#include "harness/errors.h"

namespace dsv4h {
namespace {

struct ImpossibleCase {
  const char* text;
  const char* mentions;
};

const ImpossibleCase kImpossible[] = {
    {"attn_metadata(bs=65536,real=1,mode=3,topk=281474976710656,pool=1,ctx=256)", "topk must be in [1, 2^20]"},
    {"attn_metadata(bs=1,real=1,pool=1099511627776,ctx=16777216)", "pool must be in [1, 2^28]"},
    {"attn_metadata(bs=2097152,real=0)", "bs must be in [0, 2^20]"},
    {"attn_metadata(bs=8,index_topk=9000000000000000)", "index_topk must be a multiple of 64 in [64, 2^24]"},
    {"attn_metadata(bs=1024,mode=2,extend=1024,ctx=65536,pool=1024)", "above 2^28 values"},
    {"attn_metadata(bs=1,pool=16,ctx=16777216)", "pool * ctx above 2^26 slots"},
    {"mtp_expand(bs=65536,topk=281474976710656)", "topk must be in [1, 2^20]"},
    {"mtp_expand(bs=2048,topk=1024,ctx=256)", "bs * topk above 2^20 rows"},
    {"mtp_expand(bs=4096,topk=4,ctx=16777216)", "above 2^28 values"},
    {"memory_pool(swa_pages=4503599627370496,swa_page=4096)", "swa_pages must be in [1, 2^20]"},
    {"memory_pool(tokens=0,layers=4294967299)", "layers must be in [3, 1024]"},
    {"memory_pool(tokens=699050,layers=3,per_request=699050,history=0)", "tokens * layers above 2^18 rows"},
    {"memory_pool(tokens=1,layers=3,full_pages=1048576)", "above 2^30"},
    {"filtered_silu_mul(rows=1,inter=1073741824)", "inter must be in [1, 2^20]"},
    {"filtered_silu_mul(rows=200000000,inter=1)", "rows * 2 * inter above 2^28 elements"},
    {"filtered_silu_mul(adversarial=2)", "adversarial must be 0 or 1"},
};

TEST(ComponentSizes, ImpossibleSizesAreRefusedNamingTheParameter) {
  for (const ImpossibleCase& impossible : kImpossible) {
    const auto start = std::chrono::steady_clock::now();
    const Case c = parse_case(impossible.text);
    try {
      registry().get(c.component()).make_inputs(c);
      ADD_FAILURE() << "accepted " << impossible.text;
    } catch (const BadInput& e) {
      EXPECT_NE(std::string(e.what()).find(impossible.mentions), std::string::npos) << impossible.text << ": " << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1)) << impossible.text << " was not refused up front";
  }
}

}  // namespace
}  // namespace dsv4h
