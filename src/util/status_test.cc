// Status and StatusOr: codes, context, and the misuse StatusOr guards.
#include "weightlift/status.h"

#include <gtest/gtest.h>

#include <string>

namespace weightlift {
namespace {

StatusOr<int> Wrongly() { return Status::OK(); }  // the bug being guarded

TEST(StatusOrTest, BuiltFromOkStatusIsAnInternalError) {
  StatusOr<int> r = Wrongly();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_NE(r.status().message().find("OK status"), std::string::npos)
      << r.status().ToString();
}

TEST(StatusOrTest, ValueAndErrorRoundTrip) {
  StatusOr<std::string> v = std::string("x");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, "x");
  EXPECT_TRUE(v.status().ok());
  StatusOr<std::string> e = Status::NotFound("f: no such file");
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(e.status().message(), "f: no such file");
}

TEST(StatusTest, WithContextKeepsCodeAndRule) {
  Status s = Status::Corruption(FormatError::kIndexTooLarge, "big");
  Status c = s.WithContext("opening x");
  EXPECT_EQ(c.code(), StatusCode::kCorruption);
  EXPECT_EQ(c.rule(), FormatError::kIndexTooLarge);
  EXPECT_EQ(c.message(), "opening x: big");
}

}  // namespace
}  // namespace weightlift
