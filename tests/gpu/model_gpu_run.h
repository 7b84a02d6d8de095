// The tiny model's GPU forward in the GPU tests (issue 31): a case (prompt, decode steps, batch,
// index_topk, seed), its config and seeded tokens, and a run of the GPU forward bisected against
// the reference. Shared by test_model_gpu.cpp (the differential checks, mutant binaries included)
// and test_model_graph.cpp (the batched decode, test_gpu_graph only).
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/case_file.h"
#include "harness/model/bisect.h"
#include "model/fault_injection.h"
#include "model/gpu/gpu_forward.h"
#include "model/trace.h"

namespace dsv4h::model_gpu_test {

struct ModelCase {
  int64_t prompt, decode, batch, index_topk;
  uint64_t seed;
  std::string str() const {
    return "model(prompt=" + std::to_string(prompt) + ",decode=" + std::to_string(decode) + ",batch=" +
           std::to_string(batch) + ",index_topk=" + std::to_string(index_topk) + ",seed=" + std::to_string(seed) + ")";
  }
};

inline void PrintTo(const ModelCase& c, std::ostream* os) { *os << c.str(); }

inline model::ModelConfig config_of(const ModelCase& c) {
  model::ModelConfig config = model::load_config(fixtures_dir() + "/../model/configs/tiny.json");
  config.index_topk = c.index_topk;
  return config;
}

// Seeded tokens over the vocabulary (splitmix64), each request its own.
inline model::RunPlan plan_of(const ModelCase& c, int64_t vocab) {
  model::RunPlan plan;
  plan.prompt = c.prompt;
  for (int64_t r = 0; r < c.batch; ++r) {
    uint64_t state = c.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(r) * 0xD1B54A32D192ED03ull + 7;
    std::vector<int64_t> tokens;
    for (int64_t t = 0; t < c.prompt + c.decode; ++t) {
      uint64_t z = (state += 0x9E3779B97F4A7C15ull);
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      tokens.push_back(static_cast<int64_t>((z ^ (z >> 31)) % static_cast<uint64_t>(vocab)));
    }
    plan.tokens.push_back(std::move(tokens));
  }
  return plan;
}

// Requests of prompt c.prompt and c.decode + 2 * r decode steps, r = 0 .. c.batch - 1, so that the
// batch shrinks as they finish (the rows after a finished request move up).
inline model::RunPlan ragged_plan_of(const ModelCase& c, int64_t vocab) {
  model::RunPlan plan = plan_of({c.prompt, c.decode + 2 * (c.batch - 1), c.batch, c.index_topk, c.seed}, vocab);
  for (int64_t r = 0; r < c.batch; ++r) plan.tokens[static_cast<size_t>(r)].resize(static_cast<size_t>(c.prompt + c.decode + 2 * r));
  return plan;
}

inline std::string table_of(const BisectResult& result) {
  std::string text;
  for (const std::string& line : bisect_table(result)) text += line + "\n";
  if (!result.aborted.empty()) text += "the teacher-forced run stopped: " + result.aborted + "\n";
  return text;
}

// The case's GPU forward (with `fault` where given, outermost) bisected against the reference;
// `plan` where given instead of the case's, `trace` where given keeps the candidate's trace.
inline BisectResult bisect_gpu(const ModelCase& c, const model::GpuForwardOptions& options, const std::string& fault_op = "",
                        int64_t* fault_hits = nullptr, const model::RunPlan* given = nullptr, model::Trace* trace = nullptr) {
  const model::ModelConfig config = config_of(c);
  const model::ReferenceModel m(config, model::make_weights(config, c.seed), model::gpu_forward_reference_options());
  std::string why_not;
  const std::unique_ptr<model::ModelBackend> gpu = model::open_gpu_forward(m, options, why_not);
  if (!gpu) throw std::runtime_error("no GPU forward: " + why_not);
  const model::RunPlan plan = given ? *given : plan_of(c, config.vocab_size);
  model::Trace own;
  model::Trace& candidate = trace ? *trace : own;
  model::TraceRecorder recorder(candidate);
  if (fault_op.empty()) {
    gpu->run(plan, recorder);
  } else {
    model::FaultInjection fault(fault_op, 0.25, &recorder);
    gpu->run(plan, fault);
    if (fault_hits) *fault_hits = fault.hits();
  }
  return bisect(m, plan, candidate);
}

}  // namespace dsv4h::model_gpu_test
