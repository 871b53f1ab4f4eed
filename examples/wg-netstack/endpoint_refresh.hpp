// Peers whose Endpoint is a host name: the name looked up again while the peer has no
// fresh handshake, so a peer that moved is found.
#pragma once

#include <boost/asio/steady_timer.hpp>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "context.hpp"

namespace wgns {

// Every 15 s on timer's executor, until the timer is cancelled: each peer of `named`
// (its key, its Endpoint as written) without a handshake in the last REKEY_AFTER_TIME +
// REKEY_TIMEOUT gets the name's address if it changed (one event line).
void watch_endpoints(Context& ctx, std::shared_ptr<boost::asio::steady_timer> timer,
                     std::vector<std::pair<wg::PublicKey, std::string>> named);

}  // namespace wgns
