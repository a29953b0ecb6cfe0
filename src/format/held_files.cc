#include "format/held_files.h"

namespace weightlift::internal {

StatusOr<std::unique_ptr<File>> OpenForLoad(const Checkpoint& ckpt, uint32_t i,
                                            Backend backend,
                                            const IoOptions& options) {
  const FileInfo& info = ckpt.files()[i];
  std::shared_ptr<File> held = HeldFiles::Get(ckpt, i);
  if (held != nullptr) {
    WL_ASSIGN_OR_RETURN(Env * env, EnvForLocation(held->path()));
    WL_RETURN_IF_ERROR(CheckUnchangedAt(*env, *held));
    return held->Reopen(backend, options);
  }
  WL_ASSIGN_OR_RETURN(Env * env, EnvForLocation(info.open_path()));
  WL_ASSIGN_OR_RETURN(std::unique_ptr<File> f,
                      env->OpenForRead(info.open_path(), backend, options));
  if (f->size() != info.size) {
    return Status::IoError("file '" + info.path + "' is now " +
                           std::to_string(f->size()) + " bytes but had " +
                           std::to_string(info.size) +
                           " when its header was read (changed since "
                           "Checkpoint::Open)");
  }
  return f;
}

}  // namespace weightlift::internal
