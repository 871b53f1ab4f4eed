// Reload: load, then sync_config; failures reported, never thrown.
#include "reload.hpp"

#include <fmt/core.h>

#include "bind/resolve.hpp"
#include "wg/apply.hpp"

namespace programs {

ReloadResult reload(wg::Device& device, const std::string& path,
                    const std::function<wg::Config(const std::string&)>& load, std::string_view program) {
  wg::Config cfg;
  try {
    cfg = load(path);
  } catch (const std::exception& e) {
    return {false, fmt::format("{}: reload: {}; nothing changed", program, e.what())};
  }
  try {
    wg::sync_config(device, cfg, conn::resolve_endpoint);
    return {true, fmt::format("{}: {} reloaded ({} peers)", program, path, device.peers().size())};
  } catch (const std::exception& e) {
    return {false, fmt::format("{}: reload of {}: {}; what came before it is applied", program, path, e.what())};
  }
}

}  // namespace programs
