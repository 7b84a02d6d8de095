// Pool layout, layer-to-pool mapping and location arithmetic (spec 5.1, 5.2, 5.4, 5.5).
#include <gtest/gtest.h>

#include <vector>

#include "harness/errors.h"
#include "reference/kv_pool.h"

namespace dsv4h::reference {
namespace {

TEST(KvPool, PagesAsInTheSpecAndWholeWords) {
  EXPECT_EQ(pool_page_bytes(PoolKind::swa, 256), 149760);
  EXPECT_EQ(pool_page_bytes(PoolKind::swa, 128), 74880);
  EXPECT_EQ(pool_page_bytes(PoolKind::c4, 256), 37440);
  EXPECT_EQ(pool_page_bytes(PoolKind::c128, 256), 1728);
  EXPECT_EQ(pool_page_bytes(PoolKind::indexer, 256), 8448);
  for (PoolKind kind : kPoolKinds)
    for (int64_t swa_page : {1, 2, 3, 64, 128, 256}) EXPECT_EQ(pool_page_bytes(kind, swa_page) % 4, 0);
}

TEST(KvPool, TinyConfigLayersMapToTheirBuckets) {
  // compress_ratios [0, 4, 128, 4, 128]: the 2nd ratio-4 layer (3) is layer 1 of the c4 pool.
  EXPECT_EQ(layer_compress_ratio(0), 0);
  EXPECT_EQ(layer_compress_ratio(1), 4);
  EXPECT_EQ(layer_compress_ratio(2), 128);
  EXPECT_EQ(layer_compress_ratio(3), 4);
  EXPECT_EQ(pool_local_layer(PoolKind::c4, 3), 1);
  EXPECT_EQ(pool_local_layer(PoolKind::indexer, 1), 0);
  EXPECT_EQ(pool_local_layer(PoolKind::c128, 4), 1);
  EXPECT_EQ(pool_local_layer(PoolKind::c128, 3), -1);
  EXPECT_EQ(pool_local_layer(PoolKind::c4, 0), -1);
  EXPECT_EQ(pool_local_layer(PoolKind::swa, 4), 4);
  EXPECT_EQ(pool_layers(PoolKind::c4, 4), 2);
  EXPECT_EQ(pool_layers(PoolKind::c128, 4), 1);
  EXPECT_EQ(pool_layers(PoolKind::swa, 4), 4);
}

TEST(KvPool, MinusOneStaysMinusOneAndNeverWrapsAround) {
  const std::vector<int32_t> full_to_swa = {0, 7, 8, 9, 42};
  EXPECT_EQ(translate_swa(full_to_swa, {1, -1, 4, 0, -1}), (std::vector<int32_t>{7, -1, 42, 0, -1}));
}

TEST(KvPool, OutOfRangeLocationIsBadInputNamingRowAndValue) {
  const std::vector<int32_t> full_to_swa = {0, 7, 8};
  try {
    translate_swa(full_to_swa, {1, 3});
    FAIL() << "no error";
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find("out_cache_loc[1] = 3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(translate_swa(full_to_swa, {-2}), BadInput);
}

TEST(KvPool, CompressedLocationsOnlyWhereABlockCompletes) {
  // Page 5 of the full pool, position 4j + 3 in it: the c4 entry j of c4 page 5.
  const int32_t page = 5, j = 9;
  EXPECT_EQ(compressed_out_loc(page * 256 + 4 * j + 3, 256 * 2 + 4 * j + 4, 4), page * 64 + j);
  EXPECT_EQ(compressed_out_loc(page * 256 + 4 * j + 2, 256 * 2 + 4 * j + 3, 4), 0);
  EXPECT_EQ(compressed_out_loc(page * 256 + 255, 256, 128), page * 2 + 1);
  EXPECT_EQ(compressed_out_loc(page * 256 + 127, 128, 128), page * 2);
  EXPECT_EQ(compressed_out_loc(page * 256 + 126, 127, 128), 0);
  EXPECT_EQ(compressed_out_loc(-1, 128, 128), 0);
}

}  // namespace
}  // namespace dsv4h::reference
