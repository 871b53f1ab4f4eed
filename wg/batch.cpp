// The batch pool.
#include "wg/batch.hpp"

namespace wg {

Batch* BatchPool::take() {
  std::lock_guard lock(mu_);
  if (free_.empty()) {
    storage_.push_back(std::make_unique<Batch>());
    return storage_.back().get();
  }
  Batch* b = free_.back();
  free_.pop_back();
  return b;
}

void BatchPool::give(Batch* b) {
  b->reset();
  std::lock_guard lock(mu_);
  free_.push_back(b);
}

}  // namespace wg
