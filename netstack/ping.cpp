// ICMP and ICMPv6 echo (ping) over lwIP's raw pcbs.
#include <boost/asio/error.hpp>

#include <cstring>
#include <future>

#include "netstack/stack_impl.hpp"
#include "wg/base/random.hpp"

extern "C" {
#include "lwip/inet_chksum.h"
#include "lwip/raw.h"
}

namespace netstack {

namespace {

struct PingOp : std::enable_shared_from_this<PingOp> {
  explicit PingOp(detail::StackImpl& s) : s(s), timer(s.io_) {}
  ~PingOp() {
    if (pcb) raw_remove(pcb);
  }
  detail::StackImpl& s;
  raw_pcb* pcb = nullptr;
  asio::steady_timer timer;
  asio::any_completion_handler<void(error_code, std::chrono::nanoseconds)> h;
  std::shared_ptr<PingOp> self;
  uint16_t id = 0, seq = 0;
  bool v6 = false;
  bool cancelled = false;  // before the ping reached the Stack's thread
  std::chrono::steady_clock::time_point sent;

  void cancel() {
    if (h) finish(asio::error::operation_aborted, {});
    else cancelled = true;
  }

  uint64_t abandon_id = 0;  // in s.abandon while pending

  void finish(error_code ec, std::chrono::nanoseconds rtt) {
    if (!h) return;
    s.abandon.erase(abandon_id);
    timer.cancel();
    auto handler = std::move(h);
    h = nullptr;
    detail::complete(s.executor(), std::move(handler), ec, rtt);
    if (pcb) {
      raw_recv(pcb, nullptr, nullptr);
      raw_remove(pcb);
      pcb = nullptr;
    }
    self.reset();
  }

  static u8_t on_recv(void* arg, raw_pcb*, pbuf* p, const ip_addr_t*) {
    auto* op = static_cast<PingOp*>(arg);
    uint8_t head[64];
    u16_t n = pbuf_copy_partial(p, head, sizeof head, 0);
    if (n < 1) return 0;
    size_t off = 0;
    // The payload starts at the IP header for IPv4; skip to the ICMP message.
    if ((head[0] >> 4) == 4) off = static_cast<size_t>(head[0] & 0x0f) * 4;
    else if ((head[0] >> 4) == 6) off = 40;
    if (n < off + 8) return 0;
    const uint8_t* icmp = head + off;
    uint8_t reply_type = op->v6 ? 129 : 0;
    uint16_t id = static_cast<uint16_t>((icmp[4] << 8) | icmp[5]);
    uint16_t seq = static_cast<uint16_t>((icmp[6] << 8) | icmp[7]);
    if (icmp[0] != reply_type || id != op->id || seq != op->seq) return 0;  // not ours
    pbuf_free(p);
    op->finish({}, std::chrono::steady_clock::now() - op->sent);
    return 1;
  }
};

}  // namespace

void Stack::ping_impl(wg::IpAddress to, std::chrono::milliseconds timeout,
                      asio::any_completion_handler<void(error_code, std::chrono::nanoseconds)> h) {
  auto* s = impl_.get();
  auto op = std::make_shared<PingOp>(*s);
  detail::on_cancel(*s, h, [w = std::weak_ptr<PingOp>(op)] {
    if (auto op = w.lock()) op->cancel();
  });
  asio::dispatch(s->io_, [s, op, to, timeout, h = std::move(h)]() mutable {
    using std::chrono::nanoseconds;
    if (op->cancelled || s->closing) return detail::complete(s->executor(), std::move(h), error_code(asio::error::operation_aborted), nanoseconds{});
    if (to.family == 0) return detail::complete(s->executor(), std::move(h), error_code(asio::error::invalid_argument), nanoseconds{});
    if (!s->routable(to)) return detail::complete(s->executor(), std::move(h), error_code(asio::error::host_unreachable), nanoseconds{});
    op->v6 = to.is_v6();
    op->pcb = op->v6 ? s->new_raw(IPADDR_TYPE_V6, IP6_NEXTH_ICMP6) : s->new_raw(IPADDR_TYPE_V4, IP_PROTO_ICMP);
    if (!op->pcb) return detail::complete(s->executor(), std::move(h), error_code(asio::error::no_memory), nanoseconds{});
    if (op->v6) {
      op->pcb->chksum_reqd = 1;  // lwIP fills the ICMPv6 checksum (pseudo-header)
      op->pcb->chksum_offset = 2;
    }
    wg::random_bytes(&op->id, sizeof op->id);
    op->seq = 1;
    op->h.swap(h);  // not operator=: Boost 1.81's move-assignment recurses
    op->self = op;
    op->abandon_id = ++s->next_abandon_id;
    s->abandon.emplace(op->abandon_id, [w = std::weak_ptr<PingOp>(op)] {
      if (auto op = w.lock()) op->finish(asio::error::operation_aborted, {});
    });
    raw_recv(op->pcb, &PingOp::on_recv, op.get());

    const size_t len = 8 + 32;
    pbuf* p = pbuf_alloc(PBUF_IP, len, PBUF_RAM);
    if (!p) return op->finish(asio::error::no_memory, {});
    auto* m = static_cast<uint8_t*>(p->payload);
    std::memset(m, 0, len);
    m[0] = op->v6 ? 128 : 8;
    m[4] = static_cast<uint8_t>(op->id >> 8);
    m[5] = static_cast<uint8_t>(op->id);
    m[6] = static_cast<uint8_t>(op->seq >> 8);
    m[7] = static_cast<uint8_t>(op->seq);
    for (size_t i = 8; i < len; ++i) m[i] = static_cast<uint8_t>(i);
    if (!op->v6) {
      u16_t sum = inet_chksum(m, len);
      std::memcpy(m + 2, &sum, 2);
    }
    ip_addr_t addr = detail::to_lwip(to);
    op->sent = std::chrono::steady_clock::now();
    err_t err = raw_sendto(op->pcb, p, &addr);
    pbuf_free(p);
    if (err != ERR_OK) return op->finish(err == ERR_RTE ? asio::error::host_unreachable : asio::error::no_buffer_space, {});
    op->timer.expires_after(timeout);
    op->timer.async_wait([w = std::weak_ptr<PingOp>(op)](const error_code& ec) {
      if (auto op = w.lock(); op && !ec) op->finish(asio::error::timed_out, {});
    });
  });
}

std::chrono::nanoseconds Stack::ping(const wg::IpAddress& to, std::chrono::milliseconds timeout, error_code& ec) {
  std::promise<std::pair<error_code, std::chrono::nanoseconds>> done;
  auto fut = done.get_future();
  async_ping(to, timeout, [&done](error_code e, std::chrono::nanoseconds rtt) { done.set_value({e, rtt}); });
  auto [e, rtt] = fut.get();
  ec = e;
  return rtt;
}

}  // namespace netstack
