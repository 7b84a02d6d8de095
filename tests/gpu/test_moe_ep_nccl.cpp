// Expert parallelism across GPUs (issue 32): `test_moe_ep_nccl --ranks R [--case 'moe(...)']`
// starts R processes, rank r on its own GPU (CTEST_RESOURCE_GROUP_<r>_GPUS under ctest's resource
// spec, else GPU r: harness/gpu_slot.h). Each computes its rank's partial of the filtered MoE (the
// `moe` component's GPU path on experts [r E/R, (r+1) E/R)), NCCL (RCCL on AMD) sums the partials
// with an all-reduce, and rank 0 compares the sum with the single-GPU unpartitioned run (ranks=1)
// and with the reference. NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
//
// The parent process never touches the GPU runtime: it forks a probe that counts the GPUs, builds
// the inputs and the reference, then forks the ranks; rank 0 creates the NCCL id and hands it to
// the others through pipes. Exit 0: passed; 1: a mismatch or a failed rank; 2: bad usage; 77:
// skipped, fewer GPUs than ranks (a failure where DSV4H_REQUIRE_GPU is set and no GPU is found at
// all: a GPU machine with too few GPUs for R ranks skips R, as ci/gpu-suite asks only for R it has).
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#if defined(DSV4H_GPU_AMD)
#include <rccl/rccl.h>
#else
#include <nccl.h>
#endif
#include <nlohmann/json.hpp>

#include "harness/compare.h"
#include "harness/component.h"
#include "harness/errors.h"
#include "harness/gpu/device_tensor.h"
#include "harness/gpu_slot.h"
#include "harness/poison.h"
#include "row_rel_l2.h"

