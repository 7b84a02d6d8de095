// libFuzzer target: case strings and relation case strings, as `--case` users type them. Oracle:
// every input parses or is refused as BadInput; any other exception, a crash, a sanitizer report
// or an input slower than -timeout is a finding. A parsed case's canonical string parses back to
// itself. Repro: build/fuzz/tests/fuzz/fuzz_case_string CRASH_FILE.
#include <cstddef>
#include <cstdint>
#include <string>

#include "harness/component.h"
#include "harness/errors.h"
#include "harness/relation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dsv4h;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    if (is_relation_case(text)) {
      const RelationCase rc = parse_relation_case(text);
      if (parse_relation_case(rc.str()).str() != rc.str()) __builtin_trap();
    } else {
      const Case c = parse_case(text);
      if (parse_case(c.str()).str() != c.str()) __builtin_trap();
    }
  } catch (const BadInput&) {
  }
  return 0;
}
