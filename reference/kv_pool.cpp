#include "kv_pool.h"

#include "errors.h"
#include "kv_cache_indexer.h"
#include "kv_cache_model1.h"

namespace dsv4h::reference {

std::string pool_kind_name(PoolKind kind) {
  switch (kind) {
    case PoolKind::swa: return "swa";
    case PoolKind::c4: return "c4";
    case PoolKind::c128: return "c128";
    case PoolKind::indexer: return "indexer";
  }
  return "?";
}

int layer_compress_ratio(int layer) { return layer == 0 ? 0 : (layer % 2 == 1 ? 4 : 128); }

int pool_local_layer(PoolKind kind, int layer) {
  const int ratio = layer_compress_ratio(layer);
  switch (kind) {
    case PoolKind::swa: return layer;
    case PoolKind::c4:
    case PoolKind::indexer: return ratio == 4 ? layer / 2 : -1;          // layers 1, 3, 5, ...
    case PoolKind::c128: return ratio == 128 ? layer / 2 - 1 : -1;       // layers 2, 4, 6, ...
  }
  return -1;
}

int pool_layers(PoolKind kind, int layers) {
  int n = 0;
  for (int layer = 0; layer < layers; ++layer) n += pool_local_layer(kind, layer) >= 0;
  return n;
}

int64_t pool_tokens_per_page(PoolKind kind, int64_t swa_page) {
  switch (kind) {
    case PoolKind::swa: return swa_page;
    case PoolKind::c4:
    case PoolKind::indexer: return kFullPageTokens / 4;
    case PoolKind::c128: return kFullPageTokens / 128;
  }
  return 0;
}

int64_t pool_entry_bytes(PoolKind kind) { return kind == PoolKind::indexer ? kIndexerEntryBytes : kModel1TokenBytes; }

int64_t pool_entry_data_bytes(PoolKind kind) { return kind == PoolKind::indexer ? kIndexerDataBytes : kModel1DataBytes; }

int64_t pool_page_bytes(PoolKind kind, int64_t swa_page) {
  const int64_t p = pool_tokens_per_page(kind, swa_page);
  return kind == PoolKind::indexer ? indexer_page_bytes(p) : model1_page_bytes(p);
}

std::vector<int32_t> translate_swa(const std::vector<int32_t>& full_to_swa, const std::vector<int32_t>& out_cache_loc) {
  std::vector<int32_t> swa(out_cache_loc.size());
  for (size_t i = 0; i < out_cache_loc.size(); ++i) {
    const int32_t loc = out_cache_loc[i];
    if (loc == -1) {
      swa[i] = -1;
      continue;
    }
    if (loc < 0 || static_cast<size_t>(loc) >= full_to_swa.size())
      throw BadInput("memory_pool: out_cache_loc[" + std::to_string(i) + "] = " + std::to_string(loc) +
                     " is outside the full pool [0, " + std::to_string(full_to_swa.size()) + ") and is not -1");
    swa[i] = full_to_swa[loc];
  }
  return swa;
}

int32_t compressed_out_loc(int32_t full_loc, int32_t seq_len, int ratio) {
  if (full_loc < 0 || seq_len % ratio != 0) return 0;
  return full_loc / ratio;
}

}  // namespace dsv4h::reference
