// Random 32-bit receiver indices → the handshake or keypair they name. Thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <unordered_map>

#include "wg/keypair.hpp"

namespace wg {

class Peer;

class IndexTable {
public:
  struct Entry {
    std::shared_ptr<Peer> peer;
    KeypairPtr keypair;  // null while the index names a pending handshake
  };

  // Never 0 or in use.
  uint32_t new_index(std::shared_ptr<Peer> peer);
  // False if the index is gone.
  bool set_keypair(uint32_t index, KeypairPtr keypair);
  std::optional<Entry> lookup(uint32_t index) const;
  void remove(uint32_t index);
  size_t size() const;

private:
  mutable std::mutex mu_;
  std::unordered_map<uint32_t, Entry> map_;
};

}  // namespace wg
