// The attn_metadata and mtp_expand descriptors on the CPU: a batch padded to a larger bucket (as
// graph replay pads it) gives the real batch's rows followed by padding rows, staging rows beyond
// the real ones stay unwritten, and bad inputs are refused naming the field and value.
#include <gtest/gtest.h>

#include "harness/component.h"
#include "harness/errors.h"
#include "harness/poison.h"
#include "reference/attn_metadata.h"

namespace dsv4h {
namespace {

void expect_rows_equal(const HostTensor& got, int64_t begin, const HostTensor& want, const std::string& what) {
  const HostTensor part = got.rows(begin, begin + want.shape()[0]);
  ASSERT_EQ(part.numel(), want.numel()) << what;
  for (int64_t i = 0; i < want.numel(); ++i) ASSERT_EQ(part.bits(i), want.bits(i)) << what << " at " << want.index_string(i);
}

TEST(AttnMetadataComponent, PaddedBatchIsTheRealRowsThenPadding) {
  const Component& component = registry().get("attn_metadata");
  for (const char* text : {"attn_metadata(bs=3,mode=0,ctx=700,max_seq_len=600,seed=5)",
                           "attn_metadata(bs=3,mode=1,extend=4,ctx=700,seed=6)",
                           "attn_metadata(bs=3,mode=2,extend=2,ctx=700,seed=7)",
                           "attn_metadata(bs=3,mode=3,topk=3,ctx=700,seed=8)"}) {
    SCOPED_TRACE(text);
    const Case real = parse_case(text);
    const TensorMap inputs = component.make_inputs(real);
    const TensorMap alone = reference_outputs(component, real, inputs, Poison::a);
    const Case bucket = real.with("bs", "8");
    const TensorMap padded = reference_outputs(component, bucket, component.pad_batch(real, inputs, 8), Poison::a);
    const int64_t n = alone.at("temp_num_rows").data<int32_t>()[0];
    EXPECT_EQ(padded.at("temp_num_rows").data<int32_t>()[0], n);
    for (const reference::MetadataField& f : reference::kMetadataFields) {
      const HostTensor& buffer = padded.at(f.name);
      expect_rows_equal(buffer, 0, alone.at(f.name).rows(0, n), f.name);
      for (int64_t i = n * buffer.shape()[1]; i < buffer.numel(); ++i)
        ASSERT_EQ(buffer.data<int32_t>()[i], f.padding) << f.name << " tail " << buffer.index_string(i);
      const HostTensor& staging = padded.at(std::string("temp_") + f.name);
      for (int64_t i = n * staging.shape()[1]; i < staging.numel(); ++i)
        ASSERT_TRUE(is_poison(staging, i, Poison::a)) << "temp_" << f.name << " written at " << staging.index_string(i);
    }
    expect_rows_equal(padded.at("swa_gathered"), 0, alone.at("swa_gathered").rows(0, n), "swa_gathered");
  }
}

TEST(MtpExpandComponent, PaddedRequestsExpandToPaddingRows) {
  const Component& component = registry().get("mtp_expand");
  const Case real = parse_case("mtp_expand(bs=3,topk=4,ctx=600,seed=9)");
  const TensorMap inputs = component.make_inputs(real);
  const TensorMap alone = reference_outputs(component, real, inputs, Poison::a);
  const TensorMap padded = reference_outputs(component, real.with("bs", "5"), component.pad_batch(real, inputs, 5), Poison::a);
  for (const reference::MetadataField& f : reference::kMetadataFields) {
    expect_rows_equal(padded.at(f.name), 0, alone.at(f.name), f.name);
    const HostTensor& t = padded.at(f.name);
    for (int64_t i = 12 * t.shape()[1]; i < t.numel(); ++i) ASSERT_EQ(t.data<int32_t>()[i], f.padding) << f.name;
  }
}

void expect_bad_input(const Case& c, const TensorMap& inputs, const std::string& mentions) {
  try {
    registry().get(c.component()).validate_inputs(c, inputs);
    FAIL() << "accepted: " << mentions;
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find(mentions), std::string::npos) << e.what();
  }
}

TEST(AttnMetadataComponent, BadInputsNameTheFieldAndValue) {
  const Component& component = registry().get("attn_metadata");
  const Case c = parse_case("attn_metadata(bs=4,mode=2,extend=3,ctx=512,pool=8,seed=3)");
  const TensorMap good = component.make_inputs(c);
  TensorMap in = good;
  in["num_reqs"].data<int32_t>()[0] = 5;
  expect_bad_input(c, in, "num_reqs[0] = 5: more real requests than the bucket's bs = 4");
  in = good;
  in["extend_lens"].data<int32_t>()[2] = 2;
  expect_bad_input(c, in, "extend_lens[2] = 2: does not fit the mode");
  in = good;
  in["seq_lens"].data<int32_t>()[1] = 513;
  expect_bad_input(c, in, "seq_lens[1] = 513");
  in = good;
  in["req_pool_indices"].data<int32_t>()[0] = 8;
  expect_bad_input(c, in, "req_pool_indices[0] = 8: outside the pool");
  in = good;
  in["full_to_swa"].data<int32_t>()[7] = -1;
  expect_bad_input(c, in, "full_to_swa[7] = -1");
  in = good;
  in.erase("swa_kv");
  expect_bad_input(c, in, "input \"swa_kv\" is missing");
  EXPECT_THROW(component.make_inputs(parse_case("attn_metadata(bs=8,real=9)")), BadInput);
  EXPECT_THROW(component.make_inputs(parse_case("attn_metadata(mode=3,topk=0)")), BadInput);
}

}  // namespace
}  // namespace dsv4h
