#include "weights.h"

#include <cmath>
#include <cstring>
#include <numeric>
#include <set>
#include <stdexcept>

#include "reference/errors.h"
#include "reference/narrow_float.h"

namespace dsv4h::model {
namespace {

using reference::bf16_to_float;
using reference::double_to_bf16;
using reference::double_to_fp8_e4m3;
using reference::fp8_e4m3_to_float;

constexpr int64_t kBlock = 128;  // DeepSeek's FP8 weight scale blocks

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void add_block(const ModelConfig& c, int64_t layer, const std::string& p, std::vector<WeightSpec>& specs) {
  const int64_t dim = c.dim, hc = c.hc_mult, mix = c.hc_mix(), H = c.n_heads, hd = c.head_dim;
  const auto bf16 = StDtype::BF16, f32 = StDtype::F32;
  for (const char* sub : {"attn", "ffn"}) {
    specs.push_back({p + sub + "_norm.weight", {dim}, f32});
    specs.push_back({p + "hc_" + sub + "_fn", {mix, hc * dim}, f32});
    specs.push_back({p + "hc_" + sub + "_base", {mix}, f32});
    specs.push_back({p + "hc_" + sub + "_scale", {3}, f32});
  }
  const std::string a = p + "attn.";
  specs.push_back({a + "attn_sink", {H}, f32});
  specs.push_back({a + "wq_a.weight", {c.q_lora_rank, dim}, bf16});
  specs.push_back({a + "q_norm.weight", {c.q_lora_rank}, f32});
  specs.push_back({a + "wq_b.weight", {H * hd, c.q_lora_rank}, bf16});
  specs.push_back({a + "wkv.weight", {hd, dim}, bf16});
  specs.push_back({a + "kv_norm.weight", {hd}, f32});
  specs.push_back({a + "wo_a.weight", {c.o_groups * c.o_lora_rank, H * hd / c.o_groups}, bf16});
  specs.push_back({a + "wo_b.weight", {dim, c.o_groups * c.o_lora_rank}, bf16});
  const int64_t ratio = c.compress_ratios[layer];
  auto compressor = [&](const std::string& q, int64_t d) {
    const int64_t coff = ratio == 4 ? 2 : 1;
    specs.push_back({q + "ape", {ratio, coff * d}, f32});
    specs.push_back({q + "wkv.weight", {coff * d, dim}, f32});
    specs.push_back({q + "wgate.weight", {coff * d, dim}, f32});
    specs.push_back({q + "norm.weight", {d}, f32});
  };
  if (ratio != 0) compressor(a + "compressor.", hd);
  if (ratio == 4) {
    specs.push_back({a + "indexer.wq_b.weight", {c.index_n_heads * c.index_head_dim, c.q_lora_rank}, bf16});
    specs.push_back({a + "indexer.weights_proj.weight", {c.index_n_heads, dim}, bf16});
    compressor(a + "indexer.compressor.", c.index_head_dim);
  }
  const std::string f = p + "ffn.";
  specs.push_back({f + "gate.weight", {c.n_routed_experts, dim}, bf16});
  if (layer < c.n_hash_layers)
    specs.push_back({f + "gate.tid2eid", {c.vocab_size, c.n_activated_experts}, StDtype::I32});
  else
    specs.push_back({f + "gate.bias", {c.n_routed_experts}, f32});
  auto expert = [&](const std::string& e) {
    specs.push_back({e + "w1.weight", {c.moe_inter_dim, dim}, bf16});
    specs.push_back({e + "w2.weight", {dim, c.moe_inter_dim}, bf16});
    specs.push_back({e + "w3.weight", {c.moe_inter_dim, dim}, bf16});
  };
  for (int64_t e = 0; e < c.n_routed_experts; ++e) expert(f + "experts." + std::to_string(e) + ".");
  expert(f + "shared_experts.");
}

void add_head(const ModelConfig& c, const std::string& p, std::vector<WeightSpec>& specs) {
  specs.push_back({p + "norm.weight", {c.dim}, StDtype::F32});
  specs.push_back({p + "hc_head_fn", {c.hc_mult, c.hc_mult * c.dim}, StDtype::F32});
  specs.push_back({p + "hc_head_base", {c.hc_mult}, StDtype::F32});
  specs.push_back({p + "hc_head_scale", {1}, StDtype::F32});
}

// splitmix64: a fixed, platform-independent stream (std's distributions are not).
struct Stream {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform(double lo, double hi) { return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1p-53; }
};

uint64_t name_hash(const std::string& name) {  // FNV-1a
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : name) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

double stored(double v, StDtype dtype) {
  return dtype == StDtype::BF16 ? bf16_to_float(double_to_bf16(v)) : static_cast<double>(static_cast<float>(v));
}

// Values of one tensor: ranges chosen by what the tensor does (the caller rounds them).
std::vector<double> seeded_values(const ModelConfig& c, const WeightSpec& spec, Stream& s) {
  const int64_t n = std::accumulate(spec.shape.begin(), spec.shape.end(), int64_t{1}, std::multiplies<>());
  std::vector<double> v(static_cast<size_t>(n));
  if (ends_with(spec.name, "tid2eid")) {  // distinct experts per token
    for (int64_t t = 0; t < spec.shape[0]; ++t) {
      std::vector<int64_t> experts(static_cast<size_t>(c.n_routed_experts));
      std::iota(experts.begin(), experts.end(), 0);
      for (int64_t k = 0; k < spec.shape[1]; ++k) {
        const int64_t pick = k + static_cast<int64_t>(s.next() % static_cast<uint64_t>(c.n_routed_experts - k));
        std::swap(experts[k], experts[pick]);
        v[t * spec.shape[1] + k] = static_cast<double>(experts[k]);
      }
    }
    return v;
  }
  const auto [lo, hi] = weight_range(spec);
  for (double& x : v) x = s.uniform(lo, hi);
  return v;
}

int ue8m0_exponent(double amax) {  // the smallest e with amax / 2^e <= 448
  if (amax == 0) return 0;
  int e = static_cast<int>(std::ceil(std::log2(amax / 448.0)));
  while (amax / std::ldexp(1.0, e) > 448) ++e;
  while (amax / std::ldexp(1.0, e - 1) <= 448) --e;
  return e;
}

void write_value(StTensor& t, int64_t i, double v) {
  uint8_t* b = t.bytes.data() + i * st_dtype_bytes(t.dtype);
  uint32_t bits = 0;
  switch (t.dtype) {
    case StDtype::BF16: bits = double_to_bf16(v); break;
    case StDtype::F32: {
      const float f = static_cast<float>(v);
      std::memcpy(&bits, &f, 4);
      break;
    }
    case StDtype::I32: bits = static_cast<uint32_t>(static_cast<int32_t>(v)); break;
    default: throw std::logic_error("write_value: unsupported dtype");
  }
  for (int64_t k = 0; k < st_dtype_bytes(t.dtype); ++k) b[k] = static_cast<uint8_t>(bits >> (8 * k));
}

StTensor empty_tensor(const std::string& name, StDtype dtype, std::vector<int64_t> shape) {
  StTensor t{name, dtype, std::move(shape), {}};
  t.bytes.assign(static_cast<size_t>(t.numel() * st_dtype_bytes(dtype)), 0);
  return t;
}

std::string scale_name(const std::string& weight_name) {
  return weight_name.substr(0, weight_name.size() - std::string(".weight").size()) + ".scale";
}

}  // namespace

std::pair<double, double> weight_range(const WeightSpec& spec) {
  if (ends_with(spec.name, "norm.weight")) return {0.9, 1.1};
  if (ends_with(spec.name, "_scale")) return {0.3, 0.7};
  if (ends_with(spec.name, "gate.bias")) return {-0.1, 0.1};
  if (ends_with(spec.name, "ape")) return {-0.5, 0.5};
  if (spec.shape.size() != 2 || ends_with(spec.name, "embed.weight")) return {-1, 1};
  double a = std::sqrt(3.0 / static_cast<double>(spec.shape[1]));  // unit gain: var = a^2/3 * in
  // The experts' gate and up projections at gain 4 put about 1% of their values beyond
  // swiglu_limit 10, so that the clamp changes the model's output (a missing clamp is seen);
  // their down projection at gain 1/4 keeps the MoE's output of order one.
  if (ends_with(spec.name, "w1.weight") || ends_with(spec.name, "w3.weight")) a *= 4;
  if (ends_with(spec.name, "w2.weight")) a /= 4;
  return {-a, a};
}

std::vector<WeightSpec> weight_specs(const ModelConfig& c) {
  std::vector<WeightSpec> specs;
  specs.push_back({"embed.weight", {c.vocab_size, c.dim}, StDtype::BF16});
  for (int64_t l = 0; l < c.n_layers; ++l) add_block(c, l, "layers." + std::to_string(l) + ".", specs);
  add_head(c, "", specs);
  specs.push_back({"head.weight", {c.vocab_size, c.dim}, StDtype::BF16});
  for (int64_t m = 0; m < c.n_mtp_layers; ++m) {
    const std::string p = "mtp." + std::to_string(m) + ".";
    add_block(c, c.n_layers + m, p, specs);
    specs.push_back({p + "e_proj.weight", {c.dim, c.dim}, StDtype::BF16});
    specs.push_back({p + "h_proj.weight", {c.dim, c.dim}, StDtype::BF16});
    specs.push_back({p + "enorm.weight", {c.dim}, StDtype::F32});
    specs.push_back({p + "hnorm.weight", {c.dim}, StDtype::F32});
    add_head(c, p, specs);
  }
  return specs;
}

const Tensor& Weights::tensor(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) throw std::out_of_range("weights: no tensor \"" + name + "\"");
  return it->second;
}

