// The tiny model on the command line (issue 31): `dsv4h run --case 'model(...)'` runs the fp64
// reference forward of a case (prefill of the prompt, then one token at a time) and --dump writes
// its tokens, logits and every layer's hidden streams, or with --inject bisects a candidate with
// one op perturbed (model_bisect.h); `dsv4h verify --component model` runs the reference's
// self-consistency checks and the bisection of a batch-ordered run. With --backend gpu both run
// the GPU forward (model/gpu/gpu_forward.h) instead and bisect it against the reference: exit 1
// naming the first op over its budget; verify bisects it twice, request by request and with its
// decode steps batched and replayed from the graphs captured per bucket (model/gpu/decode_graph.h). --backend auto stays on the reference for now (the GPU
// forward's first version is checked on request). The model is no registered component yet: a
// component needs its GPU launcher and golden fixtures (the generic GPU tests run every one).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "../../model/backend.h"
#include "../../model/forward.h"
#include "../../model/gpu/gpu_forward.h"
#include "../../model/trace.h"
#include "../model/bisect.h"
#include "../case_file.h"
#include "../json_file.h"
#include "../errors.h"
#include "args.h"
#include "commands.h"
#include "model_bisect.h"

namespace dsv4h::cli {
namespace {

const std::vector<ParamSpec> kModelParams = {
    {"prompt", ParamKind::integer, "9", "prompt tokens, prefilled in one step"},
    {"decode", ParamKind::integer, "3", "tokens then decoded one at a time"},
    {"batch", ParamKind::integer, "1", "requests, each with its own tokens"},
    {"index_topk", ParamKind::integer, "512", "the indexer's top-k (16 truncates from position 67 on)"},
};

// Self-consistency budget: the two paths differ only in how fp64 sums group (and the compressor's
// one pass against its state machine), so 1e-9 of the largest value is a million times their
// rounding and far below any bookkeeping slip (1e-2 and more). tests/cpu/test_model_forward_reference.cpp.
constexpr double kConsistencyBudget = 1e-9;

Case parse_model_case(const std::string& text) {
  auto [name, values] = split_case_string(text);
  if (name != "model") throw BadInput("not a model case: " + text);
  uint64_t seed = 1;
  if (const auto it = values.find("seed"); it != values.end()) {
    const std::string& s = it->second;
    if (s.empty() || s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos)
      throw BadInput("\"seed\" must be an integer in [0, 10^19), got \"" + s + "\"");
    seed = std::stoull(s);
    values.erase(it);
  }
  const Case c("model", kModelParams, values, seed);
  const auto in = [&](const char* p, int64_t lo, int64_t hi) {
    if (c.integer(p) < lo || c.integer(p) > hi)
      throw BadInput(std::string("model: ") + p + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                     "], got " + std::to_string(c.integer(p)) + " in " + c.str());
  };
  in("prompt", 1, 4096);
  in("decode", 0, 4096);
  in("batch", 1, 64);
  in("index_topk", 1, 1 << 20);
  return c;
}

model::ModelConfig case_config(const Case& c) {
  model::ModelConfig config = model::load_config(fixtures_dir() + "/../model/configs/tiny.json");
  config.index_topk = c.integer("index_topk");
  return config;
}

// A request's tokens: seeded, uniform over the vocabulary (splitmix64).
std::vector<int64_t> request_tokens(const Case& c, int64_t request, int64_t vocab) {
  uint64_t state = c.seed() * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(request) * 0xD1B54A32D192ED03ull + 1;
  std::vector<int64_t> tokens;
  for (int64_t t = 0; t < c.integer("prompt") + c.integer("decode"); ++t) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    tokens.push_back(static_cast<int64_t>((z ^ (z >> 31)) % static_cast<uint64_t>(vocab)));
  }
  return tokens;
}

model::RunPlan case_plan(const Case& c, int64_t vocab) {
  model::RunPlan plan;
  plan.prompt = c.integer("prompt");
  for (int64_t r = 0; r < c.integer("batch"); ++r) plan.tokens.push_back(request_tokens(c, r, vocab));
  return plan;
}

// The case's run: prefill of the prompt, then its decode steps, one request after another.
struct ModelRun {
  std::vector<std::vector<int64_t>> tokens;
  std::vector<model::ForwardResult> steps;  // per request: every position's rows, in order
};

model::ForwardResult concat(const std::vector<model::ForwardResult>& parts) {
  model::ForwardResult all;
  int64_t rows = 0;
  for (const auto& p : parts) rows += p.logits.rows();
  all.logits.resize(rows, parts[0].logits.cols());
  all.hidden.resize(rows, parts[0].hidden.cols());
  all.per_layer.assign(parts[0].per_layer.size(), model::RowMatrix(rows, parts[0].hidden.cols()));
  int64_t at = 0;
  for (const auto& p : parts) {
    const int64_t n = p.logits.rows();
    all.logits.middleRows(at, n) = p.logits;
    all.hidden.middleRows(at, n) = p.hidden;
    for (size_t l = 0; l < p.per_layer.size(); ++l) all.per_layer[l].middleRows(at, n) = p.per_layer[l];
    at += n;
  }
  return all;
}

ModelRun run_model(const model::ReferenceModel& m, const Case& c) {
  ModelRun run;
  const int64_t prompt = c.integer("prompt");
  for (int64_t r = 0; r < c.integer("batch"); ++r) {
    run.tokens.push_back(request_tokens(c, r, m.config().vocab_size));
    const std::vector<int64_t>& tokens = run.tokens.back();
    model::RequestState state = m.new_request();
    std::vector<model::ForwardResult> parts{m.forward(state, {tokens.begin(), tokens.begin() + prompt}, true)};
    for (size_t t = static_cast<size_t>(prompt); t < tokens.size(); ++t) parts.push_back(m.forward(state, {tokens[t]}, true));
    run.steps.push_back(concat(parts));
  }
  return run;
}

double relative_gap(const model::RowMatrix& got, const model::RowMatrix& expected) {
  return (got - expected).cwiseAbs().maxCoeff() / std::max(expected.cwiseAbs().maxCoeff(), 1e-300);
}

// Prefill vs decode: the case's run against one prefill of every token, logits and each layer's
// streams; then the MTP block, prefill of its rows against one row at a time. Lines of the checks
// go to `lines`; false where one is over budget.
bool self_consistent(const model::ReferenceModel& m, const Case& c, std::vector<std::string>& lines, nlohmann::json& checks) {
  const ModelRun run = run_model(m, c);
  bool ok = true;
  const auto check = [&](const std::string& what, double gap) {
    char line[256];
    std::snprintf(line, sizeof(line), "  %s: max relative gap %.3g (budget %.0e)", what.c_str(), gap, kConsistencyBudget);
    lines.push_back(line);
    checks.push_back({{"check", what}, {"max_relative_gap", gap}, {"budget", kConsistencyBudget}});
    ok = ok && gap <= kConsistencyBudget;
  };
  for (size_t r = 0; r < run.tokens.size(); ++r) {
    const std::string req = "request " + std::to_string(r) + ", ";
    model::RequestState whole = m.new_request();
    const model::ForwardResult all = m.forward(whole, run.tokens[r], true);
    check(req + "prefill vs decode logits", relative_gap(run.steps[r].logits, all.logits));
    for (size_t l = 0; l < all.per_layer.size(); ++l)
      check(req + "prefill vs decode layer " + std::to_string(l), relative_gap(run.steps[r].per_layer[l], all.per_layer[l]));
    if (m.config().n_mtp_layers == 0 || run.tokens[r].size() < 2) continue;
    const int64_t n = static_cast<int64_t>(run.tokens[r].size()) - 1;
    const std::vector<int64_t> next(run.tokens[r].begin() + 1, run.tokens[r].end());
    model::RequestState mtp_whole = m.new_request(), mtp_step = m.new_request();
    const model::ForwardResult mtp_all = m.mtp_forward(mtp_whole, 0, all.hidden.topRows(n), next);
    model::RowMatrix stepped(n, mtp_all.logits.cols());
    for (int64_t t = 0; t < n; ++t) stepped.row(t) = m.mtp_forward(mtp_step, 0, all.hidden.row(t), {next[t]}).logits;
    check(req + "MTP prefill vs decode logits", relative_gap(stepped, mtp_all.logits));
  }
  return ok;
}

// An unperturbed candidate: the same requests run step by step across the batch (model/backend.h),
// bisected against the reference; every op's error and budget go to the checks.
bool bisect_batch_order(const model::ReferenceModel& m, const Case& c, std::vector<std::string>& lines, nlohmann::json& checks) {
  const model::RunPlan plan = case_plan(c, m.config().vocab_size);
  model::Trace candidate;
  model::TraceRecorder recorder(candidate);
  model::ReferenceBackend(m, model::CallOrder::step_major).run(plan, recorder);
  const BisectResult result = bisect(m, plan, candidate);
  const OpError* most = nullptr;
  for (const OpError& e : result.ops)
    if (!most || e.used() > most->used()) most = &e;
  char line[256];
  std::snprintf(line, sizeof(line), "  bisection of the step-major run: %zu ops, %s (most of a budget used: %.3g, %s)",
                result.ops.size(), result.passed() ? "all within budget" : "OVER BUDGET", most ? most->used() : 0.0,
                most ? most->op.c_str() : "-");
  lines.push_back(line);
  checks.push_back({{"check", "bisection of the step-major run"}, {"passed", result.passed()}, {"bisection", bisect_json(result)}});
  return result.passed();
}

HostTensor to_f32(const std::vector<const model::RowMatrix*>& blocks, Shape shape) {
  HostTensor t(DType::f32, std::move(shape));
  int64_t i = 0;
  for (const model::RowMatrix* b : blocks)
    for (int64_t r = 0; r < b->rows(); ++r)
      for (int64_t k = 0; k < b->cols(); ++k) t.set(i++, (*b)(r, k));
  return t;
}

bool gpu_requested(const Args& args) { return args.get("--backend", "auto") == "gpu"; }

// The GPU forward of `m` on the harness's device (opened first: it picks the device), or a usage
// error saying why there is none.
std::unique_ptr<model::ModelBackend> open_model_gpu(const model::ReferenceModel& m, const model::GpuForwardOptions& options = {}) {
  std::string why_not;
  if (!open_gpu_backend(why_not)) throw UsageError("--backend gpu: " + why_not);
  std::unique_ptr<model::ModelBackend> gpu = model::open_gpu_forward(m, options, why_not);
  if (!gpu) throw UsageError("--backend gpu: " + why_not);
  return gpu;
}

// One GPU forward of the case, with `options`, bisected against the reference.
bool bisect_gpu_run(const model::ReferenceModel& m, const Case& c, const model::GpuForwardOptions& options, const std::string& what,
                    std::vector<std::string>& lines, nlohmann::json& checks) {
  const model::RunPlan plan = case_plan(c, m.config().vocab_size);
  model::Trace candidate;
  model::TraceRecorder recorder(candidate);
  open_model_gpu(m, options)->run(plan, recorder);
  const BisectResult result = bisect(m, plan, candidate);
  const OpError* most = nullptr;
  for (const OpError& e : result.ops)
    if (!most || e.used() > most->used()) most = &e;
  char line[512];
  std::snprintf(line, sizeof(line), "  bisection of %s: %zu ops, %s (most of a budget used: %.3g, %s)%s%s",
                what.c_str(), result.ops.size(), result.passed() ? "all within budget" : "OVER BUDGET", most ? most->used() : 0.0,
                most ? most->op.c_str() : "-", result.first ? "; first divergent op: " : "",
                result.first ? result.ops[*result.first].op.c_str() : "");
  lines.push_back(line);
  if (!result.aborted.empty()) lines.push_back("  the teacher-forced run stopped: " + result.aborted);
  checks.push_back({{"check", "bisection of " + what}, {"passed", result.passed()}, {"bisection", bisect_json(result)}});
  return result.passed();
}

// verify --backend gpu: a case's GPU forward bisected against the reference, request by request,
// and with its decode steps batched and replayed from the graphs captured per bucket.
bool bisect_gpu(const model::ReferenceModel& m, const Case& c, std::vector<std::string>& lines, nlohmann::json& checks) {
  model::GpuForwardOptions replayed;
  replayed.decode = model::DecodeMode::batched_graph;
  replayed.max_batch = std::max<int64_t>(8, c.integer("batch"));
  const bool per_request = bisect_gpu_run(m, c, {}, "the GPU forward", lines, checks);
  return bisect_gpu_run(m, c, replayed, "the graph-replayed decode", lines, checks) && per_request;
}

const std::vector<std::string> kVerifyCases = {
    "model(prompt=1,decode=8)",          // decode from the first token: C4 entries made by the state machine
    "model(prompt=5,decode=4,batch=2)",  // a prompt ending inside a C4 block
    "model(prompt=64,decode=6,index_topk=16)",   // the indexer starts truncating at position 67
    "model(prompt=126,decode=4)",        // the window fills and C128's first entry comes by decode
};

}  // namespace

