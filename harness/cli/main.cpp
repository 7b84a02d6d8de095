// dsv4h: verify DeepSeek-V4 GPU components against their CPU references.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "../errors.h"
#include "args.h"
#include "commands.h"

namespace {

const char* kUsage = R"(dsv4h: verify DeepSeek-V4 GPU components against their CPU references

usage: dsv4h COMMAND [options]     (dsv4h COMMAND --help for each command's options)
       dsv4h --version             the commit this dsv4h was built from

commands:
  list      the registered components, their parameters and verification cases
  verify    verify every component (or one): GPU vs reference over seeds, graph replay at every
            batch size, golden fixtures; on a machine without a GPU, the references against the
            golden fixtures, saying that the GPU checks were skipped
  run       run one case on the reference and, where present, the GPU; dump inputs and outputs
  fuzz      random cases of every component with boundary-weighted batch sizes, for a time or a
            count; a failure shrunk and saved as a regression fixture
  report    nightly benchmark reports: compare two runs, HTML and markdown over the history
            (report status: the current GPU verdict of every component, what to read first)

exit codes: 0 all passed, 1 a mismatch or failure, 2 bad usage or bad input
)";

}  // namespace

int main(int argc, char** argv) {
  using namespace dsv4h::cli;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? kBadUsage : kPass;
  }
  if (args[0] == "--version") {
    std::printf("dsv4h %s\n", dsv4h::build_commit());
    return kPass;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  try {
    if (command == "list") return cmd_list(args);
    if (command == "verify") return cmd_verify(args);
    if (command == "run") return cmd_run(args);
    if (command == "report") return cmd_report(args);
    if (command == "fuzz") return cmd_fuzz(args);
    throw UsageError("unknown command \"" + command + "\" (commands: list, verify, run, fuzz, report)");
  } catch (const UsageError& e) {
    std::fprintf(stderr, "dsv4h %s: %s\n", command.c_str(), e.what());
    return kBadUsage;
  } catch (const dsv4h::BadInput& e) {
    std::fprintf(stderr, "dsv4h %s: bad input: %s\n", command.c_str(), e.what());
    return kBadUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dsv4h %s: error: %s\n", command.c_str(), e.what());
    return kMismatch;
  }
}
