// programs::UapiSocket: who removes the socket file, and when.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "uapi_socket.hpp"
#include "wg/uapi_server.hpp"

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/wgnet-uapi-socket-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

bool is_socket(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

}  // namespace

TEST_CASE("uapi_socket: a socket made here is removed when it goes", "[uapi_socket]") {
  TempDir dir;
  const std::string path = dir.path + "/run/wg0.sock";
  {
    auto s = programs::UapiSocket::listen(path);
    REQUIRE(s);
    CHECK(s.path() == path);
    CHECK(is_socket(path));
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    ::close(s.release());  // a server owns the descriptor; the file stays ours
    CHECK_FALSE(s);
    CHECK(is_socket(path));
  }
  CHECK_FALSE(std::filesystem::exists(path));
}

TEST_CASE("uapi_socket: a live socket is refused with listen_unix's message", "[uapi_socket]") {
  TempDir dir;
  const std::string path = dir.path + "/wg0.sock";
  auto first = programs::UapiSocket::listen(path);
  CHECK_THROWS_WITH(programs::UapiSocket::listen(path), "UAPI socket " + path + " is in use by another process");
  CHECK(is_socket(path));  // the failed one removed nothing
}

TEST_CASE("uapi_socket: a socket adopted without its path leaves the file", "[uapi_socket]") {
  TempDir dir;
  const std::string path = dir.path + "/wg0.sock";
  // Made as another process would, which then went without removing it.
  int fd = -1;
  {
    std::string error;
    fd = wg::uapi::listen_unix(path, error);
    REQUIRE(fd >= 0);
  }
  CHECK(is_socket(path));
  { auto adopted = programs::UapiSocket::adopt(::dup(fd)); }
  CHECK(is_socket(path));
  {
    auto inherited = programs::UapiSocket::adopt(fd, path);  // with the file
    CHECK(inherited.fd() == fd);
    auto moved = std::move(inherited);
    CHECK_FALSE(inherited);
    CHECK(is_socket(path));
  }
  CHECK_FALSE(std::filesystem::exists(path));
}

TEST_CASE("uapi_socket: close() removes the file at once, and only once", "[uapi_socket]") {
  TempDir dir;
  const std::string path = dir.path + "/wg0.sock";
  auto s = programs::UapiSocket::listen(path);
  s.close();
  CHECK_FALSE(s);
  CHECK_FALSE(std::filesystem::exists(path));
  auto other = programs::UapiSocket::listen(path);  // someone else's now
  s.close();
  CHECK(is_socket(path));
}