Eigen::Map<const RowMatrix> Weights::matrix(const std::string& name) const {
  const Tensor& t = tensor(name);
  const int64_t rows = t.shape.at(0), cols = t.shape.size() > 1 ? t.shape[1] : 1;
  return Eigen::Map<const RowMatrix>(t.values.data(), rows, cols);
}

Eigen::Map<const Eigen::VectorXd> Weights::vector(const std::string& name) const {
  const Tensor& t = tensor(name);
  return Eigen::Map<const Eigen::VectorXd>(t.values.data(), static_cast<int64_t>(t.values.size()));
}

Weights make_weights(const ModelConfig& config, uint64_t seed) {
  Weights weights;
  for (const WeightSpec& spec : weight_specs(config)) {
    Stream s{seed * 0x9E3779B97F4A7C15ull ^ name_hash(spec.name)};
    std::vector<double> values = seeded_values(config, spec, s);
    if (spec.dtype != StDtype::I32)
      for (double& v : values) v = stored(v, spec.dtype);
    weights.set(spec.name, {spec.shape, std::move(values)});
  }
  return weights;
}

std::vector<double> fp8_block128_qdq(const std::vector<double>& values, int64_t rows, int64_t cols) {
  std::vector<double> out(values.size());
  for (int64_t r0 = 0; r0 < rows; r0 += kBlock)
    for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
      double amax = 0;
      for (int64_t r = r0; r < std::min(rows, r0 + kBlock); ++r)
        for (int64_t c = c0; c < std::min(cols, c0 + kBlock); ++c) amax = std::max(amax, std::abs(values[r * cols + c]));
      const double scale = std::ldexp(1.0, ue8m0_exponent(amax));
      for (int64_t r = r0; r < std::min(rows, r0 + kBlock); ++r)
        for (int64_t c = c0; c < std::min(cols, c0 + kBlock); ++c)
          out[r * cols + c] = fp8_e4m3_to_float(double_to_fp8_e4m3(values[r * cols + c] / scale)) * scale;
    }
  return out;
}

