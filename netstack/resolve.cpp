// DNS through the tunnel, as glibc's stub resolver does it: A and AAAA at once over UDP to
// the configured servers in turn (dns_lookup.hpp's schedule), TCP when an answer is
// truncated; answers cached per their TTL, one lookup in flight per name.
//
//   async_resolve ─ literal ─────────────────────────────▶ itself
//        │ name: cache hit ───────────────────────────────▶ the cached result
//        │ else the name's flight (started if none) ──────▶ its result, to every waiter
//   flight (lookup): both queries to server 0, then at each send_at() the unanswered ones
//        to the next server; replies matched by id, type and server; it ends when both
//        families are settled, kOtherFamilyWait after one gave addresses (or NXDOMAIN), or at
//        dns_timeout; combine() makes the result, the cache keeps it.
//
// Everything runs as coroutines on the Stack's thread.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <array>

#include "netstack/dns_message.hpp"
#include "netstack/stack_impl.hpp"
#include "wg/base/random.hpp"

namespace netstack {
namespace detail {

// A lookup of one name under way, and the lookups waiting for it. Stack thread.
struct DnsFlight {
  bool finished = false;
  error_code ec;
  std::vector<wg::IpAddress> addresses;
  // Each waiter's timer, waiting forever: cancelled when the flight finishes.
  std::vector<asio::steady_timer*> waiters;
};

}  // namespace detail

namespace {

namespace aex = asio::experimental;
using asio::awaitable;
using asio::use_awaitable;
using Clock = dns::Clock;
using Result = std::pair<error_code, std::vector<wg::IpAddress>>;
constexpr auto kTry = asio::as_tuple(use_awaitable);
constexpr uint16_t kDnsPort = 53;

// One family's query within a lookup.
struct FamilyQuery {
  explicit FamilyQuery(uint16_t t) : qtype(t) {}
  uint16_t qtype;
  uint16_t id = 0;
  std::vector<uint8_t> query;
  dns::FamilyResult result;
  std::vector<bool> failed;  // by server: it answered SERVFAIL, REFUSED or the like
  bool settled() const { return result.outcome != dns::Outcome::pending; }
  bool any_failed() const { return std::find(failed.begin(), failed.end(), true) != failed.end(); }
};

// The query over TCP to `server` (after a truncated UDP answer), given up at `deadline`.
awaitable<std::optional<dns::Answer>> query_tcp(Stack& st, const wg::IpAddress& server, const FamilyQuery& f,
                                                Clock::time_point deadline) {
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer t(ex, deadline);
  auto [order, dial_ec, stream, tec] = co_await aex::make_parallel_group(
                                      st.async_dial_tcp(Endpoint{server, kDnsPort}, asio::deferred),
                                      t.async_wait(asio::deferred))
                                      .async_wait(aex::wait_for_one(), use_awaitable);
  if (dial_ec) co_return std::nullopt;
  // The timer closes the stream if it fires first: the pending read or write then fails.
  // Shared: the timer's handler may run after this frame has ended.
  auto s = std::make_shared<TcpStream>(std::move(stream));
  t.async_wait([s](const error_code& ec) {
    if (!ec) s->close();
  });
  auto frame = dns::tcp_frame(f.query);
  auto [ec, n] = co_await asio::async_write(*s, asio::buffer(frame), kTry);
  uint8_t len[2];
  std::vector<uint8_t> reply;
  if (!ec) std::tie(ec, n) = co_await asio::async_read(*s, asio::buffer(len), kTry);
  if (!ec) {
    reply.resize(static_cast<size_t>(len[0] << 8 | len[1]));
    std::tie(ec, n) = co_await asio::async_read(*s, asio::buffer(reply), kTry);
  }
  t.cancel();
  s->close();
  if (ec) co_return std::nullopt;
  co_return dns::parse_response(reply, f.id, f.qtype);
}

std::pair<error_code, dns::Resolution> failure(error_code ec) { return {ec, dns::Resolution{ec, {}, {}}}; }

// The whole lookup of `name` (a Cache::key) on the schedule of st's options.
awaitable<std::pair<error_code, dns::Resolution>> lookup(Stack& st, std::string name) {
  auto ex = co_await asio::this_coro::executor;
  const StackOptions& o = st.options();
  const auto& servers = o.dns_servers;
  std::array<FamilyQuery, 2> fams{FamilyQuery(dns::kTypeA), FamilyQuery(dns::kTypeAaaa)};
  for (auto& f : fams) {
    wg::random_bytes(&f.id, sizeof f.id);
    f.query = dns::build_query(f.id, name, f.qtype);
    if (f.query.empty()) co_return failure(asio::error::invalid_argument);
    f.failed.resize(servers.size());
  }
  error_code ec;
  UdpSocket sock = st.listen_udp(Endpoint{}, ec);
  if (ec) co_return failure(ec);

  const auto start = Clock::now();
  const auto deadline = start + o.dns_timeout;
  std::optional<Clock::time_point> next_send = start;
  std::optional<Clock::time_point> other_until;  // once a family gave addresses or NXDOMAIN
  size_t sends = 0;
  std::vector<bool> unreachable(servers.size());  // a send found no route to it
  asio::steady_timer timer(ex);
  std::vector<uint8_t> buf(4096);
  // Sends f's query to server k or, if that one failed f, to the next that has not.
  auto send = [&](FamilyQuery& f, size_t k) -> awaitable<void> {
    while (f.failed[k]) k = (k + 1) % servers.size();
    auto [sec, sn] = co_await sock.async_send_to(asio::buffer(f.query), Endpoint{servers[k], kDnsPort}, kTry);
    if (sec == asio::error::host_unreachable) unreachable[k] = true;
  };

  while (!(fams[0].settled() && fams[1].settled())) {
    const auto now = Clock::now();
    if (now >= deadline || (other_until && now >= *other_until)) break;
    if (next_send && now >= *next_send) {
      const size_t server = sends % servers.size();
      for (auto& f : fams)
        if (!f.settled()) co_await send(f, server);
      // No server is routed: no answer can come.
      if (std::all_of(unreachable.begin(), unreachable.end(), [](bool u) { return u; }))
        co_return failure(asio::error::host_unreachable);
      ++sends;
      auto at = dns::send_at(sends, servers.size(), o.dns_retry, o.dns_timeout);
      next_send = at ? std::optional(start + *at) : std::nullopt;
      if (unreachable[server]) next_send = Clock::now();  // the next server at once
      continue;
    }

    auto wake = deadline;
    if (next_send) wake = std::min(wake, *next_send);
    if (other_until) wake = std::min(wake, *other_until);
    timer.expires_at(wake);
    Endpoint from;
    auto [order, rec, n, tec] = co_await aex::make_parallel_group(
                                    sock.async_receive_from(asio::buffer(buf), from, asio::deferred),
                                    timer.async_wait(asio::deferred))
                                    .async_wait(aex::wait_for_one(), use_awaitable);
    // A datagram that came in as the timer fired is read all the same.
    if (rec) {
      if (order[0] == 0) co_return failure(rec);  // the socket failed (the Stack's end)
      continue;
    }
    const size_t k = static_cast<size_t>(std::find(servers.begin(), servers.end(), from.addr) - servers.begin());
    if (from.port != kDnsPort || k == servers.size()) continue;
    for (auto& f : fams) {
      if (f.settled()) continue;
      auto a = dns::parse_response(std::span(buf.data(), n), f.id, f.qtype);
      if (!a) continue;
      if (a->truncated && !(a = co_await query_tcp(st, from.addr, f, deadline))) break;  // UDP retries go on
      switch (a->rcode) {
        case dns::kRcodeNoError:
          f.result.outcome = a->addresses.empty() ? dns::Outcome::no_data : dns::Outcome::addresses;
          f.result.addresses = std::move(a->addresses);
          f.result.ttl = a->ttl;
          break;
        case dns::kRcodeNxDomain:
          f.result.outcome = dns::Outcome::nx_domain;
          break;
        default:  // this server cannot answer: the next that has not failed is asked at once
          f.failed[k] = true;
          if (!std::count(f.failed.begin(), f.failed.end(), false)) f.result.outcome = dns::Outcome::server_failure;
          else co_await send(f, (k + 1) % servers.size());
      }
      // Either decides the result, whatever the other family's answer (combine()).
      const bool decisive = f.result.outcome == dns::Outcome::addresses || f.result.outcome == dns::Outcome::nx_domain;
      if (decisive && !other_until) other_until = Clock::now() + dns::kOtherFamilyWait;
      break;
    }
  }
  for (auto& f : fams)
    if (!f.settled()) f.result.outcome = f.any_failed() ? dns::Outcome::server_failure : dns::Outcome::timed_out;
  auto r = dns::combine(fams[0].result, fams[1].result);
  co_return std::pair{r.ec, std::move(r)};
}

// Starts the lookup of `name` for flight f: when it ends, f's waiters wake, the cache
// keeps the result and the flight is over.
void start_flight(Stack& st, detail::StackImpl& s, const std::string& name, std::shared_ptr<detail::DnsFlight> f) {
  detail::spawn_cancellable(
      s, lookup(st, name),
      [f, &s, name, alive = std::weak_ptr<int>(s.alive)](error_code ec, dns::Resolution r) {
        f->finished = true;
        f->ec = ec;
        f->addresses = r.addresses;
        if (alive.lock()) {  // else the Stack has ended: s is gone
          s.dns_flights.erase(name);
          if (!ec || r.cache_for > Clock::duration::zero()) s.dns_cache.insert(name, r, Clock::now());
        }
        for (auto* t : f->waiters) t->cancel();
      });
}

// One async_resolve of a name: from the cache, or from the name's flight.
awaitable<Result> resolve_name(Stack& st, detail::StackImpl& s, std::string host) {
  auto ex = co_await asio::this_coro::executor;
  const std::string name = dns::Cache::key(host);
  if (auto hit = s.dns_cache.find(name, Clock::now())) co_return Result{hit->ec, hit->addresses};
  auto& slot = s.dns_flights[name];
  if (!slot) {
    slot = std::make_shared<detail::DnsFlight>();
    start_flight(st, s, name, slot);
  }
  auto f = slot;
  asio::steady_timer wake(ex, asio::steady_timer::time_point::max());
  f->waiters.push_back(&wake);
  struct Leave {
    detail::DnsFlight& f;
    asio::steady_timer* t;
    ~Leave() { std::erase(f.waiters, t); }
  } leave{*f, &wake};
  co_await wake.async_wait(kTry);
  // Woken without the flight finished: this lookup was cancelled (its handler has been
  // told already); the flight goes on for the others and the cache.
  if (!f->finished) co_return Result{asio::error::operation_aborted, {}};
  co_return Result{f->ec, f->addresses};
}

}  // namespace

void Stack::resolve_impl(std::string host,
                         asio::any_completion_handler<void(error_code, std::vector<wg::IpAddress>)> h) {
  auto ex = impl_->executor();
  if (auto literal = wg::IpAddress::parse(host.size() > 2 && host.front() == '[' && host.back() == ']'
                                               ? std::string_view(host).substr(1, host.size() - 2)
                                               : std::string_view(host))) {
    detail::complete(ex, std::move(h), error_code{}, std::vector<wg::IpAddress>{*literal});
    return;
  }
  if (impl_->options.dns_servers.empty()) {
    detail::complete(ex, std::move(h), error_code(asio::error::host_not_found), std::vector<wg::IpAddress>{});
    return;
  }
  detail::spawn_cancellable(*impl_, resolve_name(*this, *impl_, std::move(host)), std::move(h));
}

std::vector<wg::IpAddress> Stack::resolve(const std::string& host, error_code& ec) {
  std::promise<std::pair<error_code, std::vector<wg::IpAddress>>> done;
  auto fut = done.get_future();
  async_resolve(host, [&done](error_code e, std::vector<wg::IpAddress> a) { done.set_value({e, std::move(a)}); });
  auto [e, a] = fut.get();
  ec = e;
  return a;
}

}  // namespace netstack
