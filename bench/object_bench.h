// `weightlift bench` for object-storage locations (s3://, http(s)://): the
// loader against the network's ceiling through the same transport, in one
// run. Cold and warm mean nothing over the network (every pass fetches every
// byte), so both rows are reported in the cold column.
#pragma once

#include <string>

#include "bench_runner.h"

namespace weightlift::bench {

// Rows: kLoader (Loader::Load of CKPT, OPTIONS.load) and kStorageCeiling
// (every file's bytes fetched with ranged reads of load.chunk_bytes by the
// loader's thread count into one reused buffer per thread: the transport
// alone, nothing kept). OPTIONS.repeat passes each, interleaved.
StatusOr<BenchReport> RunObjectBench(const std::string& path,
                                     const Checkpoint& ckpt,
                                     const BenchOptions& options);

}  // namespace weightlift::bench
