// Applies a parsed wg-quick config to a Device (what `wg setconf` does), resolving
// endpoint host names with the system resolver: endpoints live on the underlay, outside
// the tunnel.
#pragma once

#include <string>

#include "bind/bind.hpp"
#include "wg/config.hpp"
#include "wg/device.hpp"

namespace wg {

// "host:port", "[v6]:port", "[fe80::1%eth0]:port" → endpoint; a host name is looked up
// (IPv4 preferred). nullopt with `error` set when it cannot be resolved.
std::optional<conn::Endpoint> resolve_endpoint(const std::string& text, std::string& error);

// Sets the private key, listen port, fwmark and every peer. Throws std::runtime_error
// naming the peer's endpoint when it cannot be resolved.
void apply_config(Device& dev, const Config& cfg);

// Brings a running device to cfg as `wg syncconf` does, touching only what differs, so
// the sessions of unchanged peers go on: the private key and listen port when given and
// different, the fwmark when given; peers not in cfg removed, new ones added; for each
// peer in cfg its preshared key (none: zero), allowed IPs (replaced, as a set) and
// persistent keepalive as written, and its endpoint when one is written and it names
// another destination (else the current, perhaps roamed, one stays). Throws as
// apply_config does; on a throw, what came before it has been applied.
void sync_config(Device& dev, const Config& cfg);

}  // namespace wg
