// The batched decode step's report (decode_graph.h): after the step, every op's outputs read back
// once for the bucket, then each real row's as its request's call, in the reference's names and
// shapes; the entries a row's token completed read from the pools. An observer may not change them.
#include <algorithm>

#include "decode_graph.h"
#include "kernels/kv_pool.h"

namespace dsv4h::model::gpu {

void GpuForward::report_step(DecodeBucket& b, const BatchPools& pools, const std::vector<DecodeRow>& rows, int64_t step) const {
  DSV4H_HIP_CHECK(hipStreamSynchronize(stream_));
  std::vector<std::vector<RowMatrix>> values(b.ops.size());  // each op's outputs, every row of the bucket
  for (size_t i = 0; i < b.ops.size(); ++i)
    for (const StepOutput& o : b.ops[i].outputs) values[i].push_back(download(o.view, stream_));
  // The entry row i's token completed in a pool, if any: (slot, found).
  const auto entry_slot = [&](const DecodeRow& r, int64_t ratio, int64_t page_entries) -> std::pair<int32_t, bool> {
    const int64_t length = r.position + 1;
    if (length % ratio != 0) return {0, false};
    return {static_cast<int32_t>(pools.layout.first_page(r.request) * page_entries + length / ratio - 1), true};
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    const DecodeRow& r = rows[i];
    observer_->begin_call(r.request, step);
    for (size_t k = 0; k < b.ops.size(); ++k) {
      const StepOp& op = b.ops[k];
      if (op.mtp && r.next_token < 0) continue;
      std::vector<RowMatrix> out;
      std::vector<std::string> names;
      std::vector<OpValues> kinds;
      const SharedLayerPools& pool = pools.layers[static_cast<size_t>(op.layer)];
      if (op.kind == StepOpKind::rows) {
        for (size_t j = 0; j < op.outputs.size(); ++j) {
          const int64_t per = op.outputs[j].rows_per_request;
          out.push_back(values[k][j].middleRows(static_cast<int64_t>(i) * per, per));
          names.push_back(op.outputs[j].name);
          kinds.push_back(op.outputs[j].values);
        }
      } else if (op.kind == StepOpKind::main_entry) {
        const auto [slot, found] = entry_slot(r, pool.ratio, pool.comp_page_entries);
        Buf entries;
        const std::vector<int32_t> slots = found ? std::vector<int32_t>{slot} : std::vector<int32_t>{};
        gather_model1(const_cast<uint8_t*>(pool.comp.as<uint8_t>()), pools.layout.full_pages(), pool.comp_page_entries,
                      pool.comp_page_bytes, slots, entries);
        out.push_back(download({entries.as<void>(), Dtype::bf16, static_cast<int64_t>(slots.size()), kDims, kDims}, stream_));
        names.push_back("entries");
        kinds.push_back(OpValues::real);
      } else if (op.kind == StepOpKind::index_entry) {
        const auto [slot, found] = entry_slot(r, 4, kC4PageEntries);
        const int64_t n = found ? 1 : 0;
        Buf keys = device_array<float>(n * kIndexDims);
        if (found) {
          const Buf loc = upload(std::vector<int32_t>{slot});
          const KvPoolBuffer index_pool{pool.index.as<uint8_t>(), 1, pools.layout.full_pages(), kC4PageEntries,
                                        kC4PageEntries * kIndexerEntryBytes};
          launch_kv_gather_indexer(index_pool, 0, loc.as<int32_t>(), 1, keys.as<float>(), stream_);
          DSV4H_HIP_CHECK(hipStreamSynchronize(stream_));
        }
        out.push_back(download({keys.as<void>(), Dtype::f32, n, kIndexDims, kIndexDims}, stream_));
        names.push_back("keys");
        kinds.push_back(OpValues::real);
      } else if (op.kind == StepOpKind::scaled_q) {  // the codes' values times their (row, head) scale
        RowMatrix v = values[k][0].row(static_cast<int64_t>(i));
        const int64_t heads = values[k][1].cols();
        for (int64_t h = 0; h < heads; ++h) v.row(0).segment(h * kIndexDims, kIndexDims) *= values[k][1](static_cast<int64_t>(i), h);
        out.push_back(v);
        names.push_back("q");
        kinds.push_back(OpValues::real);
      } else {  // selection: the row's entries ascending, -1 after, min(topk, visible) wide
        const int64_t topk = values[k][0].cols(), W = std::min<int64_t>(topk, (r.position + 1) / 4);
        std::vector<double> chosen;
        for (int64_t j = 0; j < topk; ++j)
          if (values[k][0](static_cast<int64_t>(i), j) >= 0) chosen.push_back(values[k][0](static_cast<int64_t>(i), j));
        std::sort(chosen.begin(), chosen.end());
        RowMatrix s = RowMatrix::Constant(1, W, -1);
        for (size_t j = 0; j < chosen.size() && static_cast<int64_t>(j) < W; ++j) s(0, static_cast<int64_t>(j)) = chosen[j];
        out.push_back(s);
        names.push_back("indices");
        kinds.push_back(OpValues::index);
      }
      const std::vector<RowMatrix> before = out;
      std::vector<OpOutput> reported;
      for (size_t j = 0; j < out.size(); ++j) reported.push_back({names[j].c_str(), &out[j], kinds[j]});
      observer_->op(op.name, {}, reported);
      for (size_t j = 0; j < out.size(); ++j)
        if (!same_bits(out[j], before[j]))
          fail("the observer changed " + op.name + "'s output " + names[j] +
               " of a finished batched decode step, which cannot go on from it (fault injection runs the per-request forward)");
    }
  }
}

}  // namespace dsv4h::model::gpu