namespace dsv4h {
namespace {

constexpr int kSkip = 77;
constexpr auto kDeadline = std::chrono::minutes(5);  // a rank that died leaves the others in NCCL

#define NCCL_CHECK(call)                                                                              \
  do {                                                                                                \
    const ncclResult_t nccl_status_ = (call);                                                         \
    if (nccl_status_ != ncclSuccess)                                                                  \
      throw std::runtime_error(std::string(#call) + " failed: " + ncclGetErrorString(nccl_status_)); \
  } while (0)

struct Setup {
  int ranks;
  std::vector<int> gpus;
  Case whole;  // ranks=1
  TensorMap inputs;
  TensorMap reference;  // the unpartitioned reference
};

Case with_ranks(const Case& c, int ranks, int rank) {
  return c.with("ranks", std::to_string(ranks)).with("rank", std::to_string(rank));
}

// The number of GPUs, counted in a child process so that this one starts no GPU runtime before
// forking the ranks; -1 where none can be counted.
int count_gpus() {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    int count = -1;
    if (hipGetDeviceCount(&count) != hipSuccess) count = -1;
    if (write(fds[1], &count, sizeof count) != sizeof count) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  int count = -1;
  if (pid < 0 || read(fds[0], &count, sizeof count) != sizeof count) count = -1;
  close(fds[0]);
  if (pid > 0) waitpid(pid, nullptr, 0);
  return count;
}

void write_all(int fd, const void* data, size_t bytes) {
  if (write(fd, data, bytes) != static_cast<ssize_t>(bytes)) throw std::runtime_error("pipe write failed");
}

void read_all(int fd, void* data, size_t bytes) {
  if (read(fd, data, bytes) != static_cast<ssize_t>(bytes)) throw std::runtime_error("pipe read failed (rank 0 gone?)");
}

// The case's outputs on this rank's device: inputs uploaded, outputs poisoned, one launch.
DeviceTensorMap launch_on_device(const Component& moe, const Case& c, const DeviceTensorMap& inputs,
                                 const TensorMap& host_inputs, hipStream_t stream) {
  TensorMap outputs = checked_outputs(moe, c, host_inputs);
  fill_poison(outputs, Poison::a);
  DeviceTensorMap device_outputs = DeviceTensorMap::upload(outputs);
  moe.gpu(c, inputs, device_outputs, stream);
  return device_outputs;
}

// Rank 0's verdict on the all-reduced sum.
bool sum_matches(const Setup& s, const HostTensor& sum, const HostTensor& single) {
  const int64_t topk = s.whole.integer("topk"), inter = s.whole.integer("inter");
  // Against the single-GPU run: the same GEMM2 rows, summed in another order; both fp32 sums of
  // topk + R terms, each within fp32_accumulated's row bound of the exact sum (test_moe_gpu.cpp).
  const OutputCheck reorder{ToleranceClass::fp32_accumulated, Comparator::row_rel_l2, topk + s.ranks, ""};
  const double worst = testing::worst_row_rel_l2(single, sum), allowed = 2 * allowed_row_rel_l2(reorder);
  std::printf("rank 0: all-reduced sum vs single-GPU run: worst row rel L2 %.3g, allowed %.3g\n", worst, allowed);
  // Against the reference: the partial's check with the all-reduce's R terms added to K.
  const OutputCheck check{ToleranceClass::fp32_over_bf16_stage, Comparator::row_rel_l2, inter + topk + s.ranks, ""};
  const OutputComparison cmp = compare_output("out", s.reference.at("out"), Poison::a, sum, Poison::a, check);
  std::printf("rank 0: all-reduced sum vs reference: %s\n", cmp.summary().c_str());
  return worst <= allowed && cmp.passed();
}

// One rank's process; returns its exit status.
int run_rank(const Setup& s, int rank, int id_read_fd, const std::vector<int>& id_write_fds) {
  const Component& moe = registry().get("moe");
  DSV4H_HIP_CHECK(hipSetDevice(s.gpus[rank]));
  ncclUniqueId id;
  if (rank == 0) {
    NCCL_CHECK(ncclGetUniqueId(&id));
    for (int fd : id_write_fds) write_all(fd, &id, sizeof id);
  } else {
    read_all(id_read_fd, &id, sizeof id);
  }
  ncclComm_t comm;
  NCCL_CHECK(ncclCommInitRank(&comm, s.ranks, id, rank));
  hipStream_t stream;
  DSV4H_HIP_CHECK(hipStreamCreate(&stream));
  const DeviceTensorMap inputs = DeviceTensorMap::upload(s.inputs);
  const DeviceTensorMap outputs = launch_on_device(moe, with_ranks(s.whole, s.ranks, rank), inputs, s.inputs, stream);
  float* out = outputs.data<float>("out");
  NCCL_CHECK(ncclAllReduce(out, out, static_cast<size_t>(s.reference.at("out").numel()), ncclFloat, ncclSum, comm,
                           stream));
  DSV4H_HIP_CHECK(hipStreamSynchronize(stream));
  bool passed = true;
  if (rank == 0) {
    const HostTensor sum = outputs.at("out").download();
    const DeviceTensorMap single = launch_on_device(moe, s.whole, inputs, s.inputs, stream);
    DSV4H_HIP_CHECK(hipStreamSynchronize(stream));
    passed = sum_matches(s, sum, single.at("out").download());
  }
  NCCL_CHECK(ncclCommDestroy(comm));
  DSV4H_HIP_CHECK(hipStreamDestroy(stream));
  return passed ? 0 : 1;
}

// Waits for every rank; kills the rest once one fails or the deadline passes (they would wait in
// NCCL for the missing rank forever).
bool wait_for_ranks(const std::vector<pid_t>& pids) {
  std::vector<bool> done(pids.size());
  bool passed = true;
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  for (size_t left = pids.size(); left > 0;) {
    for (size_t r = 0; r < pids.size(); ++r) {
      int status = 0;
      if (done[r] || waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      done[r] = true, --left;
      const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (!ok) {
        std::fprintf(stderr, "rank %zu %s %d\n", r, WIFEXITED(status) ? "exited with" : "was killed by signal",
                     WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        passed = false;
      }
    }
    const bool late = std::chrono::steady_clock::now() > deadline;
    if ((!passed || late) && left > 0) {
      if (late) std::fprintf(stderr, "ranks still running after %lld s: killed\n", static_cast<long long>(
                                                                                       std::chrono::seconds(kDeadline).count()));
      for (size_t r = 0; r < pids.size(); ++r)
        if (!done[r]) kill(pids[r], SIGKILL);
      for (size_t r = 0; r < pids.size(); ++r)
        if (!done[r]) waitpid(pids[r], nullptr, 0);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return passed;
}

// The result as gtest's JSON (one suite, one case Ranks<R>), so that ci/gpu-report.py collects it
// with the gtest binaries' results.
void write_result(const std::string& path, int ranks, int exit_code) {
  if (path.empty()) return;
  nlohmann::json test = {{"name", "Ranks" + std::to_string(ranks)}};
  if (exit_code == kSkip) test["result"] = "SKIPPED";
  if (exit_code != 0 && exit_code != kSkip)
    test["failures"] = {{{"failure", "the all-reduced ranks disagree with the single-GPU run or the reference, or a "
                                     "rank failed (exit " + std::to_string(exit_code) + "; the log says which)"}}};
  std::ofstream out(path);
  out << nlohmann::json{{"testsuites", {{{"name", "MoeExpertParallelNccl"}, {"testsuite", {test}}}}}}.dump(1) << "\n";
  if (!out) throw std::runtime_error("cannot write " + path);
}

int run_ranks(int ranks, const std::string& case_text);

int run(int argc, char** argv) {
  int ranks = 0;
  std::string json;
  std::string case_text = "moe(tokens=53,hidden=256,inter=64,experts=8,topk=2,padded=0.2,seed=17)";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--ranks" && i + 1 < argc) ranks = std::atoi(argv[++i]);
    else if (arg == "--case" && i + 1 < argc) case_text = argv[++i];
    else if (arg == "--json" && i + 1 < argc) json = argv[++i];
    else throw BadInput("usage: test_moe_ep_nccl --ranks R [--case 'moe(...)'] [--json FILE], got '" + arg + "'");
  }
  if (ranks < 1 || ranks > 64) throw BadInput("--ranks: a number of ranks in [1, 64] is needed");
  const int exit_code = run_ranks(ranks, case_text);
  write_result(json, ranks, exit_code);
  return exit_code;
}

int run_ranks(int ranks, const std::string& case_text) {
  const Case whole = parse_case(case_text);
  if (whole.component() != "moe") throw BadInput("--case: a moe case is needed, got " + case_text);
  Setup s{ranks, assigned_gpus(ranks), with_ranks(whole, 1, 0), {}, {}};
  const Component& moe = registry().get("moe");
  moe.make_inputs(with_ranks(s.whole, ranks, 0));  // BadInput where R does not divide the experts

  const int found = count_gpus();
  int needed = 0;
  for (int g : s.gpus) needed = std::max(needed, g + 1);
  if (found < needed) {
    const char* required = std::getenv("DSV4H_REQUIRE_GPU");
    std::printf("test_moe_ep_nccl: %d ranks need %d GPUs (ordinals up to %d), found %d: skipped\n", ranks, needed,
                needed - 1, found < 0 ? 0 : found);
    return required && *required && std::string(required) != "0" && found < 1 ? 1 : kSkip;
  }
  s.inputs = moe.make_inputs(s.whole);
  s.reference = reference_outputs(moe, s.whole, s.inputs, Poison::a);
  setenv("NCCL_NVLS_ENABLE", "0", 1);

  std::vector<int> read_fds(static_cast<size_t>(ranks), -1), write_fds;
  for (int r = 1; r < ranks; ++r) {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
    read_fds[r] = fds[0];
    write_fds.push_back(fds[1]);
  }
  std::fflush(stdout);
  std::vector<pid_t> pids;
  for (int r = 0; r < ranks; ++r) {
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      // Only rank 0 keeps the write ends: a rank waiting for the id then sees rank 0's death as EOF.
      if (r != 0)
        for (int fd : write_fds) close(fd);
      int status = 1;
      try {
        status = run_rank(s, r, read_fds[r], r == 0 ? write_fds : std::vector<int>{});
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d (GPU %d): %s\n", r, s.gpus[r], e.what());
      }
      std::fflush(stdout);
      _exit(status);
    }
    pids.push_back(pid);
  }
  for (int fd : read_fds)
    if (fd >= 0) close(fd);
  for (int fd : write_fds) close(fd);
  const bool passed = wait_for_ranks(pids);
  std::printf("test_moe_ep_nccl: %d ranks on GPUs", ranks);
  for (int g : s.gpus) std::printf(" %d", g);
  std::printf(", %s: %s\n", s.whole.str().c_str(), passed ? "passed" : "FAILED");
  return passed ? 0 : 1;
}

}  // namespace
}  // namespace dsv4h

int main(int argc, char** argv) {
  try {
    return dsv4h::run(argc, argv);
  } catch (const dsv4h::BadInput& e) {
    std::fprintf(stderr, "test_moe_ep_nccl: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "test_moe_ep_nccl: %s\n", e.what());
    return 1;
  }
}
