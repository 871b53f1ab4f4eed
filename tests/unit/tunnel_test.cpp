// wgnet::Tunnel's typed error: which set-up step failed, and why.
#include <catch2/catch.hpp>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <system_error>

#include "wg/crypto.hpp"
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

TEST_CASE("tunnel: a ListenPort in use is a TunnelError with the port and address_in_use", "[tunnel]") {
  const int taken = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  REQUIRE(taken >= 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  REQUIRE(::bind(taken, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  socklen_t len = sizeof sa;
  REQUIRE(::getsockname(taken, reinterpret_cast<sockaddr*>(&sa), &len) == 0);
  const uint16_t port = ntohs(sa.sin_port);
  const std::string config = "[Interface]\nPrivateKey = " + wg::crypto::generate_private_key().to_base64() +
                             "\nAddress = 198.19.0.1/24\nListenPort = " + std::to_string(port) + "\n";
  try {
    wgnet::Tunnel::open_text(config);
    FAIL("the tunnel opened on a port in use");
  } catch (const wgnet::TunnelError& e) {
    CHECK(e.step() == wgnet::TunnelError::Step::udp_port);
    CHECK(e.port() == port);
    CHECK(e.code() == std::errc::address_in_use);
  }
  ::close(taken);
}
