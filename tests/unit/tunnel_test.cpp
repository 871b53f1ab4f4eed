// wgnet::Tunnel's typed error: which set-up step failed, and why.
#include <catch2/catch.hpp>

#include <string>
#include <system_error>

#include "wgnet/netstack.hpp"

TEST_CASE("tunnel: a TunnelError names its step, the port and the system's reason", "[tunnel]") {
  const wgnet::TunnelError udp(wgnet::TunnelError::Step::udp_port,
                               std::make_error_code(std::errc::address_in_use), 51820);
  CHECK(udp.step() == wgnet::TunnelError::Step::udp_port);
  CHECK(udp.port() == 51820);
  CHECK(udp.code() == std::errc::address_in_use);
  CHECK(std::string(udp.what()) == "wgnet: UDP port 51820: " + udp.code().message());
  const wgnet::TunnelError stack(wgnet::TunnelError::Step::stack, std::make_error_code(std::errc::not_enough_memory), 0);
  CHECK(std::string(stack.what()) == "wgnet: the network stack: " + stack.code().message());
  const std::system_error& as_system_error = stack;  // what embedding programs caught before
  CHECK(as_system_error.code() == std::errc::not_enough_memory);
}
