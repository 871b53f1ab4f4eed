// Lookup results by name, each kept until its time is up (dns_lookup.hpp's combine says
// how long), for at most `capacity` names: the least recently used one makes room. Fed
// `now`, no clock and no I/O; not thread-safe (the Stack's thread owns it).
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

  // The form of a name the cache (and the lookups in flight) are keyed by: lower case,
  // without a trailing dot.
  static std::string key(std::string_view name);

  struct Hit {
    boost::system::error_code ec;
    std::vector<wg::IpAddress> addresses;
  };
  // The result for `name` (a key()) if one is kept and its time is not up at `now`; an
  // expired one is dropped. A hit makes the name the most recently used.
  std::optional<Hit> find(const std::string& name, Clock::time_point now);
  // Keeps r for r.cache_for from `now`, replacing what `name` had; a zero cache_for (or a
  // capacity of 0) keeps nothing and drops what `name` had.
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
  std::list<Entry> lru_;  // the most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

}  // namespace netstack::dns
