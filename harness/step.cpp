#include "step.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "errors.h"
#if DSV4H_GPU_LAYER
#include "gpu/device_tensor.h"
#endif

namespace dsv4h {
namespace {

bool owned_by(const std::string& tensor, const std::string& stage) {
  return tensor.size() > stage.size() + 1 && tensor.compare(0, stage.size() + 1, stage + ".") == 0;
}

// A step's tensors, host or device, seen as one stage's: the step tensors "<stage>.X" as X, and
// the mapped inputs from the step inputs or the earlier stages' outputs. `Map` is TensorMap or
// DeviceTensorMap; `add(view, name, from, tensor, flat)` puts a copy or an alias of `tensor` into
// `view`, of shape [numel] where `flat`.
template <typename Map, typename Names, typename Add>
Map stage_view(const StepStage& stage, const Map& step_inputs, const Map& step_outputs, Names names, Add add) {
  Map view;
  const std::vector<std::string> in = names(step_inputs), out = names(step_outputs);
  for (const std::string& name : in)
    if (owned_by(name, stage.name) && !stage.inputs.count(name.substr(stage.name.size() + 1)))
      add(view, name.substr(stage.name.size() + 1), step_inputs, name, false);
  for (const auto& [input, source] : stage.inputs) {
    const bool flat = stage.flat.count(input) > 0;
    if (std::find(in.begin(), in.end(), source) != in.end()) add(view, input, step_inputs, source, flat);
    else if (std::find(out.begin(), out.end(), source) != out.end()) add(view, input, step_outputs, source, flat);
    else
      throw std::logic_error("step stage " + stage.name + ": input \"" + input + "\" comes from \"" + source +
                             "\", which is neither a step input nor an earlier stage's output");
  }
  return view;
}

std::vector<std::string> host_names(const TensorMap& m) {
  std::vector<std::string> names;
  for (const auto& [name, t] : m) names.push_back(name);
  return names;
}

TensorMap host_stage_inputs(const StepStage& stage, const TensorMap& inputs, const TensorMap& outputs) {
  return stage_view(stage, inputs, outputs, host_names,
                    [](TensorMap& view, const std::string& as, const TensorMap& from, const std::string& name, bool flat) {
                      const HostTensor& t = from.at(name);
                      if (!flat) {
                        view.emplace(as, t);
                        return;
                      }
                      HostTensor column(t.dtype(), {t.numel()});
                      std::memcpy(column.bytes(), t.bytes(), t.nbytes());
                      view.emplace(as, std::move(column));
                    });
}

// Moves the stage's outputs out of the step's ("<stage>.X" as X), and back.
TensorMap take_outputs(const StepStage& stage, TensorMap& outputs) {
  TensorMap taken;
  for (auto it = outputs.begin(); it != outputs.end();) {
    if (!owned_by(it->first, stage.name)) {
      ++it;
      continue;
    }
    taken.emplace(it->first.substr(stage.name.size() + 1), std::move(it->second));
    it = outputs.erase(it);
  }
  return taken;
}

void give_back(const StepStage& stage, TensorMap& taken, TensorMap& outputs) {
  for (auto& [name, t] : taken) outputs.emplace(stage.name + "." + name, std::move(t));
}

void run_references(const std::vector<StepStage>& stages, const Case& c, const TensorMap& inputs, TensorMap& outputs) {
  for (const StepStage& stage : stages) {
    const Case sc = stage.case_of(c);
    const TensorMap stage_inputs = host_stage_inputs(stage, inputs, outputs);
    TensorMap stage_outputs = take_outputs(stage, outputs);
    stage.component.reference(sc, stage_inputs, stage_outputs);
    give_back(stage, stage_outputs, outputs);
  }
}

#if DSV4H_GPU_LAYER
void launch_stages(const std::vector<StepStage>& stages, const Case& c, const DeviceTensorMap& inputs,
                   DeviceTensorMap& outputs, void* stream) {
  const auto names = [](const DeviceTensorMap& m) { return m.names(); };
  const auto alias = [](DeviceTensorMap& view, const std::string& as, const DeviceTensorMap& from,
                        const std::string& name, bool flat) {
    const DeviceTensor& t = from.at(name);
    if (!flat) return view.alias(as, t);
    const DeviceTensor column{t.dtype, {shape_numel(t.shape)}, DeviceBuffer::view_of(t.buffer)};
    view.alias(as, column);
  };
  for (const StepStage& stage : stages) {
    const DeviceTensorMap stage_inputs = stage_view(stage, inputs, outputs, names, alias);
    DeviceTensorMap stage_outputs;
    for (const std::string& name : outputs.names())
      if (owned_by(name, stage.name)) stage_outputs.alias(name.substr(stage.name.size() + 1), outputs.at(name));
    stage.component.gpu(stage.case_of(c), stage_inputs, stage_outputs, stream);
  }
}
#endif

}  // namespace

Case stage_case(const Component& component, const std::string& text, uint64_t seed) {
  auto [name, values] = split_case_string(text);
  if (name != component.name)
    throw std::logic_error("a step's stage of " + component.name + " was given the case \"" + text + "\"");
  return Case(name, component.params, values, seed);
}

Component compose_stages(Component step, std::vector<StepStage> stages, std::vector<std::string> slice_defaults) {
  const auto shared = std::make_shared<const std::vector<StepStage>>(std::move(stages));
  const std::string name = step.name;
  for (const StepStage& stage : *shared)
    if (stage.name.empty() || stage.name.find('.') != std::string::npos)
      throw std::logic_error(name + ": a stage name is non-empty and has no '.'");
  for (const StepStage& stage : *shared)
    for (const std::string& source : stage.component.kernel_sources)
      if (std::find(step.kernel_sources.begin(), step.kernel_sources.end(), source) == step.kernel_sources.end())
        step.kernel_sources.push_back(source);

  // A stage's own inputs come from its generator; inputs it takes from elsewhere are not the step's.
  step.make_inputs = [shared](const Case& c) {
    TensorMap inputs;
    for (const StepStage& stage : *shared)
      for (auto& [input, t] : stage.component.make_inputs(stage.case_of(c)))
        if (!stage.inputs.count(input)) inputs.emplace(stage.name + "." + input, std::move(t));
    return inputs;
  };
  step.make_outputs = [shared](const Case& c) {
    TensorMap outputs;
    for (const StepStage& stage : *shared)
      for (auto& [output, t] : stage.component.make_outputs(stage.case_of(c)))
        outputs.emplace(stage.name + "." + output, std::move(t));
    return outputs;
  };
  // A stage's inputs from an earlier stage are checked as that stage writes them: each stage is
  // validated, then, where a later stage reads its outputs, its reference run, in order (a later
  // stage may check values, not only shapes: the memory pool's lengths are >= 1).
  step.validate_inputs = [shared, name, make_outputs = step.make_outputs](const Case& c, const TensorMap& inputs) {
    for (const auto& [input, t] : inputs) {
      bool known = false;
      for (const StepStage& stage : *shared) {
        known = known || owned_by(input, stage.name);
        for (const auto& [as, source] : stage.inputs) known = known || source == input;
      }
      if (!known) throw BadInput(name + ": unknown input \"" + input + "\" (a step input is \"<stage>.<input>\")");
    }
    TensorMap outputs = make_outputs(c);
    for (const StepStage& stage : *shared) {
      const Case sc = stage.case_of(c);
      const TensorMap stage_inputs = host_stage_inputs(stage, inputs, outputs);
      stage.component.validate_inputs(sc, stage_inputs);
      bool read_later = false;
      for (const StepStage& later : *shared)
        for (const auto& [as, source] : later.inputs) read_later = read_later || owned_by(source, stage.name);
      if (!read_later) continue;
      TensorMap stage_outputs = take_outputs(stage, outputs);
      stage.component.reference(sc, stage_inputs, stage_outputs);
      give_back(stage, stage_outputs, outputs);
    }
  };
  step.reference = [shared](const Case& c, const TensorMap& inputs, TensorMap& outputs) {
    run_references(*shared, c, inputs, outputs);
  };
  step.work = [shared, make_outputs = step.make_outputs](const Case& c, const TensorMap& inputs) {
    TensorMap outputs = make_outputs(c);
    run_references(*shared, c, inputs, outputs);  // the later stages' work may depend on values
    WorkCount total;
    for (const StepStage& stage : *shared) {
      const WorkCount w = stage.component.work(stage.case_of(c), host_stage_inputs(stage, inputs, outputs));
      total.bytes_moved += w.bytes_moved;
      total.flops += w.flops;
    }
    return total;
  };
  step.unchecked = [shared](const Case& c, TensorMap& outputs, Poison poison) {
    for (const StepStage& stage : *shared) {
      TensorMap stage_outputs = take_outputs(stage, outputs);
      mask_unchecked(stage.component, stage.case_of(c), stage_outputs, poison);
      give_back(stage, stage_outputs, outputs);
    }
  };
  step.checks = [shared](const Case& c) {
    std::map<std::string, OutputCheck> checks;
    for (const StepStage& stage : *shared)
      if (stage.component.checks)
        for (auto [output, check] : stage.component.checks(stage.case_of(c))) {
          if (!check.scores.empty()) {
            const auto mapped = stage.inputs.find(check.scores);
            check.scores = mapped != stage.inputs.end() ? mapped->second : stage.name + "." + check.scores;
          }
          checks.emplace(stage.name + "." + output, check);
        }
    return checks;
  };

  // What the shell held is replaced, also where a stage cannot supply it.
  step.state_outputs.clear();
  for (const StepStage& stage : *shared)
    for (const std::string& output : stage.component.state_outputs) step.state_outputs.push_back(stage.name + "." + output);
  step.pad_batch = nullptr;
  step.slice_batch = nullptr;
  step.gpu = nullptr;

  bool every_stage_pads = true, every_stage_slices = true, every_stage_launches = true;
  for (const StepStage& stage : *shared) {
    every_stage_pads = every_stage_pads && static_cast<bool>(stage.component.pad_batch);
    every_stage_slices = every_stage_slices && static_cast<bool>(stage.component.slice_batch);
    every_stage_launches = every_stage_launches && static_cast<bool>(stage.component.gpu);
  }
  // Each stage slices the step inputs it owns (its batch counts the step's rows); what it reads
  // from an earlier stage is no input of the sub-step, which computes it again, but its slice of
  // those values says where the stage's output rows sit. A stage whose sub-case is not the
  // sub-step's stage case would check something else: a logic_error.
  if (every_stage_slices)
    step.slice_batch = [shared, name, params = step.params, batch_param = step.batch_param, slice_defaults,
                        make_outputs = step.make_outputs](const Case& c, const TensorMap& inputs, int64_t begin, int64_t end) {
      Case sub = c.with(batch_param, std::to_string(end - begin));
      for (const std::string& param : slice_defaults)
        for (const ParamSpec& spec : params)
          if (spec.name == param) sub = sub.with(param, spec.default_value);
      TensorMap outputs = make_outputs(c);
      run_references(*shared, c, inputs, outputs);
      BatchSlice slice{sub, {}, {}};
      for (const StepStage& stage : *shared) {
        const Case stage_case = stage.case_of(c);
        if (stage_case.integer(stage.component.batch_param) != c.integer(batch_param))
          throw std::logic_error(name + ": stage " + stage.name + "'s batch is not the step's rows");
        BatchSlice part = stage.component.slice_batch(stage_case, host_stage_inputs(stage, inputs, outputs), begin, end);
        if (part.c.str() != stage.case_of(sub).str())
          throw std::logic_error(name + ": stage " + stage.name + " slices to " + part.c.str() + ", the sub-step runs " +
                                 stage.case_of(sub).str());
        for (auto& [input, t] : part.inputs)
          if (inputs.count(stage.name + "." + input)) slice.inputs.emplace(stage.name + "." + input, std::move(t));
        for (const auto& [output, row] : part.output_rows) slice.output_rows.emplace(stage.name + "." + output, row);
      }
      return slice;
    };
  // Each stage pads the step inputs it owns at its own bucket (its batch parameter at the step's
  // bucket case), seeing only those; what later stages read from earlier ones is padded by being
  // computed from padded inputs.
  if (every_stage_pads)
    step.pad_batch = [shared, batch_param = step.batch_param](const Case& c, const TensorMap& inputs, int64_t bucket) {
      TensorMap padded = inputs;
      const Case bucket_case = c.with(batch_param, std::to_string(bucket));
      for (const StepStage& stage : *shared) {
        TensorMap own;
        for (const auto& [input, t] : inputs)
          if (owned_by(input, stage.name)) own.emplace(input.substr(stage.name.size() + 1), t);
        if (own.empty()) continue;
        const int64_t stage_bucket = stage.case_of(bucket_case).integer(stage.component.batch_param);
        for (auto& [input, t] : stage.component.pad_batch(stage.case_of(c), own, stage_bucket))
          padded.at(stage.name + "." + input) = std::move(t);
      }
      return padded;
    };
#if DSV4H_GPU_LAYER
  if (every_stage_launches)
    step.gpu = [shared](const Case& c, const DeviceTensorMap& inputs, DeviceTensorMap& outputs, void* stream) {
      launch_stages(*shared, c, inputs, outputs, stream);
    };
#endif
  return step;
}

}  // namespace dsv4h
