// wg::escaped and wg::shown (wg/base/shown.hpp), the forms in which text from a client or
// a file reaches a log line: no byte that a terminal or a log reader acts on gets through.
#include <catch2/catch.hpp>

#include <string>

#include "wg/base/shown.hpp"

using namespace std::string_literals;

TEST_CASE("escaped: control bytes, NUL, newlines and bytes past ASCII as backslash-x and two hex digits", "[shown]") {
  CHECK(wg::escaped("web.internal") == "web.internal");
  CHECK(wg::escaped("\x1b[31mred") == "\\x1b[31mred");
  CHECK(wg::escaped("a\0b"s) == "a\\x00b");
  CHECK(wg::escaped("line\r\nInjected: yes") == "line\\x0d\\x0aInjected: yes");
  CHECK(wg::escaped("\x7f\x80\xff") == "\\x7f\\x80\\xff");
  // A backslash is escaped too, so the text "\x1b" cannot pass for an escaped ESC.
  CHECK(wg::escaped("\\x1b") == "\\x5cx1b");
}

TEST_CASE("escaped: the output is printable ASCII whatever the input", "[shown]") {
  std::string every;
  for (int c = 0; c < 256; ++c) every.push_back(static_cast<char>(c));
  for (char c : wg::escaped(every)) CHECK((c >= 0x20 && c < 0x7f));
}

TEST_CASE("shown: quoted and escaped, or nothing of what may be a key", "[shown]") {
  CHECK(wg::shown("Endpoint\n") == "'Endpoint\\x0a'");
  CHECK(wg::shown("yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=") == "(not shown: it may be key material)");
}
