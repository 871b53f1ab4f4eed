#include "endpoint_refresh.hpp"

#include <chrono>

#include "bind/resolve.hpp"
#include "wg/base/log.hpp"
#include "wg/messages.hpp"

namespace wgns {

void watch_endpoints(Context& ctx, std::shared_ptr<boost::asio::steady_timer> timer,
                     std::vector<std::pair<wg::PublicKey, std::string>> named) {
  timer->expires_after(std::chrono::seconds(15));
  timer->async_wait([&ctx, timer, named](const error_code& ec) {
    if (ec) return;
    auto now = std::chrono::system_clock::now().time_since_epoch();
    for (auto& [key, text] : named) {
      auto p = ctx.device.lookup_peer(key);
      if (!p) continue;
      auto last = std::chrono::nanoseconds(p->stats().last_handshake_ns.load());
      if (last.count() > 0 && now - last < wg::kRekeyAfterTime + wg::kRekeyTimeout) continue;
      std::string err;
      if (auto ep = conn::resolve_endpoint(text, err)) {
        auto cur = p->endpoint();
        if (!cur || !cur->same_destination(*ep)) {
          wg::log::event("endpoint {} now resolves to {}", text, ep->to_string());
          ctx.device.set_endpoint(*p, *ep);
        }
      }
    }
    watch_endpoints(ctx, timer, named);
  });
}

}  // namespace wgns
