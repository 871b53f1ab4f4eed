// TimerList on a fake clock: a listed peer's due timers reach `act`, unarmed and removed
// peers leave the list, round() waits for a whole scan, close() ends both.
#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "wg/buffer_pool.hpp"
#include "wg/crypto.hpp"
#include "wg/index_table.hpp"
#include "wg/peer.hpp"
#include "wg/timer_hooks.hpp"
#include "wg/timer_list.hpp"
#include "../support/peer_access.hpp"

using namespace std::chrono_literals;
using namespace wg;

namespace {

const PeerAccess kAccess = PeerTestAccess::key();

// A timer thread over a clock the test moves; each act is recorded.
struct Fixture {
  IndexTable indices;
  BufferPool buffers{64};
  std::atomic<uint64_t> dropped{0};
  StagingBudget staging{16, dropped};
  std::atomic<Clock::rep> clock{(TimePoint{} + 1000h).time_since_epoch().count()};
  TimerList list;
  std::mutex mu;
  std::vector<std::pair<Peer*, TimerActions>> acts;
  std::thread thread;

  Fixture() {
    thread = std::thread([this] {
      list.run([this] { return now(); },
               [this](Peer& p, const TimerActions& a) {
                 std::lock_guard lock(mu);
                 acts.emplace_back(&p, a);
               });
    });
  }
  ~Fixture() {
    list.close();
    thread.join();
  }
  TimePoint now() const { return TimePoint(Clock::duration(clock.load())); }
  void advance(Clock::duration d) { clock += d.count(); }
  PeerPtr peer() {
    return std::make_shared<Peer>(crypto::public_key(crypto::generate_private_key()),
                                  PeerShared{indices, buffers, staging});
  }
  size_t acted() { return taken().size(); }
  std::vector<std::pair<Peer*, TimerActions>> taken() {
    std::lock_guard lock(mu);
    return acts;
  }
};

}  // namespace

TEST_CASE("timer list: a listed peer's due timer reaches act once it is due", "[timer_list]") {
  Fixture f;
  auto p = f.peer();
  p->with_timers(kAccess, [&](Timers& t) { on_initiation_sent(t, false, f.now()); });
  f.list.poke(*p);
  REQUIRE(f.list.round());
  CHECK(f.acted() == 0);  // the retransmission is REKEY_TIMEOUT away
  CHECK(p->listed_for_timers(kAccess));
  f.advance(kRekeyTimeout + 1s);  // past any jitter
  REQUIRE(f.list.round());
  const auto acts = f.taken();
  REQUIRE(acts.size() == 1);
  CHECK(acts[0].first == p.get());
  CHECK(acts[0].second.send_initiation);
  CHECK(acts[0].second.retry);
}

TEST_CASE("timer list: a peer with nothing armed is unlisted after a round", "[timer_list]") {
  Fixture f;
  auto p = f.peer();
  f.list.poke(*p);  // the thread may scan it at once: only after a round is it certain
  REQUIRE(f.list.round());
  CHECK(!p->listed_for_timers(kAccess));
  CHECK(f.acted() == 0);
  // Armed again, poke_before lists it again, and it stays listed while armed.
  const auto deadline = p->with_timers(kAccess, [&](Timers& t) {
    on_initiation_sent(t, false, f.now());
    return t.next_deadline();
  });
  f.list.poke_before(*p, deadline);
  CHECK(p->listed_for_timers(kAccess));
}

TEST_CASE("timer list: the thread sleeps until the earliest deadline, or kMaxSleep with none", "[timer_list]") {
  Fixture f;
  REQUIRE(f.list.round());
  REQUIRE(f.list.wake_at());
  CHECK(*f.list.wake_at() == f.now() + TimerList::kMaxSleep);
  // A retransmission REKEY_TIMEOUT away (plus jitter): woken then, not every second.
  auto p = f.peer();
  const auto deadline = p->with_timers(kAccess, [&](Timers& t) {
    on_initiation_sent(t, false, f.now());
    return t.next_deadline();
  });
  REQUIRE(deadline);
  f.list.poke_before(*p, deadline);
  REQUIRE(f.list.round());
  REQUIRE(f.list.wake_at());
  CHECK(*f.list.wake_at() == *deadline);
  CHECK(*deadline >= f.now() + kRekeyTimeout);
  // A sooner deadline armed later pokes the sleeping thread: its next wake is that one.
  auto q = f.peer();
  const auto sooner = q->with_timers(kAccess, [&](Timers& t) {
    t.set_persistent_keepalive(1s);
    on_transport_sent(t, false, f.now());
    return t.next_deadline();
  });
  REQUIRE(sooner);
  REQUIRE(*sooner < *deadline);
  f.list.poke_before(*q, sooner);
  REQUIRE(f.list.round());
  REQUIRE(f.list.wake_at());
  CHECK(*f.list.wake_at() == *sooner);
}

TEST_CASE("timer list: a removed peer gets no act and leaves the list", "[timer_list]") {
  Fixture f;
  auto p = f.peer();
  p->with_timers(kAccess, [&](Timers& t) { on_initiation_sent(t, false, f.now()); });
  f.list.poke(*p);
  REQUIRE(f.list.round());
  p->mark_removed(kAccess);
  f.advance(kRekeyTimeout + 1s);
  REQUIRE(f.list.round());
  CHECK(f.acted() == 0);
  CHECK(!p->listed_for_timers(kAccess));
  CHECK(p.use_count() == 1);  // the list let go of it
}

TEST_CASE("timer list: take_removed hands back removed peers still listed", "[timer_list]") {
  // No thread runs this list (a round would drop the removed peer itself); take_removed
  // waits its second for a thread that never started.
  Fixture f;
  TimerList list;
  auto kept = f.peer(), gone = f.peer();
  for (auto& p : {kept, gone}) {
    p->with_timers(kAccess, [&](Timers& t) { on_initiation_sent(t, false, f.now()); });
    list.poke(*p);
  }
  gone->mark_removed(kAccess);
  auto taken = list.take_removed();
  REQUIRE(taken.size() == 1);
  CHECK(taken[0] == gone);
  taken.clear();
  CHECK(gone.use_count() == 1);
  CHECK(kept.use_count() == 2);
}

TEST_CASE("timer list: close ends round() and the thread", "[timer_list]") {
  auto f = std::make_unique<Fixture>();
  f->list.close();
  CHECK(!f->list.round());
  f.reset();  // joins the thread
}