bool is_model_case(const std::string& text) { return text == "model" || text.rfind("model(", 0) == 0; }

int run_model_case(const Args& args, const std::string& text) {
  if (args.has("--inputs")) throw UsageError("--inputs: a model case makes its tokens from its seed");
  const bool gpu = gpu_requested(args);
  if (args.has("--inject-delta") && !args.has("--inject")) throw UsageError("--inject-delta goes with --inject");
  for (const char* option : {"--fixture", "--json"})
    if (args.has(option) && !args.has("--inject") && !gpu) throw UsageError(std::string(option) + " goes with --inject or --backend gpu");
  if (args.has("--inject") && args.has("--dump")) throw UsageError("--dump and --inject: one at a time");
  if (gpu && args.has("--dump")) throw UsageError("--dump writes the reference's run: leave out --backend gpu");
  if (args.has("--dump")) check_writable("--dump", args.get("--dump"));
  const Case c = parse_model_case(text);
  const model::ModelConfig config = case_config(c);
  const int64_t B = c.integer("batch"), T = c.integer("prompt") + c.integer("decode");
  const int64_t streams = config.hc_mult * config.dim;
  if (args.has("--dump") && B * T * (config.vocab_size + config.n_layers * streams) > (int64_t{16} << 20))
    throw UsageError("--dump: the dump of " + c.str() + " would hold more than 2^24 values: dump a smaller case");
  if (gpu) {  // the reference the GPU forward is compared with (gpu_forward.h: its indexer in fp8)
    const model::ReferenceModel m(config, model::make_weights(config, c.seed()), model::gpu_forward_reference_options());
    const std::unique_ptr<model::ModelBackend> forward = open_model_gpu(m);
    return run_model_bisection(args, c.str(), m, case_plan(c, config.vocab_size), forward.get());
  }
  const model::ReferenceModel m(config, model::make_weights(config, c.seed()));
  if (args.has("--inject")) return run_model_bisection(args, c.str(), m, case_plan(c, config.vocab_size));
  const ModelRun run = run_model(m, c);
  std::printf("reference  %s  (the GPU forward runs with --backend gpu)\n", c.str().c_str());
  for (int64_t r = 0; r < B; ++r) {
    const model::RowMatrix& logits = run.steps[r].logits;
    Eigen::Index top = 0;
    logits.row(T - 1).maxCoeff(&top);
    std::printf("  request %lld: last token's top-1 %lld, max |logit| %.4g\n", static_cast<long long>(r),
                static_cast<long long>(top), logits.cwiseAbs().maxCoeff());
  }
  if (args.has("--dump")) {
    HostTensor tokens(DType::i32, {B, T});
    for (int64_t r = 0; r < B; ++r)
      for (int64_t t = 0; t < T; ++t) tokens.data<int32_t>()[r * T + t] = static_cast<int32_t>(run.tokens[r][t]);
    std::vector<const model::RowMatrix*> logits, hidden;
    for (const auto& s : run.steps) logits.push_back(&s.logits);
    TensorMap outputs{{"logits", to_f32(logits, {B, T, config.vocab_size})}};
    for (int64_t l = 0; l < config.n_layers; ++l) {  // every layer's streams [batch, tokens, hc * dim]
      std::vector<const model::RowMatrix*> layer;
      for (const auto& s : run.steps) layer.push_back(&s.per_layer[l]);
      outputs.emplace("hidden_layer_" + std::to_string(l), to_f32(layer, {B, T, streams}));
    }
    write_case_file(args.get("--dump"), c, {{"tokens", std::move(tokens)}}, {{"reference", outputs}},
                    "tokens from the seed; weights make_weights(tiny, seed)");
    std::fprintf(stderr, "wrote %s\n", args.get("--dump").c_str());
  }
  return kPass;
}

