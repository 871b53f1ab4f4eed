// Applies a parsed wg-quick config to a Device, as `wg setconf` and `wg syncconf` do.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "bind/bind.hpp"
#include "wg/config.hpp"
#include "wg/device.hpp"

namespace wg {

// nullopt with `error` set on failure.
using EndpointResolver = std::function<std::optional<conn::Endpoint>(const std::string& text, std::string& error)>;
// Numeric only; conn::resolve_endpoint also resolves names.
std::optional<conn::Endpoint> numeric_endpoint(const std::string& text, std::string& error);

// Throws std::runtime_error when `resolve` fails.
void apply_config(Device& dev, const Config& cfg, const EndpointResolver& resolve = numeric_endpoint);

// Changes only what differs, so unchanged peers keep their sessions; an endpoint
// changes only if cfg names another, so a roamed one stays. Throws as apply_config,
// leaving applied what came before.
void sync_config(Device& dev, const Config& cfg, const EndpointResolver& resolve = numeric_endpoint);

}  // namespace wg
