#include <cstdio>

#include "../component.h"
#include "args.h"
#include "commands.h"

namespace dsv4h::cli {

namespace {
const char* kHelp = R"(usage: dsv4h list [--help]

Prints every registered component: its parameters with their defaults, the cases verify runs, and
whether this build has its GPU kernel.
)";
}  // namespace

int cmd_list(const std::vector<std::string>& argv) {
  const Args args(argv, {}, {"--help"});
  if (args.has("--help")) {
    std::fputs(kHelp, stdout);
    return kPass;
  }
  for (const Component& c : registry().all()) {
    std::printf("%s  [GPU kernel: %s]\n  %s\n  parameters:\n", c.name.c_str(), c.gpu ? "built" : "not in this build",
                c.summary.c_str());
    for (const ParamSpec& p : c.params)
      std::printf("    %-12s default %-6s %s\n", p.name.c_str(), p.default_value.c_str(), p.help.c_str());
    std::printf("  verify cases (each run for every seed):\n");
    for (const std::string& v : c.verify_cases) std::printf("    %s\n", v.c_str());
  }
  return kPass;
}

}  // namespace dsv4h::cli