int verify_model(const Args& args, const std::function<bool(const std::string&)>& selected) {
  const bool gpu = gpu_requested(args);
  const long long seeds = args.integer("--seeds", 3, 1);
  if (args.has("--json")) check_writable("--json", args.get("--json"));
  std::vector<Case> cases;
  for (const std::string& text : kVerifyCases)
    for (long long s = 1; s <= seeds; ++s) {
      Case c = parse_model_case(text).with_seed(static_cast<uint64_t>(s));
      if (selected(c.str())) cases.push_back(std::move(c));
    }
  if (cases.empty()) throw UsageError("nothing to verify: no model case matches --filter");
  int failed = 0;
  nlohmann::json results = nlohmann::json::array();
  for (const Case& c : cases) {
    const model::ModelConfig config = case_config(c);
    std::vector<std::string> lines;
    nlohmann::json checks = nlohmann::json::array();
    bool ok = false;
    if (gpu) {
      const model::ReferenceModel m(config, model::make_weights(config, c.seed()), model::gpu_forward_reference_options());
      ok = bisect_gpu(m, c, lines, checks);
    } else {
      const model::ReferenceModel m(config, model::make_weights(config, c.seed()));
      const bool consistent = self_consistent(m, c, lines, checks);
      ok = bisect_batch_order(m, c, lines, checks) && consistent;
    }
    results.push_back({{"case", c.str()}, {"backend", gpu ? "gpu" : "reference"}, {"passed", ok}, {"checks", checks}});
    failed += !ok;
    std::printf("%s  %s\n", ok ? "pass" : "FAIL", c.str().c_str());
    for (const std::string& line : lines) std::printf("%s\n", line.c_str());
  }
  std::printf("model: %zu cases, %d failed%s\n", cases.size(), failed,
              gpu ? " (the GPU forward against the reference)" : "; the GPU forward runs with --backend gpu");
  // Every check's gap beside its budget, so that the headroom can be followed from run to run.
  if (args.has("--json")) write_json_file(args.get("--json"), {{"component", "model"}, {"results", results}});
  return failed ? kMismatch : kPass;
}

}  // namespace dsv4h::cli
