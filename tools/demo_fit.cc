#include "demo_fit.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli_util.h"

namespace weightlift::cli {

namespace {

// The number in FILE, or 0 when absent, "max" or (v1's "none") above
// 2^62.
uint64_t ReadCgroupBytes(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string text;
  if (!(in >> text) || text == "max") return 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str() || v >= (1ull << 62)) return 0;
  return v;
}

}  // namespace

CgroupMemory ReadCgroupMemory(const std::string& root,
                              const std::string& proc_cgroup) {
  CgroupMemory c;
  std::istringstream lines(proc_cgroup);
  std::string line;
  while (std::getline(lines, line)) {
    // "ID:CONTROLLERS:PATH"; v2 is "0::PATH", v1 lists "memory".
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    std::filesystem::path dir;
    const char *limit_name, *usage_name;
    if (controllers.empty()) {
      dir = root;
      limit_name = "memory.max";
      usage_name = "memory.current";
    } else if (("," + controllers + ",").find(",memory,") !=
               std::string::npos) {
      dir = std::filesystem::path(root) / "memory";
      limit_name = "memory.limit_in_bytes";
      usage_name = "memory.usage_in_bytes";
    } else {
      continue;
    }
    // The cgroup, then each parent up to the root: the smallest limit set.
    std::filesystem::path p = std::filesystem::path(path).relative_path();
    bool leaf = true;
    while (true) {
      const std::filesystem::path at = dir / p;
      std::error_code ec;
      if (std::filesystem::is_directory(at, ec)) {
        const uint64_t limit = ReadCgroupBytes(at / limit_name);
        if (limit != 0 && (c.limit == 0 || limit < c.limit)) {
          c.limit = limit;
        }
        if (leaf) c.usage = std::max(c.usage, ReadCgroupBytes(at / usage_name));
        leaf = false;
      }
      if (p.empty()) break;
      p = p.parent_path();
    }
  }
  return c;
}

MachineMemory WithinCgroup(MachineMemory m, const CgroupMemory& c) {
  if (c.limit == 0) return m;
  m.total = m.total == 0 ? c.limit : std::min(m.total, c.limit);
  const uint64_t left = c.limit > c.usage ? c.limit - c.usage : 0;
  m.available = m.available == 0 ? left : std::min(m.available, left);
  return m;
}

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
  std::ifstream cgroup("/proc/self/cgroup");
  std::stringstream text;
  text << cgroup.rdbuf();
  return WithinCgroup(m, ReadCgroupMemory("/sys/fs/cgroup", text.str()));
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
      // (The caller has said the candidate's sizes.)
      why = "over " + (memory.total != 0 && budget == memory.total / 4
                           ? "a quarter of this machine's " +
                                 FormatBytes(memory.total) + " of memory"
                           : "the " + FormatBytes(memory.available) +
                                 " of memory available now");
    } else {
      why = "not enough free disk";
    }
    passed_over->push_back(why);
  }
  return candidates.empty() ? 0 : candidates.size() - 1;
}

}  // namespace weightlift::cli