void save_weights(const ModelConfig& config, const Weights& weights, const std::string& path, LinearFormat format) {
  std::vector<StTensor> tensors;
  for (const WeightSpec& spec : weight_specs(config)) {
    const Tensor& w = weights.tensor(spec.name);
    const bool fp8 = format == LinearFormat::FP8_BLOCK128 && spec.dtype == StDtype::BF16 && spec.shape.size() == 2;
    if (!fp8) {
      StTensor t = empty_tensor(spec.name, spec.dtype, spec.shape);
      for (int64_t i = 0; i < t.numel(); ++i) write_value(t, i, w.values[i]);
      tensors.push_back(std::move(t));
      continue;
    }
    const int64_t rows = spec.shape[0], cols = spec.shape[1];
    StTensor q = empty_tensor(spec.name, StDtype::F8_E4M3, spec.shape);
    StTensor sc = empty_tensor(scale_name(spec.name), StDtype::F8_E8M0, {(rows + kBlock - 1) / kBlock, (cols + kBlock - 1) / kBlock});
    for (int64_t br = 0; br < sc.shape[0]; ++br)
      for (int64_t bc = 0; bc < sc.shape[1]; ++bc) {
        double amax = 0;
        for (int64_t r = br * kBlock; r < std::min(rows, (br + 1) * kBlock); ++r)
          for (int64_t c = bc * kBlock; c < std::min(cols, (bc + 1) * kBlock); ++c) amax = std::max(amax, std::abs(w.values[r * cols + c]));
        const int e = ue8m0_exponent(amax);
        sc.bytes[br * sc.shape[1] + bc] = static_cast<uint8_t>(e + 127);
        for (int64_t r = br * kBlock; r < std::min(rows, (br + 1) * kBlock); ++r)
          for (int64_t c = bc * kBlock; c < std::min(cols, (bc + 1) * kBlock); ++c)
            q.bytes[r * cols + c] = double_to_fp8_e4m3(std::ldexp(w.values[r * cols + c], -e));
      }
    tensors.push_back(std::move(q));
    tensors.push_back(std::move(sc));
  }
  write_safetensors(path, tensors);
}

