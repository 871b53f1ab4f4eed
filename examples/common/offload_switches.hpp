// The offload off-switches of the programs (wg-tun, wg-netstack): one table of flags,
// environment variables and what they turn off. The libraries read no environment:
// tunlinux::Tun::Options and conn::LinuxBind::Options default to every offload on, and a
// program decides what its user may switch off and how.
#pragma once

#include "bind/linux.hpp"
#include "tunlinux/tun.hpp"

namespace programs {

struct OffloadOptions {
  tunlinux::Tun::Options tun;
  conn::LinuxBind::Options bind;
};

struct OffloadSwitch {
  const char* flag;  // wg-tun's command-line flag
  const char* env;   // the environment variable that does the same
  const char* what;
  bool tunlinux::Tun::Options::*tun_field;     // the option it turns off, or null
  bool conn::LinuxBind::Options::*bind_field;  // the option it turns off, or null
  bool tun() const { return tun_field != nullptr; }
};

inline constexpr OffloadSwitch kOffloadSwitches[] = {
    {"--disable-tso", "WG_TUN_DISABLE_TSO", "TUN TCP segmentation offload (TSO4/TSO6)", &tunlinux::Tun::Options::tso, nullptr},
    {"--disable-uso", "WG_TUN_DISABLE_USO", "TUN UDP segmentation offload (USO4/USO6)", &tunlinux::Tun::Options::uso, nullptr},
    {"--disable-tun-gro", "WG_TUN_DISABLE_GRO", "coalescing (GRO) of packets written to the TUN", &tunlinux::Tun::Options::gro, nullptr},
    {"--disable-tun-csum", "WG_TUN_DISABLE_CSUM", "trusting authenticated packets' checksums on TUN writes", &tunlinux::Tun::Options::csum, nullptr},
    {"--disable-udp-gso", "WG_DISABLE_UDP_GSO", "UDP_SEGMENT sends on the UDP sockets", nullptr, &conn::LinuxBind::Options::gso},
    {"--disable-udp-gro", "WG_DISABLE_UDP_GRO", "UDP_GRO receives on the UDP sockets", nullptr, &conn::LinuxBind::Options::gro},
};

// Turns the switch's offload off in `o`.
void turn_off(const OffloadSwitch& s, OffloadOptions& o);
// Whether the switch's environment variable is set to anything but "" or "0".
bool set_in_environment(const OffloadSwitch& s);
// Every offload on, less what the environment's switches turn off (the UDP ones only
// when `tun` is false: a program without a TUN has no TUN offloads to switch).
OffloadOptions offloads_from_environment(bool tun = true);

}  // namespace programs
