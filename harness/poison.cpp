#include "poison.h"

namespace dsv4h {

// Float poisons are quiet NaNs with payloads no arithmetic produces (fp8 e4m3fn has only two NaN
// codes, so its variants are those two); integer poisons are sentinels far from any index.
uint64_t poison_bits(DType dtype, Poison variant) {
  const bool a = variant == Poison::a;
  switch (dtype) {
    case DType::f32: return a ? 0x7fc0deadu : 0xffc0beefu;
    case DType::bf16: return a ? 0x7fd5u : 0xffa3u;
    case DType::fp8_e4m3: return a ? 0x7fu : 0xffu;
    case DType::i32: return a ? 0xdeadbeefu : 0x0badf00du;
    case DType::i64: return a ? 0xdeadbeefdeadbeefull : 0x0badf00d0badf00dull;
    case DType::u8: return a ? 0xa5u : 0x5au;
  }
  return 0;
}

void fill_poison(HostTensor& t, Poison variant) {
  const uint64_t bits = poison_bits(t.dtype(), variant);
  for (int64_t i = 0; i < t.numel(); ++i) t.set_bits(i, bits);
}

bool is_poison(const HostTensor& t, int64_t i, Poison variant) {
  return t.bits(i) == poison_bits(t.dtype(), variant);
}

void fill_poison(TensorMap& tensors, Poison variant) {
  for (auto& [name, t] : tensors) fill_poison(t, variant);
}

}  // namespace dsv4h
