#include "backend.h"

#include <algorithm>

#include "reference/errors.h"

namespace dsv4h::model {

int64_t RunPlan::steps(int64_t request) const {
  return 1 + static_cast<int64_t>(tokens.at(static_cast<size_t>(request)).size()) - prompt;
}

std::pair<int64_t, int64_t> RunPlan::positions(int64_t step) const {
  return step == 0 ? std::make_pair(int64_t{0}, prompt) : std::make_pair(prompt + step - 1, prompt + step);
}

namespace {

// One call: the main forward over its positions, then MTP block 0 over those with a next token
// (the MTP block predicts one position further; the last position has none).
void run_call(const ReferenceModel& m, const RunPlan& plan, int64_t r, int64_t s, RequestState& state,
              OpObserver& observer) {
  const std::vector<int64_t>& tokens = plan.tokens[static_cast<size_t>(r)];
  const auto [begin, end] = plan.positions(s);
  observer.begin_call(r, s);
  const ForwardResult main = m.forward(state, {tokens.begin() + begin, tokens.begin() + end}, false, &observer);
  const int64_t n = std::min<int64_t>(end, static_cast<int64_t>(tokens.size()) - 1) - begin;
  if (m.config().n_mtp_layers == 0 || n <= 0) return;
  m.mtp_forward(state, 0, main.hidden.topRows(n), {tokens.begin() + begin + 1, tokens.begin() + begin + 1 + n}, &observer);
}

}  // namespace

void ReferenceBackend::run(const RunPlan& plan, OpObserver& observer) const {
  const int64_t R = static_cast<int64_t>(plan.tokens.size());
  for (int64_t r = 0; r < R; ++r)
    if (plan.prompt < 1 || plan.steps(r) < 1)
      throw BadInput("run plan: request " + std::to_string(r) + " has fewer tokens than the prompt (" +
                     std::to_string(plan.prompt) + ")");
  std::vector<RequestState> states(static_cast<size_t>(R), model_.new_request());
  if (order_ == CallOrder::request_major) {
    for (int64_t r = 0; r < R; ++r)
      for (int64_t s = 0; s < plan.steps(r); ++s) run_call(model_, plan, r, s, states[r], observer);
    return;
  }
  int64_t most = 0;
  for (int64_t r = 0; r < R; ++r) most = std::max(most, plan.steps(r));
  for (int64_t s = 0; s < most; ++s)
    for (int64_t r = R - 1; r >= 0; --r)  // the requests in reverse, to differ from request_major in every way
      if (s < plan.steps(r)) run_call(model_, plan, r, s, states[r], observer);
}

}  // namespace dsv4h::model
