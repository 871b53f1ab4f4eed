// wg-netstack's command line: CLI11's set-up, its checks, and wireproxy's default config.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "limits.hpp"

namespace wgns {

struct Options {
  std::string config_path;  // -c, else wireproxy's default path that exists
  std::string socks = "127.0.0.1:1080", http_addr, health_addr, auth_file;
  std::string level = "error";  // a name parse_log_level takes ("silent" with -s)
  std::string congestion = "bbr";
  bool no_socks = false, daemon_mode = false, config_test = false, no_sandbox = false, sandbox_log = false;
  std::vector<std::string> forwards, reverses;
  double handshake_seconds = 0, keepalive_seconds = 0;
  std::vector<std::string> check_alive;
  unsigned check_alive_interval = 5;
  std::string uapi_path;  // --uapi, or kSocketDir/NAME.sock for --interface NAME
  std::string user;       // --user: once the sockets exist, run as this user
  Limits limits;          // --max-connections, --max-udp-associations, ...
  // Given on the command line: then they win over the config file.
  bool socks_given = false, http_given = false, level_given = false, check_alive_interval_given = false;
  bool silent = false;
};

// Parses argv. --help and --version print and exit 0; a usage error is one line on
// stderr and exit status 1 (programs::usage_error).
Options parse_options(int argc, char** argv);

}  // namespace wgns
