// Loader::Create picks the host or the CUDA loader for options.device.
#include "weightlift/loader.h"

#include "cuda/cuda_loader.h"
#include "exec/host_loader.h"

namespace weightlift {
namespace {

// Every report states the options its load ran with: stamped here, once,
// whichever loader filled the rest of it. Forwards every Loader method (they
// are pure virtual, so a new one that is not forwarded fails to compile).
class OptionsStampingLoader final : public Loader {
 public:
  explicit OptionsStampingLoader(std::unique_ptr<Loader> inner)
      : inner_(std::move(inner)) {}

  StatusOr<LoadResult> Load(const Checkpoint& ckpt,
                            std::span<const std::string> names,
                            const LoadCallbacks& callbacks) override {
    StatusOr<LoadResult> r = inner_->Load(ckpt, names, callbacks);
    if (r.ok()) r->report.options = inner_->options();
    return r;
  }
  StatusOr<LoadResult> LoadSlices(const Checkpoint& ckpt,
                                  std::span<const TensorRequest> requests,
                                  const LoadCallbacks& callbacks) override {
    StatusOr<LoadResult> r = inner_->LoadSlices(ckpt, requests, callbacks);
    if (r.ok()) r->report.options = inner_->options();
    return r;
  }
  Status LoadInto(const Checkpoint& ckpt, std::span<const Destination> dests,
                  LoadReport* report, const LoadCallbacks& callbacks) override {
    Status s = inner_->LoadInto(ckpt, dests, report, callbacks);
    if (report != nullptr) report->options = inner_->options();
    return s;
  }
  Status LoadSlicesInto(const Checkpoint& ckpt,
                        std::span<const TensorRequest> requests,
                        std::span<const Destination> dests, LoadReport* report,
                        const LoadCallbacks& callbacks) override {
    Status s = inner_->LoadSlicesInto(ckpt, requests, dests, report, callbacks);
    if (report != nullptr) report->options = inner_->options();
    return s;
  }
  const LoadOptions& options() const override { return inner_->options(); }
  double TakeSetupSeconds() override { return inner_->TakeSetupSeconds(); }

 private:
  std::unique_ptr<Loader> inner_;
};

}  // namespace

StatusOr<std::unique_ptr<Loader>> Loader::Create(const LoadOptions& options) {
  WL_RETURN_IF_ERROR(options.Validate());
  StatusOr<std::unique_ptr<Loader>> inner =
      options.device.is_cuda() ? internal::CreateCudaLoader(options)
                               : internal::CreateHostLoader(options);
  if (!inner.ok()) return inner.status();
  return std::unique_ptr<Loader>(new OptionsStampingLoader(std::move(*inner)));
}

}  // namespace weightlift
