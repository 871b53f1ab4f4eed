// Lookup results by name until they expire, LRU-bounded. No clock or I/O; not
// thread-safe (the Stack's thread owns it).
#pragma once

#include <boost/system/error_code.hpp>

#include <cstddef>
#include <list>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "netstack/dns_lookup.hpp"

namespace netstack::dns {

class Cache {
public:
  explicit Cache(size_t capacity) : capacity_(capacity) {}

  // Lower case, without a trailing dot.
  static std::string key(std::string_view name);

  struct Hit {
    boost::system::error_code ec;
    std::vector<wg::IpAddress> addresses;
  };
  // `name` is a key(); an expired result is dropped.
  std::optional<Hit> find(const std::string& name, Clock::time_point now);
  // Replaces name's result; a zero cache_for only drops it.
  void insert(const std::string& name, const Resolution& r, Clock::time_point now);
  size_t size() const { return index_.size(); }

private:
  struct Entry {
    std::string name;
    Hit hit;
    Clock::time_point expires;
  };
  void erase(const std::string& name);

  size_t capacity_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

}  // namespace netstack::dns
