// Applies a parsed wg-quick config to a Device (what `wg setconf` does). Endpoint names
// are resolved by the resolver the caller gives (the core does no lookups of its own).
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
// Numeric endpoints only ("198.18.0.2:51820", "[fd00:18::2]:51820"): the core looks up no
// names. Programs pass conn::resolve_endpoint (bind/resolve.hpp) to allow host names.
std::optional<conn::Endpoint> numeric_endpoint(const std::string& text, std::string& error);

// Sets the private key, listen port, fwmark and every peer. Throws std::runtime_error
// naming the peer's endpoint when `resolve` cannot turn it into an address.
void apply_config(Device& dev, const Config& cfg, const EndpointResolver& resolve = numeric_endpoint);

// Brings a running device to cfg as `wg syncconf` does, touching only what differs, so
// the sessions of unchanged peers go on: the private key and listen port when given and
// different, the fwmark when given; peers not in cfg removed, new ones added; for each
// peer in cfg its preshared key (none: zero), allowed IPs (replaced, as a set) and
// persistent keepalive as written, and its endpoint when one is written and it names
// another destination (else the current, perhaps roamed, one stays). Throws as
// apply_config does; on a throw, what came before it has been applied.
void sync_config(Device& dev, const Config& cfg, const EndpointResolver& resolve = numeric_endpoint);

}  // namespace wg
