// libFuzzer target: case files (fixtures, regressions, `run --case FILE`) and the tensors in them
// (`--inputs`), from the JSON text on. Oracle: every input loads or is refused as BadInput; any
// other exception, a crash (a stack overflow in deep nesting), a sanitizer report or an input
// slower than -timeout is a finding. Repro: build/fuzz/tests/fuzz/fuzz_case_file_json CRASH_FILE.
#include <cstddef>
#include <cstdint>
#include <string>

#include "harness/case_file.h"
#include "harness/errors.h"
#include "harness/json_file.h"
#include "harness/tensor_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dsv4h;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const nlohmann::json j = parse_json_text(text, "input");
    if (j.is_object() && j.contains("inputs")) {
      try {
        tensors_from_json(j["inputs"], "input: inputs");
      } catch (const BadInput&) {
      }
    }
    case_file_from_json(j, "input");
  } catch (const BadInput&) {
  }
  return 0;
}
