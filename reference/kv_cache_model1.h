// CPU reference of FlashMLA's MODEL1_FP8Sparse latent cache layout (spec 4.1), the page format of
// the SWA, C4 and C128 pools of the DeepSeek-V4 memory pool (issue 4).
//
// A token is a 512-dim bf16 latent: 448 "nope" dims stored as fp8 e4m3 in 7 tiles of 64, each tile
// with a power-of-two scale stored as a ue8m0 byte (2^(byte - 127)), and 64 rope dims stored as
// bf16 as they are. A page of P tokens has two sections:
//   data:   token t at t * 576:         [0, 448) fp8 nope | [448, 576) bf16 rope (little endian)
//   scales: token t at P * 576 + t * 8: 7 scale bytes | 1 pad byte (written 0)
// and is padded to a multiple of 576 bytes: ceil(P * 584 / 576) * 576.
#pragma once

#include <cstdint>

namespace dsv4h::reference {

constexpr int kModel1Dims = 512;
constexpr int kModel1NopeDims = 448;
constexpr int kModel1RopeDims = 64;
constexpr int kModel1TileDims = 64;
constexpr int kModel1Tiles = 7;
constexpr int kModel1DataBytes = 576;  // per token in the data section
constexpr int kModel1TokenBytes = 584;

int64_t model1_page_bytes(int64_t tokens_per_page);

// The scale exponent e of a tile whose largest magnitude is `amax`: the smallest e with
// amax / 2^e <= 448, where amax / 448 is first raised to at least 1e-4 (FlashMLA's quant.py:
// 2^ceil(log2(max(amax / 448, 1e-4)))), computed exactly rather than through a float log2.
int model1_scale_exponent(float amax);

// Writes token t's bytes (and nothing else) into `page`; the latent is 512 bf16 bit patterns.
void model1_pack_token(const uint16_t* latent_bf16, int64_t tokens_per_page, int64_t t, uint8_t* page);

// Reads token t back: fp8 value * 2^e (exact in bf16) for the nope dims, the rope dims as stored.
void model1_unpack_token(const uint8_t* page, int64_t tokens_per_page, int64_t t, uint16_t* latent_bf16);

}  // namespace dsv4h::reference
