// What the programs check in a loaded config before they start.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "wg/config.hpp"

namespace programs {

// A config's warnings as the lines to print: each starts "warning: ".
std::vector<std::string> warning_lines(const std::vector<std::string>& warnings);

// Throws std::runtime_error "PATH: ..." when the config has no [Interface] at all, no
// PrivateKey, or (address_needed) no Address; `address_hint` ends that last message.
void require_interface(const wg::Config& cfg, const std::string& path, bool address_needed,
                       std::string_view address_hint = {});

}  // namespace programs
