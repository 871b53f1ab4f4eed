// Text from a config file, a UAPI request or a command line, fit for an error message:
// quoted, unless it may hold key material. A key is 44 base64 or 64 hex characters and a
// base64 key ends in '=', so a misplaced key becomes the "name" left of '=' as easily as
// a value; neither may reach a terminal or a journal.
#pragma once

#include <string>
#include <string_view>

namespace wg {

// True if `text` holds a run of base64/hex characters ([A-Za-z0-9+/]) that is 24 long,
// or 16 long with a digit, '+' or '/' in it. A 32-byte key in base64 or hex always does
// (43 or 64 characters of the alphabet); names such as PersistentKeepalive, addresses
// and host names do not.
constexpr bool looks_like_key(std::string_view text) {
  size_t run = 0;
  bool mixed = false;
  for (char c : text) {
    bool letter = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
    bool other = (c >= '0' && c <= '9') || c == '+' || c == '/';
    if (!letter && !other) {
      run = 0;
      mixed = false;
      continue;
    }
    ++run;
    mixed = mixed || other;
    if (run >= 24 || (run >= 16 && mixed)) return true;
  }
  return false;
}

// `text` with every byte outside printable ASCII as \xNN (a backslash as \x5c, so that
// the form cannot be forged): text from a client or a file, fit for a log line or a
// terminal. Neither escapes, NUL nor a newline get through.
inline std::string escaped(std::string_view text) {
  constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

// 'text' (escaped), or a placeholder when it may hold a key.
inline std::string shown(std::string_view text) {
  if (looks_like_key(text)) return "(not shown: it may be key material)";
  std::string s = "'";
  s += escaped(text);
  s += '\'';
  return s;
}

}  // namespace wg
