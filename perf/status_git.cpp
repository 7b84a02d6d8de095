// Whether a component's kernels changed after the commit of a GPU run: git, asked through popen,
// in the checkout holding the records (a source tarball has no history, and then says so).
#include <array>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sys/wait.h>

#include "status.h"

namespace dsv4h::report {

namespace {

struct Output {
  int exit = -1;
  std::string text;
};

// Every argument is checked against a narrow pattern before it gets here (no quoting needed).
Output run(const std::string& command) {
  Output out;
  FILE* pipe = popen((command + " 2>/dev/null").c_str(), "r");
  if (!pipe) return out;
  std::array<char, 4096> buffer;
  for (size_t n; (n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0;) out.text.append(buffer.data(), n);
  const int status = pclose(pipe);
  out.exit = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  for (size_t begin = 0, end; begin < text.size(); begin = end + 1) {
    end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    if (end > begin) lines.push_back(text.substr(begin, end - begin));
  }
  return lines;
}

bool plain_name(const std::string& s) { return std::regex_match(s, std::regex(R"([A-Za-z0-9_.+-]+)")); }
// A path in the checkout outside kernels/ (the model's model/gpu): a folder or file, no "..".
bool checkout_path(const std::string& s) {
  return std::regex_match(s, std::regex(R"([A-Za-z0-9_+-][A-Za-z0-9_.+-]*(/[A-Za-z0-9_+-][A-Za-z0-9_.+-]*)+)"));
}

// The sources with the kernels/ headers they include, transitively: a change to kv_pool_fp8.h
// changes the stores that include it, though no mutant names the header.
std::set<std::string> with_headers(const std::string& kernels_dir, const std::vector<std::string>& sources) {
  static const std::regex include(R"(^\s*#\s*include\s*"([^"/]+)\")");
  std::set<std::string> seen;
  std::vector<std::string> pending(sources.begin(), sources.end());
  while (!pending.empty()) {
    const std::string file = pending.back();
    pending.pop_back();
    if (!plain_name(file) || !seen.insert(file).second) continue;
    std::ifstream in(kernels_dir + "/" + file);
    std::smatch m;
    for (std::string line; std::getline(in, line);)
      if (std::regex_search(line, m, include)) pending.push_back(m[1]);
  }
  return seen;
}

}  // namespace

KernelChanges git_kernel_changes(const std::string& dir) {
  if (!std::regex_match(dir, std::regex(R"([A-Za-z0-9_./+-]+)")))
    return [](const std::string&, const std::vector<std::string>&) { return std::string("unknown: odd records path"); };
  const Output top = run("git -C " + dir + " rev-parse --show-toplevel");
  const std::vector<std::string> top_lines = lines_of(top.text);
  if (top.exit != 0 || top_lines.empty())
    return [](const std::string&, const std::vector<std::string>&) {
      return std::string("unknown: the records are in no git checkout");
    };
  const std::string root = top_lines[0];
  auto cache = std::make_shared<std::map<std::string, std::string>>();
  return [root, cache](const std::string& commit, const std::vector<std::string>& sources) {
    if (!std::regex_match(commit, std::regex("[0-9a-f]{4,40}"))) return "unknown: no commit hash \"" + commit + "\"";
    std::string paths;
    for (const std::string& file : with_headers(root + "/kernels", sources)) paths += " kernels/" + file;
    for (const std::string& path : sources)
      if (checkout_path(path)) paths += " " + path;
    const std::string key = commit + paths;
    if (auto it = cache->find(key); it != cache->end()) return it->second;
    const std::string git = "git -C '" + root + "' ";
    std::string answer;
    if (run(git + "cat-file -e " + commit + "^{commit}").exit != 0) {
      answer = "unknown: commit " + commit + " is not in this checkout";
    } else {
      const std::vector<std::string> commits = lines_of(run(git + "log --no-merges --format=%h " + commit + "..HEAD --" + paths).text);
      const std::vector<std::string> files = lines_of(run(git + "diff --name-only " + commit + " HEAD --" + paths).text);
      if (!commits.empty()) {
        answer = "changed after " + commit.substr(0, 7) + " in " + std::to_string(commits.size()) + " commit" +
                 (commits.size() == 1 ? "" : "s") + " (" + commits.front() + (commits.size() > 1 ? " ..." : "") + "):";
        for (const std::string& f : files) answer += " " + f;
      }
    }
    return (*cache)[key] = answer;
  };
}

}  // namespace dsv4h::report
