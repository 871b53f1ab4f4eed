#include "offload_switches.hpp"

#include <cstdlib>
#include <cstring>

namespace programs {

void turn_off(const OffloadSwitch& s, OffloadOptions& o) {
  if (s.tun_field) o.tun.*s.tun_field = false;
  if (s.bind_field) o.bind.*s.bind_field = false;
}

bool set_in_environment(const OffloadSwitch& s) {
  const char* v = std::getenv(s.env);
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

OffloadOptions offloads_from_environment(bool tun) {
  OffloadOptions o;
  for (const auto& s : kOffloadSwitches)
    if ((tun || !s.tun()) && set_in_environment(s)) turn_off(s, o);
  return o;
}

}  // namespace programs