Weights weights_from_tensors(const ModelConfig& config, const std::vector<StTensor>& tensors, const std::string& where) {
  std::map<std::string, const StTensor*> by_name;
  for (const StTensor& t : tensors)
    if (!by_name.emplace(t.name, &t).second) throw BadInput(where + ": tensor \"" + t.name + "\" appears twice");
  std::set<std::string> used;
  Weights weights;
  for (const WeightSpec& spec : weight_specs(config)) {
    const std::string at = where + ": tensor \"" + spec.name + "\"";
    const auto it = by_name.find(spec.name);
    if (it == by_name.end()) throw BadInput(at + " is missing");
    const StTensor& t = *it->second;
    used.insert(spec.name);
    if (t.shape != spec.shape)
      throw BadInput(at + " has shape " + shape_text(t.shape) + ", the config needs " + shape_text(spec.shape));
    const bool is_int = spec.dtype == StDtype::I32;
    const bool fp8 = t.dtype == StDtype::F8_E4M3;
    const bool ok = is_int ? (t.dtype == StDtype::I32 || t.dtype == StDtype::I64)
                           : (t.dtype == StDtype::BF16 || t.dtype == StDtype::F32 ||
                              (fp8 && spec.dtype == StDtype::BF16 && spec.shape.size() == 2));
    if (!ok) throw BadInput(at + " has dtype " + st_dtype_name(t.dtype) + ", expected " + st_dtype_name(spec.dtype));
    Tensor out{spec.shape, std::vector<double>(static_cast<size_t>(t.numel()))};
    for (int64_t i = 0; i < t.numel(); ++i) out.values[i] = st_value(t, i);
    if (fp8) {
      const std::string sname = scale_name(spec.name);
      const auto s = by_name.find(sname);
      if (s == by_name.end()) throw BadInput(at + " is FP8 but its scale tensor \"" + sname + "\" is missing");
      used.insert(sname);
      const StTensor& sc = *s->second;
      const int64_t rows = spec.shape[0], cols = spec.shape[1];
      const std::vector<int64_t> scale_shape{(rows + kBlock - 1) / kBlock, (cols + kBlock - 1) / kBlock};
      if (sc.shape != scale_shape)
        throw BadInput(where + ": tensor \"" + sname + "\" has shape " + shape_text(sc.shape) + ", the 128x128 blocks of " +
                       shape_text(spec.shape) + " need " + shape_text(scale_shape));
      if (sc.dtype != StDtype::F8_E8M0 && sc.dtype != StDtype::F32)
        throw BadInput(where + ": tensor \"" + sname + "\" has dtype " + st_dtype_name(sc.dtype) + ", expected F8_E8M0 or F32");
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) out.values[r * cols + c] *= st_value(sc, (r / kBlock) * scale_shape[1] + c / kBlock);
    }
    for (size_t i = 0; i < out.values.size(); ++i) {
      const double v = out.values[i];
      if (!std::isfinite(v)) throw BadInput(at + " holds a non-finite value at flat index " + std::to_string(i));
      if (is_int && (v < 0 || v >= static_cast<double>(config.n_routed_experts)))
        throw BadInput(at + " holds expert id " + std::to_string(static_cast<int64_t>(v)) + " at flat index " +
                       std::to_string(i) + ", outside [0, " + std::to_string(config.n_routed_experts) + ")");
    }
    weights.set(spec.name, std::move(out));
  }
  for (const StTensor& t : tensors)
    if (!used.count(t.name)) throw BadInput(where + ": unexpected tensor \"" + t.name + "\" (not in the config's model)");
  return weights;
}

Weights load_weights(const ModelConfig& config, const std::string& path) {
  return weights_from_tensors(config, read_safetensors(path), path);
}

}  // namespace dsv4h::model
