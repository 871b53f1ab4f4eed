// The lookup's schedule and the meaning of its two answers together (dns_lookup.hpp).
#include "netstack/dns_lookup.hpp"

#include <boost/asio/error.hpp>

#include <algorithm>

namespace netstack::dns {

std::optional<Clock::duration> send_at(size_t i, size_t servers, Clock::duration first_retry,
                                       Clock::duration total) {
  if (servers == 0) return std::nullopt;
  Clock::duration at{};
  for (size_t k = 0; k < i; ++k) {
    // Doubling stops mattering once past the total: no overflow for any i.
    at += first_retry * (int64_t{1} << std::min<size_t>(k / servers, 20));
    if (at >= total) return std::nullopt;
  }
  if (at >= total) return std::nullopt;
  return at;
}

namespace {

bool failed(Outcome o) { return o == Outcome::pending || o == Outcome::timed_out || o == Outcome::server_failure; }
bool either(const FamilyResult& a, const FamilyResult& b, Outcome o) { return a.outcome == o || b.outcome == o; }
bool timed_out(Outcome o) { return o == Outcome::pending || o == Outcome::timed_out; }

}  // namespace

Resolution combine(const FamilyResult& a, const FamilyResult& aaaa) {
  namespace e = boost::asio::error;
  Resolution r;
  if (!a.addresses.empty() || !aaaa.addresses.empty()) {
    r.addresses = a.addresses;
    r.addresses.insert(r.addresses.end(), aaaa.addresses.begin(), aaaa.addresses.end());
    std::optional<uint32_t> ttl;
    for (auto* f : {&a, &aaaa})
      if (!f->addresses.empty()) ttl = std::min(ttl.value_or(f->ttl), f->ttl);
    r.cache_for = std::min<Clock::duration>(std::chrono::seconds(*ttl), kMaxTtl);
    if (failed(a.outcome) || failed(aaaa.outcome)) r.cache_for = std::min<Clock::duration>(r.cache_for, kNegativeTtl);
    return r;
  }
  if (either(a, aaaa, Outcome::nx_domain)) {
    r.ec = e::host_not_found;
    r.cache_for = kNegativeTtl;
  } else if (timed_out(a.outcome) || timed_out(aaaa.outcome)) {
    r.ec = e::timed_out;
  } else if (either(a, aaaa, Outcome::server_failure)) {
    r.ec = e::host_not_found_try_again;
  } else {
    r.ec = e::no_data;
    r.cache_for = kNegativeTtl;
  }
  return r;
}

}  // namespace netstack::dns
