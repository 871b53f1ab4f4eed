// The resolver's cache: a list in order of use and an index into it (dns_cache.hpp).
#include "netstack/dns_cache.hpp"

namespace netstack::dns {

std::string Cache::key(std::string_view name) {
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);
  std::string k(name);
  for (char& c : k)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return k;
}

std::optional<Cache::Hit> Cache::find(const std::string& name, Clock::time_point now) {
  auto it = index_.find(name);
  if (it == index_.end()) return std::nullopt;
  if (it->second->expires <= now) {
    erase(name);
    return std::nullopt;
  }
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->hit;
}

void Cache::insert(const std::string& name, const Resolution& r, Clock::time_point now) {
  erase(name);
  if (capacity_ == 0 || r.cache_for <= Clock::duration::zero()) return;
  // Expired entries are not swept: the least recently used goes first, expired or not,
  // and find() drops an expired one it meets.
  while (index_.size() >= capacity_) {
    const std::string oldest = lru_.back().name;
    erase(oldest);
  }
  lru_.push_front(Entry{name, Hit{r.ec, r.addresses}, now + r.cache_for});
  index_.emplace(name, lru_.begin());
}

void Cache::erase(const std::string& name) {
  auto it = index_.find(name);
  if (it == index_.end()) return;
  lru_.erase(it->second);
  index_.erase(it);
}

}  // namespace netstack::dns
