// Reload: load, then sync_config; failures reported, never thrown.
#include "reload.hpp"

#include <fmt/core.h>

#include "bind/resolve.hpp"
#include "wg/apply.hpp"
#include "wg/crypto.hpp"

namespace programs {

namespace {

ReloadResult load_and_sync(wg::Device& device, const std::string& path,
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

}  // namespace

ReloadResult reload(wg::Device& device, const std::string& path,
                    const std::function<wg::Config(const std::string&)>& load, std::string_view program) {
  ReloadResult r = load_and_sync(device, path, load, program);
  wg::scrub_stack();  // below us: the file's text and keys, parsed and applied
  return r;
}

}  // namespace programs
