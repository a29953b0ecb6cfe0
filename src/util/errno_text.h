// errno values as messages say them, so every message names both.
#pragma once

#include <string>

namespace weightlift::internal {

// "EINVAL", or "errno 1234" for a number the C library has no name for.
std::string ErrnoName(int err);

// "Invalid argument (EINVAL)": strerror and the errno name.
std::string ErrnoText(int err);

}  // namespace weightlift::internal
