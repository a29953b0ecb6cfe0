#include "util/errno_text.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

namespace weightlift::internal {
namespace {

TEST(ErrnoText, NamesTheErrnoBesideItsText) {
  EXPECT_EQ(ErrnoName(EINVAL), "EINVAL");
  EXPECT_EQ(ErrnoText(ENOMEM),
            std::string(std::strerror(ENOMEM)) + " (ENOMEM)");
  // A number the C library has no name for still says which number.
  EXPECT_EQ(ErrnoName(99999), "errno 99999");
}

}  // namespace
}  // namespace weightlift::internal
