// The programs' reload (wg-netstack's SIGHUP, wg-run's SIGHUP and SIGUSR1): the config
// file read again and its WireGuard part applied as `wg syncconf` would.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "wg/config.hpp"
#include "wg/device.hpp"

namespace programs {

struct ReloadResult {
  bool ok = false;       // read and applied whole
  std::string message;   // one line for the log, starting with the program's name
};

// Reads `path` with `load` (which throws on a file that does not parse: then nothing
// changes) and brings `device` to it with wg::sync_config, host-name endpoints resolved:
// peers added, changed and removed, unchanged ones keep their sessions. What cannot change
// at run time (addresses, DNS, MTU) is the caller's to keep. Logs nothing: the caller
// shows the message as its logging has it.
ReloadResult reload(wg::Device& device, const std::string& path,
                    const std::function<wg::Config(const std::string&)>& load, std::string_view program);

}  // namespace programs
