// common::Result: a value or the sentence saying why there is none.
#include "common/result.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace plexus::common {
namespace {

Result<int> parse_port(const std::string& text) {
  if (text.empty()) return fail("the port is empty");
  return std::stoi(text);
}

TEST(ResultTest, AValueIsOkAndHasNoError) {
  Result<int> r = parse_port("7355");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(static_cast<bool>(r));
  EXPECT_EQ(*r, 7355);
  EXPECT_EQ(r.error(), "");
}

TEST(ResultTest, AFailureCarriesItsSentenceAndNeverAnEmptyOne) {
  Result<int> r = parse_port("");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "the port is empty");
  Result<int> unexplained = fail("");
  EXPECT_FALSE(unexplained.ok());
  EXPECT_FALSE(unexplained.error().empty()) << "an empty reason would read as success";
}

TEST(ResultTest, AMoveOnlyValueIsTakenOut) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(5);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(**r, 5);
  std::unique_ptr<int> taken = r.take();
  EXPECT_EQ(*taken, 5);
}

}  // namespace
}  // namespace plexus::common
