// Descriptor of `c4_decode_step`, the composed decode step of a C4 layer (step.h; spec 3.2, 3.3,
// 4.1-4.3, 5.2, 6, 9.1; issue 29), one row a request:
//   meta      attn_metadata, mode 0: the step's metadata built into the graph buffers;
//   pool      memory_pool: every layer's SWA store of the step's token latents, at the metadata's
//             out locations and lengths (its layer 1 and 2 also store their c4/c128 latents);
//   compress  compressor, ratio 4, decode: each request's token into its state ring, and the entry
//             of a block its token completes (seq_len % 4 == 0), packed at the metadata's c4_out_loc;
//   idx       indexer select: scores and top-k over the C4 indexer cache, at the metadata's positions
//             and through its page table;
//   translate indexer translate: raw top-k indices to C4 page slots through the same page table.
//
// What lines up, and the adaptations (each a stage case parameter, stated here):
// - The metadata's one-column fields [bs, 1] are per-row vectors [bs] of the later stages
//   (step.h's `flat`): raw_out_loc and seq_lens_casual are the pool's out_cache_loc and seq_lens,
//   positions_casual the compressor's start and the indexer's positions, c4_out_loc the
//   compressor's out_loc.
// - The metadata's page_table is the C4 page table: C4 entry j lives in full page (4j+3) / 256,
//   slot full_loc(4j+3) / 4 = page * 64 + j % 64 (spec 5.2), so column c of page_table names the
//   C4 page of entries 64c..64c+63, and ceil(ctx / 256) columns are the indexer's ceil(ctx / 4 / 64)
//   pages when ctx % 4 == 0 (required).
// - Slot ranges: the full pool has (pool * ceil(ctx/256) + 1) pages (req_to_token's pages and page 0),
//   which are the memory pool's full_pages, the indexer cache's pool_pages, and 64 compressor
//   slots each (`slots`).
// - The metadata's full_to_swa feeds the pool; `swa_distinct=1` gives it an allocator's shape (page 0
//   to the sink, each row's out slot to its own SWA slot), without which two rows would store to
//   one SWA slot. The pool's generator, which still draws its unwired inputs (stale_swa_loc) from
//   its own allocator, takes one SWA page a request: swa_page 1 and window 1 keep its SWA pool at
//   swa_slots entries (swa_pages = swa_slots).
// What stays a step input, and why:
// - compress.extend_len / ring_index / ring: the state is per request and the metadata has no
//   such field (its extend_lens input is 1 on padding rows too, where the compressor must process
//   no token). The ring generator's start 8 fills every ring row, so any position reads a drawn state.
//   Requests past `real` (the metadata's padding rows, position 0, c4_out_loc 0) process a token
//   that completes no block.
// - idx.indexer_cache: the cache's history is an input; this step's emission goes to the
//   compressor's own pool output (outputs start poisoned, so no stage output can hold history),
//   hence the entry a row's own token completes is read from the input cache.
// - translate.topk_indices: the select stage's order is the implementation's (the reference orders
//   by score, the kernel by index) and near-ties may swap, which its set comparison allows but an
//   exact comparison of the translated slots would not: the translation takes drawn raw indices.
// - pool.kv / compressed_kv / index_k, compress.kv / score: the projections are not in the step.
// Batch relations compare the outputs that are rows (the metadata's, the pool's locations, the
// indexer's); the pools and the compressor's ring are not rows, so graph replay gives every batch
// size inputs of its own (replay_batches.h) rather than rows of its bucket's.
// It has no mutants of its own: its stages' mutants break it (each judged on its stage's checks).
#include <map>
#include <string>

#include "../errors.h"
#include "../step.h"

