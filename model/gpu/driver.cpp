// The GPU forward's driver (forward_impl.h): a plan's requests one after another, each call the
// main model, its head, and MTP block 0 over the positions with a next token; and the entry point.
#include "forward_impl.h"

#include <algorithm>

#include "glue_kernels.h"
#include "reference/errors.h"

namespace dsv4h::model::gpu {

void GpuForward::call(const RunPlan& plan, int64_t r, int64_t s, RequestPools& state) const {
  const std::vector<int64_t>& tokens = plan.tokens[static_cast<size_t>(r)];
  const auto [begin, end] = plan.positions(s);
  const int64_t T = end - begin, hc = c_.hc_mult, dim = c_.dim;
  if (observer_) observer_->begin_call(r, s);  // none in a benchmark's run (step_bench.h)
  const std::vector<int64_t> own(tokens.begin() + begin, tokens.begin() + end);
  const Buf d_tokens = upload(std::vector<int32_t>(own.begin(), own.end()));
  Buf h = embed(own, hc, "embed");
  for (int64_t l = 0; l < c_.n_layers; ++l)
    h = block(l, "layers." + std::to_string(l) + ".", h, T, d_tokens, state.layers[static_cast<size_t>(l)]);
  head(h, T, "");

  // MTP block 0 over the positions with a next token: the main streams' first n rows.
  const int64_t n = std::min<int64_t>(end, static_cast<int64_t>(tokens.size()) - 1) - begin;
  if (c_.n_mtp_layers == 0 || n <= 0) return;
  const std::string p = "mtp.0.";
  const std::vector<int64_t> next(tokens.begin() + begin + 1, tokens.begin() + begin + 1 + n);
  const Buf d_next = upload(std::vector<int32_t>(next.begin(), next.end()));
  const Buf e = embed(next, 1, p + "embed");
  const Buf en = report_norm(e.as<uint16_t>(), n, dim, p + "enorm.weight", p + "enorm");
  const Buf e_proj = report_linear(en.as<uint16_t>(), n, p + "e_proj.weight", p + "e_proj");
  const Buf hn = report_norm(h.as<uint16_t>(), n * hc, dim, p + "hnorm.weight", p + "hnorm");
  const Buf h_proj = report_linear(hn.as<uint16_t>(), n * hc, p + "h_proj.weight", p + "h_proj");
  Buf x = device_array<uint16_t>(n * hc * dim);
  gpu::launch_mtp_input(e_proj.as<uint16_t>(), h_proj.as<uint16_t>(), n, hc, dim, x.as<uint16_t>(), stream_);
  report(p + "input", {{"h", {x.as<void>(), Dtype::bf16, n, hc * dim, hc * dim}}});
  const Buf out = block(c_.n_layers, p, x, n, d_next, state.layers[static_cast<size_t>(c_.n_layers)]);
  head(out, n, p);
}

void GpuForward::run(const RunPlan& plan, OpObserver& observer) const {
  const int64_t R = static_cast<int64_t>(plan.tokens.size());
  for (int64_t r = 0; r < R; ++r) {
    if (plan.prompt < 1 || plan.steps(r) < 1)
      throw BadInput("run plan: request " + std::to_string(r) + " has fewer tokens than the prompt (" +
                     std::to_string(plan.prompt) + ")");
    for (int64_t t : plan.tokens[static_cast<size_t>(r)])
      if (t < 0 || t >= c_.vocab_size) throw BadInput("run plan: request " + std::to_string(r) + " has token " + std::to_string(t) +
                                                      " outside the vocabulary");
  }
  if (c_.n_mtp_layers > 1) fail("only MTP block 0 runs (n_mtp_layers " + std::to_string(c_.n_mtp_layers) + ")");
  observer_ = &observer;
  if (options_.decode != DecodeMode::per_request) {
    run_batched(plan);
    DSV4H_HIP_CHECK(hipStreamSynchronize(stream_));
    observer_ = nullptr;
    return;
  }
  for (int64_t r = 0; r < R; ++r) {
    const int64_t capacity = static_cast<int64_t>(plan.tokens[static_cast<size_t>(r)].size());
    RequestPools state;
    for (int64_t l = 0; l < c_.n_layers + c_.n_mtp_layers; ++l) state.layers.push_back(new_layer(l, capacity));
    for (int64_t s = 0; s < plan.steps(r); ++s) call(plan, r, s, state);
  }
  DSV4H_HIP_CHECK(hipStreamSynchronize(stream_));
  observer_ = nullptr;
}

}  // namespace dsv4h::model::gpu

namespace dsv4h::model {

std::unique_ptr<ModelBackend> open_gpu_forward(const ReferenceModel& model, const GpuForwardOptions& options,
                                               std::string& why_not) {
  int count = 0;
  const hipError_t status = hipGetDeviceCount(&count);
  if (status != hipSuccess || count == 0) {
    why_not = status != hipSuccess ? std::string("no GPU found: hipGetDeviceCount: ") + hipGetErrorName(status)
                                   : "no GPU found: hipGetDeviceCount reports 0 devices";
    (void)hipGetLastError();
    return nullptr;
  }
  return std::make_unique<gpu::GpuForward>(model, options);
}

}  // namespace dsv4h::model
