// Untrusted text fit for an error message: quoted, unless it may hold key material. A
// base64 key ends in '=', so a "name" left of '=' may be a key too.
#pragma once

#include <string>
#include <string_view>

namespace wg {

// A base64 run of 24, or 16 holding a digit, '+' or '/': every key has one; names,
// addresses and host names do not.
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

// Bytes outside printable ASCII as \xNN, and a backslash too so the form cannot be
// forged: safe for a log or a terminal.
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

inline std::string shown(std::string_view text) {
  if (looks_like_key(text)) return "(not shown: it may be key material)";
  std::string s = "'";
  s += escaped(text);
  s += '\'';
  return s;
}

}  // namespace wg
