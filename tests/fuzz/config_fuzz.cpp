// Fuzzes wg::parse_config (the wg-quick .conf parser) with the input as the file's text.
// A config that parses is written out again in canonical form and must re-parse to the
// same values (so nothing is accepted that the parser cannot say back, and no value
// changes on the way); a ConfigError must name a line of the text and never quote the
// value of a PrivateKey or PresharedKey line.
//   cmake --preset fuzz && cmake --build build-fuzz --target config_fuzz
//   build-fuzz/bin/config_fuzz -max_total_time=60 tests/fuzz/corpus/config
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "wg/base/shown.hpp"
#include "wg/config.hpp"

namespace {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// The canonical text of a config: one line per scalar, one list line per list key.
std::string write_config(const wg::Config& c) {
  std::string out = "[Interface]\n";
  const auto& i = c.iface;
  if (i.private_key) out += "PrivateKey = " + i.private_key->to_base64() + "\n";
  if (i.listen_port) out += "ListenPort = " + std::to_string(*i.listen_port) + "\n";
  if (i.fwmark) out += "FwMark = " + std::to_string(*i.fwmark) + "\n";
  if (i.mtu) out += "MTU = " + std::to_string(*i.mtu) + "\n";
  std::vector<std::string> items;
  for (auto& a : i.addresses) items.push_back(a.to_string());
  if (!items.empty()) out += "Address = " + join(items) + "\n";
  items.clear();
  for (auto& a : i.dns_servers) items.push_back(a.to_string());
  for (auto& d : i.dns_search) items.push_back(d);
  if (!items.empty()) out += "DNS = " + join(items) + "\n";
  for (auto& [k, v] : i.wg_quick_extras) out += k + " = " + v + "\n";
  for (auto& p : c.peers) {
    out += "[Peer]\nPublicKey = " + p.public_key.to_base64() + "\n";
    if (p.preshared_key) out += "PresharedKey = " + p.preshared_key->to_base64() + "\n";
    if (p.endpoint) out += "Endpoint = " + *p.endpoint + "\n";
    items.clear();
    for (auto& a : p.allowed_ips) items.push_back(a.to_string());
    if (!items.empty()) out += "AllowedIPs = " + join(items) + "\n";
    if (p.persistent_keepalive) out += "PersistentKeepalive = " + std::to_string(p.persistent_keepalive) + "\n";
  }
  return out;
}

bool same(const wg::Config& a, const wg::Config& b) {
  const auto &x = a.iface, &y = b.iface;
  // DNS servers and search domains are one list in the file: their split must survive.
  if (x.private_key != y.private_key || x.listen_port != y.listen_port || x.fwmark != y.fwmark ||
      x.mtu != y.mtu || x.addresses != y.addresses || x.dns_servers != y.dns_servers ||
      x.dns_search != y.dns_search || x.wg_quick_extras != y.wg_quick_extras ||
      a.peers.size() != b.peers.size())
    return false;
  for (size_t k = 0; k < a.peers.size(); ++k) {
    const auto &p = a.peers[k], &q = b.peers[k];
    if (p.public_key != q.public_key || p.preshared_key != q.preshared_key || p.endpoint != q.endpoint ||
        p.allowed_ips != q.allowed_ips || p.persistent_keepalive != q.persistent_keepalive)
      return false;
  }
  return true;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string_view trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\r\f\v";
  auto b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

bool base64_only(std::string_view s) {
  for (char c : s)
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/' || c == '='))
      return false;
  return true;
}

// The values of the secret-key lines, and the other lines, raw and escaped as messages
// quote them (an escaped byte's digits can complete a secret: "\x80" before "AAAA...").
void split_secrets(std::string_view text, std::vector<std::string>& secrets, std::string& rest) {
  while (!text.empty()) {
    auto nl = text.find('\n');
    auto line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    auto body = line.substr(0, line.find('#'));
    auto eq = body.find('=');
    auto key = eq == std::string_view::npos ? std::string() : lower(trim(body.substr(0, eq)));
    if (key == "privatekey" || key == "presharedkey") secrets.emplace_back(trim(body.substr(eq + 1)));
    else ((rest += line) += '\n') += wg::escaped(line) + '\n';
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  wg::Config cfg;
  try {
    cfg = wg::parse_config(text);
  } catch (const wg::ConfigError& e) {
    size_t lines = 1;
    for (char c : text) lines += c == '\n';
    if (e.line() < 1 || e.line() > lines) __builtin_trap();
    if (std::string_view(e.what()).rfind("line " + std::to_string(e.line()) + ": ", 0) != 0) __builtin_trap();
    // A secret may appear in the message only if the text also holds it elsewhere (an
    // Address line with the same characters, say). Secrets of 16 or more base64
    // characters only: the message's own words have no such run, so one there was quoted
    // from a line, and a line that is not a secret's holds all of it.
    std::vector<std::string> secrets;
    std::string rest;
    split_secrets(text, secrets, rest);
    for (auto& s : secrets)
      if (s.size() >= 16 && base64_only(s) && std::string_view(e.what()).find(s) != std::string_view::npos &&
          rest.find(s) == std::string::npos)
        __builtin_trap();
    return 0;
  }

  // What was accepted keeps the parser's promises.
  for (auto& p : cfg.peers)
    for (auto& a : p.allowed_ips)
      if (!(a == a.masked())) __builtin_trap();
  if (cfg.iface.mtu && (*cfg.iface.mtu < 576 || *cfg.iface.mtu > 65535)) __builtin_trap();
  for (size_t k = 0; k < cfg.peers.size(); ++k)
    for (size_t j = 0; j < k; ++j)
      if (cfg.peers[j].public_key == cfg.peers[k].public_key) __builtin_trap();

  const std::string canonical = write_config(cfg);
  wg::Config again;
  try {
    again = wg::parse_config(canonical);
  } catch (const wg::ConfigError&) {
    __builtin_trap();  // the parser refused what it had accepted
  }
  if (!same(cfg, again)) __builtin_trap();
  if (write_config(again) != canonical) __builtin_trap();
  return 0;
}
