#include "fuzz.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "case_file.h"
#include "errors.h"
#include "random.h"
#include "verify.h"

namespace dsv4h {
namespace {

constexpr int64_t kMaxReplayedBatch = 64;  // a replay checks every size up to the batch

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Outcome {
  std::string failure;  // the report of the first failing check; empty when none failed
  bool refused = false, replayed = false;
};

Outcome check(const Component& component, const Case& c, GpuBackend* gpu, bool replay) {
  Outcome o;
  const CaseRun run = run_case(component, c, gpu);
  o.refused = run.result.status == CaseStatus::bad_input;
  if (o.refused) return o;
  if (!run.result.passed()) {
    o.failure = run.result.report();
    return o;
  }
  if (!gpu || !replay) return o;
  ReplayOptions options;
  const int64_t batch = c.integer(component.batch_param);
  options.max_batch = batch;
  options.buckets = default_buckets(batch);
  ReplayResult r;
  try {
    r = gpu->graph_replay(component, c.with(component.batch_param, "1"), options);
  } catch (const BadInput&) {
    return o;  // a case no engine pads (e.g. filtered_silu_mul with step > 1): differential only
  }
  o.replayed = true;
  if (r.batches_failed > 0) {
    o.failure = "graph replay of " + c.str() + ": " + std::to_string(r.batches_failed) + " batch sizes failed";
    for (const std::string& f : r.failures) o.failure += "\n  " + f;
  }
  return o;
}

}  // namespace

std::vector<int64_t> boundary_batches(int64_t max_batch) {
  std::vector<int64_t> edges = {1, 2, 3, 5, 7};
  for (int64_t p = 4; p <= 2 * max_batch; p *= 2) edges.insert(edges.end(), {p - 1, p, p + 1});
  edges.erase(std::remove_if(edges.begin(), edges.end(), [&](int64_t v) { return v < 1 || v > max_batch; }), edges.end());
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  return edges;
}

FuzzResult fuzz_component(const Component& component, GpuBackend* gpu, const FuzzOptions& options) {
  FuzzResult result;
  result.component = component.name;
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int64_t> edges = boundary_batches(options.max_batch);
  Rng rng(options.seed);
  auto last_progress = t0;
  while (seconds_since(t0) < options.seconds && (options.max_cases == 0 || result.cases < options.max_cases)) {
    const std::string& base = component.verify_cases[static_cast<size_t>(
        rng.integer(0, static_cast<int64_t>(component.verify_cases.size()) - 1))];
    const int64_t batch = rng.uniform() < 0.5 ? edges[static_cast<size_t>(rng.integer(0, static_cast<int64_t>(edges.size()) - 1))]
                                              : rng.integer(1, options.max_batch);
    const uint64_t seed = rng.next() % kSeedLimit;
    const Case c = parse_case(base, seed).with(component.batch_param, std::to_string(batch));
    Outcome outcome = check(component, c, gpu, batch <= kMaxReplayedBatch && component.pad_batch);
    if (outcome.refused) {
      // Impossible here (a batch below the case's real requests, or beyond a host run's size).
      ++result.refused;
      if (result.refused > 100 * (result.cases + 1)) throw std::runtime_error(component.name + ": fuzz draws only refused cases");
      continue;
    }
    ++result.cases;
    result.replays += outcome.replayed;
    if (!outcome.failure.empty()) {
      // The smallest batch that still fails, tried from the smallest up.
      Case shrunk = c;
      std::vector<int64_t> smaller = {1, 2, 3, 4, 5, 6, 7, 8, batch / 8, batch / 4, batch / 2, batch - 1};
      std::sort(smaller.begin(), smaller.end());
      for (int64_t b : smaller) {
        if (b < 1 || b >= batch) continue;
        const Case candidate = c.with(component.batch_param, std::to_string(b));
        const Outcome smaller_outcome = check(component, candidate, gpu, b <= kMaxReplayedBatch && component.pad_batch);
        if (!smaller_outcome.failure.empty()) {
          shrunk = candidate;
          outcome = smaller_outcome;
          break;
        }
      }
      char name[96];
      std::snprintf(name, sizeof(name), "fuzz-%s-%s-%llx.json", component.name.c_str(), component.batch_param.c_str(),
                    static_cast<unsigned long long>(shrunk.seed() & 0xffffffffffULL));
      const std::string path = options.regression_dir + "/" + name;
      write_json_file(path, {{"component", component.name}, {"case", shrunk.str()}, {"seed", shrunk.seed()},
                             {"note", "dsv4h fuzz counterexample (drawn as " + c.str() + "), shrunk to the smallest "
                                      "failing " + component.batch_param + "; rename it for what it caught"}});
      result.failures.push_back({c.str(), shrunk.str(), path, outcome.failure});
      break;
    }
    if (options.progress && seconds_since(last_progress) >= 5) {
      last_progress = std::chrono::steady_clock::now();
      char line[160];
      std::snprintf(line, sizeof(line), "fuzz %s: %lld cases, %lld replayed, %lld refused, %.0f s of %.0f",
                    component.name.c_str(), static_cast<long long>(result.cases), static_cast<long long>(result.replays),
                    static_cast<long long>(result.refused), seconds_since(t0), options.seconds);
      options.progress(line);
    }
  }
  result.seconds = seconds_since(t0);
  return result;
}

}  // namespace dsv4h
