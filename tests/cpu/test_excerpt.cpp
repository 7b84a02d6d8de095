// Quotes of user input in messages: bounded, and never a UTF-8 character cut in two.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "harness/excerpt.h"

namespace dsv4h {
namespace {

TEST(Excerpt, ShortTextIsItselfLongTextIsCutAtACharacter) {
  EXPECT_EQ(excerpt("abc", 3), "abc");
  EXPECT_EQ(excerpt("abcdef", 3), "abc... (6 bytes)");
  EXPECT_EQ(excerpt("a\xc3\xa9" "bc", 2), "a... (5 bytes)");  // é is two bytes: not cut in half
}

TEST(Excerpt, JsonValuesAreDescribedNotDumped) {
  EXPECT_EQ(describe_json(nlohmann::json::array({1, 2, 3})), "an array of 3 elements");
  EXPECT_EQ(describe_json(nlohmann::json::object()), "an object of 0 fields");
  EXPECT_EQ(describe_json(1.5), "1.5");
  EXPECT_EQ(describe_json("ab"), "\"ab\"");
}

}  // namespace
}  // namespace dsv4h
