// Which synthetic layout `weightlift demo` can afford here: the machine's
// memory (total and available now) and each candidate's disk and memory
// needs, kept apart from the command so the choice can be tested with any
// machine's numbers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weightlift::cli {

// Bytes of memory; 0 where unknown.
struct MachineMemory {
  uint64_t total = 0;      // physical memory
  uint64_t available = 0;  // MemAvailable: what can be had without swapping
};

// This machine's: sysconf for the total, /proc/meminfo for the available,
// both within this process's cgroup limit (a container sees the host's
// memory in those two).
MachineMemory ReadMachineMemory();

// A cgroup's memory limit and what it uses now; limit 0: none.
struct CgroupMemory {
  uint64_t limit = 0;
  uint64_t usage = 0;
};

// The memory limit of the cgroup PROC_CGROUP (the text of
// /proc/self/cgroup) names, under ROOT (/sys/fs/cgroup): cgroup v2's
// memory.max or v1's memory.limit_in_bytes, the smallest of the cgroup's
// and its parents' (the effective limit), and the cgroup's usage. No limit
// where none is set or nothing can be read.
CgroupMemory ReadCgroupMemory(const std::string& root,
                              const std::string& proc_cgroup);

// M as far as a cgroup limited to C lets this process have it.
MachineMemory WithinCgroup(MachineMemory m, const CgroupMemory& c);

// The most the demo may use: a quarter of the total, and no more than is
// available now (so a busy machine gets a smaller layout, not swapping).
// 0 when neither is known.
uint64_t DemoMemoryBudget(const MachineMemory& m);

struct DemoCandidate {
  std::string layout;
  uint64_t peak_rss = 0;  // the demo's estimated peak memory
  bool fits_disk = false;
};

// The index of the first of CANDIDATES (largest first) that fits the
// demo's budget for MEMORY (DemoMemoryBudget; 0: unknown, anything fits)
// and the disk; the last one when none does (the
// smallest, a few MB, runs anywhere). Says in PASSED_OVER, in order, why each
// before it was left out.
size_t PickDemoLayout(const std::vector<DemoCandidate>& candidates,
                      const MachineMemory& memory,
                      std::vector<std::string>* passed_over);

}  // namespace weightlift::cli
