// Receiver index allocation: random, unique, non-zero.
#include "wg/index_table.hpp"

#include "wg/crypto.hpp"

namespace wg {

uint32_t IndexTable::new_index(std::shared_ptr<Peer> peer) {
  std::lock_guard lock(mu_);
  for (;;) {
    uint32_t idx;
    random_bytes(&idx, sizeof idx);
    if (idx == 0 || map_.count(idx)) continue;
    map_.emplace(idx, Entry{std::move(peer), nullptr});
    return idx;
  }
}

bool IndexTable::set_keypair(uint32_t index, KeypairPtr keypair) {
  std::lock_guard lock(mu_);
  auto it = map_.find(index);
  if (it == map_.end()) return false;
  it->second.keypair = std::move(keypair);
  return true;
}

std::optional<IndexTable::Entry> IndexTable::lookup(uint32_t index) const {
  std::lock_guard lock(mu_);
  auto it = map_.find(index);
  if (it == map_.end()) return std::nullopt;
  return it->second;
}

void IndexTable::remove(uint32_t index) {
  std::lock_guard lock(mu_);
  map_.erase(index);
}

size_t IndexTable::size() const {
  std::lock_guard lock(mu_);
  return map_.size();
}

}  // namespace wg
