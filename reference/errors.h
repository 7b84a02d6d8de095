// Bad input (a malformed case, fixture or tensor; an impossible shape; an out-of-range index) is
// its own exception type so that every front end can tell it from a mismatch or a harness bug:
// dsv4h exits 2 on it, tests expect it by type. It lives here, below the harness, because the
// references throw it too (an allocator out of pages, a location outside the pool).
#pragma once

#include <stdexcept>
#include <string>

namespace dsv4h {

class BadInput : public std::invalid_argument {
 public:
  explicit BadInput(const std::string& what) : std::invalid_argument(what) {}
};

}  // namespace dsv4h
