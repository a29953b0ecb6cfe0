#include "demo_fit.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "cli_util.h"

namespace weightlift::cli {

MachineMemory ReadMachineMemory() {
  MachineMemory m;
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) {
    m.total = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
  }
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream in(line);
    std::string key;
    uint64_t kib = 0;
    if (in >> key >> kib && key == "MemAvailable:") {
      m.available = kib * 1024;
      break;
    }
  }
  return m;
}

uint64_t DemoMemoryBudget(const MachineMemory& m) {
  const uint64_t quarter = m.total / 4;
  if (quarter == 0) return m.available;
  if (m.available == 0) return quarter;
  return std::min(quarter, m.available);
}

size_t PickDemoLayout(const std::vector<DemoCandidate>& candidates,
                      const MachineMemory& memory,
                      std::vector<std::string>* passed_over) {
  const uint64_t budget = DemoMemoryBudget(memory);
  for (size_t i = 0; i + 1 < candidates.size(); ++i) {
    const DemoCandidate& c = candidates[i];
    const bool fits_memory = budget == 0 || c.peak_rss <= budget;
    if (fits_memory && c.fits_disk) return i;
    std::string why;
    if (!fits_memory) {
      why = "needs about " + FormatBytes(c.peak_rss) + " of memory, over " +
            (memory.total != 0 && budget == memory.total / 4
                 ? "a quarter of this machine's " + FormatBytes(memory.total)
                 : "the " + FormatBytes(memory.available) + " available now");
    } else {
      why = "not enough free disk";
    }
    passed_over->push_back(c.layout + ": " + why);
  }
  return candidates.empty() ? 0 : candidates.size() - 1;
}

}  // namespace weightlift::cli
