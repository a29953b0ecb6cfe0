// Byte counts as text: the one meaning of "8M", "8MB" and "8MiB" in the
// `weightlift` command's flags, Python's keyword arguments and C++.
//
//   "4096", "4096B"          bytes
//   "8K" "8M" "8G" "8T"      powers of 1024 (binary), as are
//   "8KiB" "8MiB" ... "8Ki"  the IEC names: "8M" = "8MiB" = 8388608
//   "8KB" "8MB" "8GB" "8TB"  powers of 1000 (SI decimal): "8MB" = 8000000
//
// A unit's letters are case-insensitive ("8m" = "8M", "8kb" = "8KB"); a space
// may separate the number from its unit; a fraction is allowed when the
// result is a whole number of bytes ("1.5G", "0.5K"; not "1.1K").
// Reports print byte counts in binary units ("8.00 MiB") and throughput in
// GB/s (10^9 bytes per second, as storage and PCIe are quoted).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "weightlift/status.h"

namespace weightlift {

// TEXT as a byte count, by the rules above. InvalidArgument naming TEXT on
// anything else (no digits, an unknown unit, a fraction of a byte, more than
// 2^64 - 1). Zero is a valid count: whether a knob accepts it is the knob's
// rule (LoadOptions::Validate).
StatusOr<uint64_t> ParseByteSize(std::string_view text);

// BYTES for people, binary units with two decimals: "512 B", "8.00 MiB",
// "12.55 GiB". The one way reports and the command print a byte count.
std::string FormatByteSize(uint64_t bytes);

}  // namespace weightlift
