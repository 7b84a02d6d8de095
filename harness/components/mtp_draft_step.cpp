// Descriptor of `mtp_draft_step`, the first composed step (step.h; spec 6 and 7): the draft layer's
// metadata of a decode step built straight into the graph buffers (attn_metadata, mode 0: one row
// per request), then those buffers' per-request fields the draft layer reads (mtp_expand, fields=1:
// out location, lengths, position, SWA indices) expanded to the bs * topk draft rows. The names and
// shapes line up with no adapter: attn_metadata's buffer fields in decode mode are [bs, cols] at the
// capture widths of (ctx, index_topk), which are mtp_expand's inputs at the same ctx and index_topk.
// It has no mutants of its own: its stages' mutants break it too (each judged on its own stage's
// checks). Its gpu_tests filter selects the generic component tests of its name and its own
// (tests/gpu/test_steps_graph.cpp), which the noop mutant must fail.
#include <string>

#include "../step.h"

namespace dsv4h {

Component attn_metadata_component();
Component mtp_expand_component();

namespace {

struct Params {
  int64_t bs = 8, real = -1, topk = 2, ctx = 1024, max_seq_len = -1, index_topk = 512, pool = 256, swa_slots = 65536;
  int64_t write_temp = 0;
  template <typename F>
  void fields(F& f) {
    f("bs", bs, "requests the buffer set holds (the captured bucket)");
    f("real", real, "real requests n <= bs (num_reqs, device data); -1 = bs");
    f("topk", topk, "draft rows per request");
    f("ctx", ctx, "req_to_token columns = MAX_SEQ_LEN_FOR_CAPTURE (the buffers' widths)");
    f("max_seq_len", max_seq_len, "longest sequence of the step (the staging widths); -1 = ctx");
    f("index_topk", index_topk, "c4_sparse_page_indices columns");
    f("pool", pool, "request slots of req_to_token");
    f("swa_slots", swa_slots, "SWA slots (full_to_swa's range)");
    f("temp", write_temp, "1: the metadata's staging set is written too (an eager step); 0: a replay's update");
  }
};
using StepCase = CaseOf<Params>;

std::string str(int64_t v) { return std::to_string(v); }

}  // namespace

Component mtp_draft_step_component() {
  StepDescriptor<Params> d;
  d.name = "mtp_draft_step";
  d.summary = "composed MTP draft step: decode metadata built into the graph buffers, then the draft layer's fields expanded to bs*topk rows";
  d.verify_cases = {
      "mtp_draft_step(bs=1,topk=1)",
      "mtp_draft_step(bs=8,real=5,topk=3)",
      "mtp_draft_step(bs=8,real=3,topk=2,ctx=2048,max_seq_len=700,temp=1)",
      "mtp_draft_step(bs=64,topk=4,ctx=4096,max_seq_len=2000)",
      "mtp_draft_step(bs=4,real=0,topk=2)",
  };
  d.batch_param = "bs";
  d.replay_case = "mtp_draft_step(bs=1,topk=2,ctx=2048,max_seq_len=1300)";
  d.gpu_tests = "*MtpDraftStep*";
  d.relation_cases = {
      "batch_invariance(chunks=3):mtp_draft_step(bs=16,real=11,topk=3,ctx=2048,max_seq_len=1300)",
      "batch_invariance(chunks=4):mtp_draft_step(bs=9,topk=2,temp=1)",
  };
  d.slice_defaults = {"real"};  // a sub-batch's real requests are its num_reqs input
  d.stages = {
      {"meta", attn_metadata_component(),
       [](const StepCase& c) {
         return "attn_metadata(bs=" + str(c.bs) + ",real=" + str(c.real) + ",mode=0,ctx=" + str(c.ctx) +
                ",max_seq_len=" + str(c.max_seq_len) + ",index_topk=" + str(c.index_topk) + ",pool=" + str(c.pool) +
                ",swa_slots=" + str(c.swa_slots) + ",temp=" + str(c.write_temp) + ")";
       },
       {}},
      {"expand", mtp_expand_component(),
       [](const StepCase& c) {
         return "mtp_expand(bs=" + str(c.bs) + ",topk=" + str(c.topk) + ",ctx=" + str(c.ctx) +
                ",index_topk=" + str(c.index_topk) + ",fields=1)";
       },
       {{"raw_out_loc", "meta.raw_out_loc"},
        {"seq_lens_casual", "meta.seq_lens_casual"},
        {"positions_casual", "meta.positions_casual"},
        {"swa_page_indices", "meta.swa_page_indices"},
        {"swa_topk_lengths", "meta.swa_topk_lengths"}}},
  };
  return compose(std::move(d));
}

}  // namespace dsv4h
