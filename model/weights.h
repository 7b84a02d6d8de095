// The model's weights: names and shapes after DeepSeek's checkpoint (inference/model.py's module
// names: embed.weight, layers.L.attn.wq_a.weight, layers.L.ffn.experts.E.w1.weight, mtp.0.e_proj.weight,
// ...), made deterministically from a seed, and read from and written to safetensors.
// Values are held in fp64 but are exactly representable in their stored dtype (bf16 for the
// linear layers and the embedding, fp32 for norms, mHC, sinks, compressor ape and gate bias, int32
// for the hash routing table), so a write and a read give the same weights.
#pragma once

#include <Eigen/Dense>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "model/config.h"
#include "model/safetensors.h"

namespace dsv4h::model {

using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct WeightSpec {
  std::string name;
  std::vector<int64_t> shape;  // [out, in] for a linear layer, as torch stores it
  StDtype dtype;               // BF16, F32 or I32
};

// Every tensor the config's model holds, in a fixed order.
std::vector<WeightSpec> weight_specs(const ModelConfig& config);

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<double> values;  // row major
};

class Weights {
 public:
  // A 2-D tensor as a matrix; a 1-D one as a column.
  Eigen::Map<const RowMatrix> matrix(const std::string& name) const;
  Eigen::Map<const Eigen::VectorXd> vector(const std::string& name) const;
  const Tensor& tensor(const std::string& name) const;
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  void set(const std::string& name, Tensor tensor) { tensors_[name] = std::move(tensor); }
  const std::map<std::string, Tensor>& all() const { return tensors_; }

 private:
  std::map<std::string, Tensor> tensors_;
};

// The uniform range [lo, hi) make_weights draws a tensor's values from, by what the tensor does
// (the hash routing tables, tid2eid, are expert ids instead).
std::pair<double, double> weight_range(const WeightSpec& spec);

// Deterministic weights: each tensor from its own stream keyed by (seed, name), scaled so that the
// activations of every layer stay of order one.
Weights make_weights(const ModelConfig& config, uint64_t seed);

// How the 2-D BF16 weights (linear layers) are written: as BF16, or as FP8 e4m3 with one ue8m0
// scale per 128x128 block in "<prefix>.scale" (F8_E8M0), as DeepSeek's checkpoint stores them.
enum class LinearFormat { BF16, FP8_BLOCK128 };

void save_weights(const ModelConfig& config, const Weights& weights, const std::string& path,
                  LinearFormat format = LinearFormat::BF16);
// Reads and checks a file against the config: a tensor missing, unexpected, of the wrong shape or
// dtype, its scales missing or misshapen, a non-finite value or an expert id out of range is
// BadInput naming the tensor. FP8 weights come back dequantised.
Weights load_weights(const ModelConfig& config, const std::string& path);
Weights weights_from_tensors(const ModelConfig& config, const std::vector<StTensor>& tensors, const std::string& where);

// The FP8 block-128 quantise-dequantise save_weights applies (for tests).
std::vector<double> fp8_block128_qdq(const std::vector<double>& values, int64_t rows, int64_t cols);

}  // namespace dsv4h::model