namespace dsv4h {

Component attn_metadata_component();
Component memory_pool_component();
Component compressor_component();
Component indexer_component();

namespace {

struct Params {
  int64_t bs = 8, real = -1, ctx = 1024, max_seq_len = -1, index_topk = 512, pool = 16, swa_slots = 320;
  int64_t dims = 512, heads = 64, write_temp = 0;
  template <typename F>
  void fields(F& f) {
    f("bs", bs, "requests the step holds (the captured bucket), one row each");
    f("real", real, "real requests n <= bs (num_reqs, device data); -1 = bs");
    f("ctx", ctx, "req_to_token columns = MAX_SEQ_LEN_FOR_CAPTURE (a multiple of 4)");
    f("max_seq_len", max_seq_len, "longest sequence of the step (the staging widths); -1 = ctx");
    f("index_topk", index_topk, "entries the indexer selects a row (a multiple of 64 in [64, 2048])");
    f("pool", pool, "request slots of req_to_token (>= bs); the full pool is pool * ceil(ctx/256) + 1 pages");
    f("swa_slots", swa_slots, "SWA slots (> bs: one a request, and slot 0)");
    f("dims", dims, "compressed entry: 512 the main latent (MODEL1 pool), 128 the indexer key (indexer pool)");
    f("heads", heads, "indexer heads (64 in V4)");
    f("temp", write_temp, "1: the metadata's staging set is written too (an eager step); 0: a replay's update");
  }
};
using StepCase = CaseOf<Params>;

std::string str(int64_t v) { return std::to_string(v); }

// Pages of the full pool (page 0 included), after the step's own checks.
int64_t full_pages(const StepCase& c) {
  const auto bad = [&](const std::string& why) { return BadInput("c4_decode_step: " + why + " in " + c.str()); };
  if (c.bs < 1) throw bad("bs must be >= 1 (the compressor's batch)");
  if (c.ctx < 4 || c.ctx % 4) throw bad("ctx must be a multiple of 4: the page table's columns are then the C4 pages");
  if (c.pool < c.bs || c.pool > (1 << 20)) throw bad("pool must hold every request (pool >= bs), at most 2^20");
  if (c.index_topk < 64 || c.index_topk > 2048 || c.index_topk % 64) throw bad("index_topk must be a multiple of 64 in [64, 2048]");
  return c.pool * ((c.ctx + 255) / 256) + 1;
}

}  // namespace

// The step over its stages' components, those named in `replaced` (by stage name) swapped in: the
// CPU tests run it with a stage's reference broken as a mutant breaks its kernel.
Component c4_decode_step_over(const std::map<std::string, Component>& replaced) {
  const auto stage = [&](const char* name, Component (*registered)()) {
    const auto it = replaced.find(name);
    return it != replaced.end() ? it->second : registered();
  };
  StepDescriptor<Params> d;
  d.name = "c4_decode_step";
  d.summary = "composed C4 decode step: metadata into the graph buffers, SWA store, compressor decode (ratio 4), "
              "indexer top-k over the C4 cache and its page slots";
  // Lengths are drawn at C4/C128/page edges and at random (attn_metadata's pick_seq_len): bs 64
  // with ctx 2304 crosses c4 length 512 = index_topk; index_topk 64 is crossed at 256 tokens.
  d.verify_cases = {
      "c4_decode_step(bs=1,pool=1,ctx=256)",
      "c4_decode_step(bs=8,real=5,pool=8,ctx=512,index_topk=64,heads=4)",
      "c4_decode_step(bs=8,real=3,pool=12,ctx=1024,max_seq_len=600,index_topk=64,dims=128,temp=1)",
      "c4_decode_step(bs=16,pool=16,ctx=1024,index_topk=64,heads=8,dims=128)",
      "c4_decode_step(bs=64,pool=64,ctx=2304,heads=16)",
      "c4_decode_step(bs=4,real=0,pool=4,ctx=256,index_topk=64,heads=4)",
  };
  d.batch_param = "bs";
  // Every bucket up to 256 requests: the pool holds 256 requests of one page each (ctx 256, c4
  // lengths up to index_topk 64; the verify cases cross it). Each batch size makes inputs and a
  // reference of its own over the whole pool (its pools and ring are not rows): ~0.3 s a batch
  // with 257 pages, where ctx 512's 513 pages took the 2026-12-06 GPU run's shard past 280 s.
  d.replay_case = "c4_decode_step(bs=1,pool=256,ctx=256,index_topk=64,heads=4,dims=128)";
  d.gpu_tests = "*C4DecodeStep*";
  d.relation_cases = {
      "batch_invariance(chunks=3):c4_decode_step(bs=16,real=11,pool=16,ctx=1024,index_topk=64,heads=4,dims=128)",
      "batch_invariance(chunks=4):c4_decode_step(bs=9,pool=9,ctx=512,index_topk=64,heads=4,temp=1)",
  };
  d.slice_defaults = {"real"};  // a sub-batch's real requests are its num_reqs input
  d.stages = {
      {"meta", stage("meta", attn_metadata_component),
       [](const StepCase& c) {
         full_pages(c);
         return "attn_metadata(bs=" + str(c.bs) + ",real=" + str(c.real) + ",mode=0,ctx=" + str(c.ctx) +
                ",max_seq_len=" + str(c.max_seq_len) + ",index_topk=" + str(c.index_topk) + ",pool=" + str(c.pool) +
                ",swa_slots=" + str(c.swa_slots) + ",temp=" + str(c.write_temp) + ",swa_distinct=1)";
       },
       {}, {}},
      {"pool", stage("pool", memory_pool_component),
       [](const StepCase& c) {
         return "memory_pool(tokens=" + str(c.bs) + ",layers=3,per_request=1,history=0,swa_page=1,window=1,full_pages=" +
                str(full_pages(c)) + ",swa_pages=" + str(c.swa_slots) + ",invalid=0)";
       },
       {{"full_to_swa", "meta.full_to_swa"}, {"out_cache_loc", "meta.raw_out_loc"}, {"seq_lens", "meta.seq_lens_casual"}},
       {"out_cache_loc", "seq_lens"}},
      {"compress", stage("compress", compressor_component),
       [](const StepCase& c) {
         return "compressor(ratio=4,dims=" + str(c.dims) + ",batch=" + str(c.bs) + ",tokens=1,start=8,slots=" +
                str(full_pages(c) * 64) + ")";
       },
       {{"start", "meta.positions_casual"}, {"out_loc", "meta.c4_out_loc"}},
       {"start", "out_loc"}},
      {"idx", stage("idx", indexer_component),
       [](const StepCase& c) {
         return "indexer(stage=0,bs=" + str(c.bs) + ",ctx=" + str(c.ctx) + ",heads=" + str(c.heads) +
                ",index_topk=" + str(c.index_topk) + ",pool_pages=" + str(full_pages(c)) + ")";
       },
       {{"positions", "meta.positions_casual"}, {"page_table", "meta.page_table"}},
       {"positions"}},
      {"translate", stage("translate", indexer_component),
       [](const StepCase& c) {
         return "indexer(stage=2,bs=" + str(c.bs) + ",ctx=" + str(c.ctx) + ",index_topk=" + str(c.index_topk) + ")";
       },
       {{"page_table", "meta.page_table"}},
       {}},
  };
  return compose(std::move(d));
}

Component c4_decode_step_component() { return c4_decode_step_over({}); }

}  // namespace dsv4h
