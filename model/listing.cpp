// The model's listing (listing.h); its goals, on tests/bench/bench_model.cpp's benchmarks:
// - replay against eager at bs 1, where a step is launch-bound (time_ratio <= 0.5: >= 2x faster);
// - a replayed step within the sum of its nodes' device times (each timed alone) + 1 us a node:
//   the replay's counter overhead_us_per_node, (replay - that sum) / nodes, at most 1;
// - the Flash-shaped layer's replayed decode within 1.5x the sum of its ops' floors (bytes at the
//   copy ceiling or FLOPs at the matrix rate, each op the longer): its counter ratio_to_floors.
#include "model/listing.h"

namespace dsv4h::model {

const ModelListing& listing() {
  static const ModelListing entry{"model", "bench_model", "BM_model_", R"json([
    {"text": "model decode bs=1: graph replay >= 2x faster than eager launches", "measure": "time_ratio", "bound": 0.5,
     "benchmark": "BM_model_decode_replay/bs:1/manual_time", "over": "BM_model_decode_eager/bs:1/manual_time"},
    {"text": "model decode bs={bs}: a replayed step within the sum of its kernels' device times + 1 us per kernel",
     "measure": "max_counter", "counter": "overhead_us_per_node", "bound": 1.0,
     "benchmark": "BM_model_decode_replay/bs:{bs}/manual_time", "each": [[{"bs": 1}, {"bs": 8}, {"bs": 64}]]},
    {"text": "model flash layer decode bs={bs}: within 1.5x the sum of its kernels' floors",
     "measure": "max_counter", "counter": "ratio_to_floors", "bound": 1.5,
     "benchmark": "BM_model_flash_layer_decode/bs:{bs}/manual_time", "each": [[{"bs": 1}, {"bs": 64}]]}
  ])json", "*ModelGpu*:ModelGraphGpu.*:ModelStepBench.*:*/ModelMutant.*", {"model/gpu"}};
  return entry;
}

}  // namespace dsv4h::model
