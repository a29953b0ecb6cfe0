// The files a Checkpoint holds open, and how a load reads them.
//
// Checkpoint::Open opens every file once (through the Env of its location),
// reads its header and keeps the File. A load then reads those same open
// files through the backend it chose (File::Reopen), so a file renamed over
// its path after Open is never read, and a file changed under a load is an
// error, never a mix of two files' bytes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "env/env.h"
#include "env/warm_mappings.h"
#include "format/prepared_pages.h"
#include "weightlift/checkpoint.h"

namespace weightlift::internal {

// Checkpoint::Open through ENV instead of the Env of LOCATION's scheme
// (tests inject faults this way).
StatusOr<Checkpoint> OpenCheckpoint(Env& env, const std::string& location);

// Access to Checkpoint's held files (a friend of Checkpoint).
struct HeldFiles {
  // The File Checkpoint::Open read FILES()[I] from; null for a checkpoint
  // built by hand.
  static std::shared_ptr<File> Get(const Checkpoint& ckpt, uint32_t i) {
    return i < ckpt.open_files_.size() ? ckpt.open_files_[i] : nullptr;
  }
  // The row pages filled ahead of CKPT's next load (never null).
  static WarmMappings& Warm(const Checkpoint& ckpt) { return *ckpt.warm_; }
  // What prepare registered ahead of CKPT's next load (never null).
  static PreparedPagesSlot& Prepared(const Checkpoint& ckpt) {
    return *ckpt.prepared_;
  }
  // REQUIRES: FILES is empty or has one File per ckpt->files().
  static void Set(Checkpoint* ckpt, std::vector<std::shared_ptr<File>> files) {
    ckpt->open_files_ = std::move(files);
  }
};

// A File for one load of CKPT.files()[I], read through BACKEND with OPTIONS:
// the held file's Reopen, after checking that it is unchanged and that its
// path still names it (CheckUnchangedAt). A checkpoint built by hand holds no
// files: then the file is opened at open_path() and its size checked against
// the header's. IoError "changed since it was opened" naming the file and
// what changed; the open's errors (Unsupported for a backend that cannot
// serve the file).
StatusOr<std::unique_ptr<File>> OpenForLoad(const Checkpoint& ckpt, uint32_t i,
                                            Backend backend,
                                            const IoOptions& options);

}  // namespace weightlift::internal
