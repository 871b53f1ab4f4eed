// Applies a parsed wg-quick config to a Device, as `wg setconf` and `wg syncconf` do.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "bind/bind.hpp"
#include "wg/config.hpp"
#include "wg/device.hpp"

namespace wg {

// Turns a config's Endpoint text into an endpoint, or nullopt with `error` set.
using EndpointResolver = std::function<std::optional<conn::Endpoint>(const std::string& text, std::string& error)>;
// Numeric endpoints only; conn::resolve_endpoint also resolves host names.
std::optional<conn::Endpoint> numeric_endpoint(const std::string& text, std::string& error);

// Sets the private key, listen port, fwmark and every peer. Throws std::runtime_error
// when `resolve` fails.
void apply_config(Device& dev, const Config& cfg, const EndpointResolver& resolve = numeric_endpoint);

// As `wg syncconf`: changes only what differs, so unchanged peers keep their sessions.
// Peers missing from cfg go; each peer's preshared key (absent: zero), allowed IPs and
// keepalive become as written; its endpoint changes only if cfg names another, so a
// roamed one stays. Throws as apply_config does, leaving applied what came before.
void sync_config(Device& dev, const Config& cfg, const EndpointResolver& resolve = numeric_endpoint);

}  // namespace wg
