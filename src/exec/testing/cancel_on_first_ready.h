// Tests: a load's callbacks that cancel it as soon as its first tensor is
// in place (LoadCallbacks::cancel), counting the tensors that arrived.
#pragma once

#include <atomic>
#include <cstddef>

#include "weightlift/loader.h"

namespace weightlift::internal::testing {

class CancelOnFirstReady {
 public:
  CancelOnFirstReady() {
    callbacks_.cancel = &cancel_;
    callbacks_.on_ready = [this](size_t, const TensorInfo&) {
      ++ready_;
      cancel_ = true;
    };
  }
  CancelOnFirstReady(const CancelOnFirstReady&) = delete;
  CancelOnFirstReady& operator=(const CancelOnFirstReady&) = delete;

  // For the load; valid while this object lives.
  const LoadCallbacks& callbacks() const { return callbacks_; }
  // The cancel flag alone (still true after the load), for another load.
  const std::atomic<bool>* flag() const { return &cancel_; }
  int ready() const { return ready_.load(); }

 private:
  std::atomic<bool> cancel_{false};
  std::atomic<int> ready_{0};
  LoadCallbacks callbacks_;
};

}  // namespace weightlift::internal::testing
