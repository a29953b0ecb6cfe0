#include "util/errno_text.h"

#include <cstring>

namespace weightlift::internal {

std::string ErrnoName(int err) {
  const char* name = strerrorname_np(err);
  return name != nullptr ? name : "errno " + std::to_string(err);
}

std::string ErrnoText(int err) {
  return std::string(std::strerror(err)) + " (" + ErrnoName(err) + ")";
}

}  // namespace weightlift::internal
