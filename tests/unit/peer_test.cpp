// Peer without a device: a handshake between two peers' states through Peer's methods,
// the REKEY_TIMEOUT guard, a preshared key change, the endpoint's change hook, and that a
// program cannot call the pipeline methods.
#include <catch2/catch.hpp>

#include <optional>
#include <type_traits>
#include <vector>

#include "wg/buffer_pool.hpp"
#include "wg/crypto.hpp"
#include "wg/index_table.hpp"
#include "wg/noise.hpp"
#include "wg/peer.hpp"
#include "../support/peer_access.hpp"

using namespace std::chrono_literals;
using namespace wg;

namespace {

const PeerAccess kAccess = PeerTestAccess::key();

// One side: our identity, and the other side as our peer.
struct Side {
  noise::Identity id = noise::Identity::from_private(crypto::generate_private_key());
  IndexTable indices;
  BufferPool buffers{64};
  std::atomic<uint64_t> dropped{0};
  StagingBudget staging{16, dropped};
  PeerPtr peer;
  void meet(const Side& other) {
    peer = std::make_shared<Peer>(other.id.public_key, PeerShared{indices, buffers, staging});
  }
};

const TimePoint kT0 = TimePoint{} + 1000h;
const auto kWall = std::chrono::system_clock::time_point{} + 24h * 20000;

// a initiates, b answers; returns both sides' keys.
std::pair<noise::SessionKeys, noise::SessionKeys> handshake(Side& a, Side& b, TimePoint now) {
  MessageInitiation init;
  REQUIRE(a.peer->create_initiation(kAccess, a.id, now, noise::tai64n(kWall + (now - kT0)), init));
  auto in = noise::consume_initiation(init, b.id, [&](const PublicKey& remote) -> std::optional<SymmetricKey> {
    if (!(remote == a.id.public_key)) return std::nullopt;
    return b.peer->static_static(kAccess, b.id);
  });
  REQUIRE(in);
  MessageResponse resp;
  noise::SessionKeys responder;
  REQUIRE(b.peer->answer_initiation(kAccess, *in, now, resp, responder) == Peer::Answer::answered);
  auto initiator = a.peer->consume_response(kAccess, a.id, resp);
  REQUIRE(initiator);
  return {*initiator, responder};
}

}  // namespace

TEST_CASE("peer: a handshake through Peer's methods gives both sides the same keys", "[peer]") {
  Side a, b;
  a.meet(b);
  b.meet(a);
  const auto [ka, kb] = handshake(a, b, kT0);
  CHECK(ka.send == kb.receive);
  CHECK(ka.receive == kb.send);
  CHECK(ka.initiator);
  CHECK(!kb.initiator);
  // Each side's index is registered for the peer.
  REQUIRE(a.indices.lookup(ka.local_index));
  CHECK(a.indices.lookup(ka.local_index)->peer == a.peer);
  REQUIRE(b.indices.lookup(kb.local_index));
  CHECK(b.indices.lookup(kb.local_index)->peer == b.peer);
}

TEST_CASE("peer: one initiation per REKEY_TIMEOUT, and a replayed one refused", "[peer]") {
  Side a, b;
  a.meet(b);
  b.meet(a);
  MessageInitiation first, again;
  REQUIRE(a.peer->create_initiation(kAccess, a.id, kT0, noise::tai64n(kWall), first));
  CHECK(!a.peer->create_initiation(kAccess, a.id, kT0 + kRekeyTimeout - 1ms, noise::tai64n(kWall + 4s), again));
  CHECK(a.peer->create_initiation(kAccess, a.id, kT0 + kRekeyTimeout, noise::tai64n(kWall + 5s), again));

  auto in = noise::consume_initiation(again, b.id);
  REQUIRE(in);
  MessageResponse resp;
  noise::SessionKeys keys;
  CHECK(b.peer->answer_initiation(kAccess, *in, kT0 + kRekeyTimeout, resp, keys) == Peer::Answer::answered);
  // The same initiation again (its timestamp is not newer): refused.
  CHECK(b.peer->answer_initiation(kAccess, *in, kT0 + kRekeyTimeout + 1s, resp, keys) == Peer::Answer::refused);
}

TEST_CASE("peer: a new preshared key lets the next initiation go at once", "[peer]") {
  Side a, b;
  a.meet(b);
  b.meet(a);
  MessageInitiation msg;
  REQUIRE(a.peer->create_initiation(kAccess, a.id, kT0, noise::tai64n(kWall), msg));
  PresharedKey psk;
  psk.data()[0] = 1;
  CHECK(a.peer->set_preshared_key(kAccess, psk));
  CHECK(!a.peer->set_preshared_key(kAccess, psk));  // the same key: nothing changes
  CHECK(a.peer->preshared_key() == psk);
  CHECK(a.peer->create_initiation(kAccess, a.id, kT0 + 1s, noise::tai64n(kWall + 1s), msg));
}

TEST_CASE("peer: set_endpoint shows every change to its hook, in order", "[peer]") {
  Side a, b;
  a.meet(b);
  auto x = conn::Endpoint::parse("198.18.0.2:51820"), y = conn::Endpoint::parse("198.18.0.3:51820");
  REQUIRE(x);
  REQUIRE(y);
  std::vector<std::pair<std::optional<std::string>, std::optional<std::string>>> seen;
  auto hook = [&](const conn::Endpoint* from, const conn::Endpoint* to) {
    seen.emplace_back(from ? std::optional(from->to_string()) : std::nullopt,
                      to ? std::optional(to->to_string()) : std::nullopt);
  };
  a.peer->set_endpoint(kAccess, &*x, hook);
  a.peer->set_endpoint(kAccess, &*y, hook);
  a.peer->set_endpoint(kAccess, nullptr, hook);
  REQUIRE(seen.size() == 3);
  CHECK(seen[0] == std::pair{std::optional<std::string>(), std::optional<std::string>("198.18.0.2:51820")});
  CHECK(seen[1] == std::pair{std::optional<std::string>("198.18.0.2:51820"), std::optional<std::string>("198.18.0.3:51820")});
  CHECK(seen[2] == std::pair{std::optional<std::string>("198.18.0.3:51820"), std::optional<std::string>()});
  CHECK(!a.peer->endpoint());
}

// A program holding a PeerPtr reads the peer but cannot drive it: the pipeline methods
// want a PeerAccess, which only the library (and tests) can make.
template <class P, class... Args>
concept SetsEndpoint = requires(P& p, Args... args) { p.set_endpoint(args...); };
template <class P>
concept ZeroesKeys = requires(P& p) { p.zero_keys(); };
template <class P>
concept Readable = requires(const P& p) {
  p.public_key();
  p.stats();
  p.endpoint();
  p.removed();
  p.preshared_key();
  p.persistent_keepalive();
  p.has_session_keys();
};
using EndpointHook = void (*)(const conn::Endpoint*, const conn::Endpoint*);
static_assert(!SetsEndpoint<Peer, const conn::Endpoint*, EndpointHook>);
static_assert(!ZeroesKeys<Peer>);
static_assert(!std::is_default_constructible_v<PeerAccess>);
static_assert(SetsEndpoint<Peer, PeerAccess, const conn::Endpoint*, EndpointHook>);  // the check can pass
static_assert(Readable<Peer>);
