// DNS message building and parsing. A response is untrusted input: every offset is
// checked against the message size before it is read, and compression pointers may only
// point backwards, at most kMaxPointerFollows times, into a name no longer than 255 bytes.
#include "netstack/dns_message.hpp"

#include <algorithm>

namespace netstack::dns {

namespace {

//  Header (RFC 1035 §4.1.1), six big-endian 16-bit words:
//    id | QR opcode(4) AA TC RD RA Z(3) rcode(4) | qdcount | ancount | nscount | arcount
constexpr uint16_t kFlagQr = 0x8000;
constexpr uint16_t kOpcodeMask = 0x7800;
constexpr uint16_t kFlagTc = 0x0200;
constexpr uint16_t kFlagRd = 0x0100;
constexpr uint16_t kRcodeMask = 0x000f;

// Label length byte: the top two bits say what it is (RFC 1035 §4.1.4).
constexpr uint8_t kLabelKindMask = 0xc0;
constexpr uint8_t kLabelPlain = 0x00;
constexpr uint8_t kLabelPointer = 0xc0;

// Type, class, TTL, rdlength after a record's name.
constexpr size_t kRecordFixedSize = 10;

bool is_known_qtype(uint16_t qtype) { return qtype == kTypeA || qtype == kTypeAaaa; }

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '-' || c == '_';
}

void put_u16(std::vector<uint8_t>& out, uint16_t v) {
  out.push_back(static_cast<uint8_t>(v >> 8));
  out.push_back(static_cast<uint8_t>(v));
}

// Callers have checked that at + 2 <= msg.size().
uint16_t load_u16(std::span<const uint8_t> msg, size_t at) {
  return static_cast<uint16_t>(msg[at] << 8 | msg[at + 1]);
}

// Walks the (possibly compressed) name at `at` to its end, checking all of it: label
// lengths, pointers that go strictly backwards and not into the header, the follow
// limit, and the 255-byte expanded size. Backward pointers alone do not stop loops (a
// label walked forward can pass the pointer that jumped back), so the two limits do.
// Returns the offset just past the name as it sits at `at`: after its zero byte, or
// after its first pointer.
std::optional<size_t> skip_name(std::span<const uint8_t> msg, size_t at) {
  std::optional<size_t> end;
  size_t pos = at;
  size_t expanded = 0;
  int follows = 0;
  for (;;) {
    if (pos >= msg.size()) return std::nullopt;
    const uint8_t len = msg[pos];
    switch (len & kLabelKindMask) {
      case kLabelPlain: {
        expanded += 1 + len;
        if (expanded > kMaxNameWireSize) return std::nullopt;
        if (len == 0) return end ? *end : pos + 1;
        if (msg.size() - pos - 1 < len) return std::nullopt;
        pos += 1 + len;
        break;
      }
      case kLabelPointer: {
        if (msg.size() - pos < 2) return std::nullopt;
        const size_t target = static_cast<size_t>(len & 0x3f) << 8 | msg[pos + 1];
        if (target < kHeaderSize || target >= pos) return std::nullopt;
        if (++follows > kMaxPointerFollows) return std::nullopt;
        if (!end) end = pos + 2;
        pos = target;
        break;
      }
      default:  // 0x40 and 0x80: extended label types (RFC 6891 §5), none in use
        return std::nullopt;
    }
  }
}

// Reads the resource record at `*at`, appending its address to `out->addresses` (and
// lowering `out->ttl` to its TTL) when it is a matching A/AAAA record, and advances `*at`
// past it. False when it is malformed or does not fit in the message.
bool read_answer(std::span<const uint8_t> msg, size_t* at, uint16_t qtype, Answer* out) {
  const auto name_end = skip_name(msg, *at);
  if (!name_end) return false;
  size_t pos = *name_end;
  if (msg.size() - pos < kRecordFixedSize) return false;
  const uint16_t type = load_u16(msg, pos);
  const uint16_t rclass = load_u16(msg, pos + 2);
  // RFC 2181 §8: a TTL with the top bit set counts as 0.
  uint32_t ttl = static_cast<uint32_t>(load_u16(msg, pos + 4)) << 16 | load_u16(msg, pos + 6);
  if (ttl > 0x7fffffff) ttl = 0;
  const uint16_t rdlength = load_u16(msg, pos + 8);
  pos += kRecordFixedSize;
  if (msg.size() - pos < rdlength) return false;

  if (type == qtype && rclass == kClassIn) {
    const uint8_t* rdata = msg.data() + pos;
    if (qtype == kTypeA) {
      if (rdlength != 4) return false;
      out->addresses.push_back(wg::IpAddress::v4(rdata));
    } else {
      if (rdlength != 16) return false;
      out->addresses.push_back(wg::IpAddress::v6(rdata));
    }
    out->ttl = out->addresses.size() == 1 ? ttl : std::min(out->ttl, ttl);
  }
  *at = pos + rdlength;
  return true;
}

}  // namespace

std::vector<uint8_t> build_query(uint16_t id, std::string_view name, uint16_t qtype) {
  if (!is_known_qtype(qtype)) return {};
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);
  if (name.empty() || name.size() > kMaxNameChars) return {};

  std::vector<uint8_t> q;
  q.reserve(kHeaderSize + name.size() + 2 + 4);
  put_u16(q, id);
  put_u16(q, kFlagRd);
  put_u16(q, 1);  // qdcount
  put_u16(q, 0);  // ancount
  put_u16(q, 0);  // nscount
  put_u16(q, 0);  // arcount

  for (;;) {
    const size_t dot = name.find('.');
    const std::string_view label = name.substr(0, dot);
    if (label.empty() || label.size() > kMaxLabelSize) return {};
    for (char c : label)
      if (!is_name_char(c)) return {};
    q.push_back(static_cast<uint8_t>(label.size()));
    q.insert(q.end(), label.begin(), label.end());
    if (dot == std::string_view::npos) break;
    name.remove_prefix(dot + 1);
  }
  q.push_back(0);
  put_u16(q, qtype);
  put_u16(q, kClassIn);
  return q;
}

std::optional<Answer> parse_response(std::span<const uint8_t> msg, uint16_t expected_id,
                                     uint16_t qtype) {
  if (!is_known_qtype(qtype) || msg.size() < kHeaderSize) return std::nullopt;
  const uint16_t id = load_u16(msg, 0);
  const uint16_t flags = load_u16(msg, 2);
  const uint16_t qdcount = load_u16(msg, 4);
  const uint16_t ancount = load_u16(msg, 6);
  if (id != expected_id || !(flags & kFlagQr) || (flags & kOpcodeMask) != 0) return std::nullopt;
  if (qdcount != 1) return std::nullopt;

  Answer answer;
  answer.rcode = static_cast<uint8_t>(flags & kRcodeMask);
  answer.truncated = (flags & kFlagTc) != 0;

  // The question must be whole even when TC is set: it is what ties the answer to us.
  const auto question_end = skip_name(msg, kHeaderSize);
  if (!question_end || msg.size() - *question_end < 4) return std::nullopt;
  if (load_u16(msg, *question_end) != qtype || load_u16(msg, *question_end + 2) != kClassIn)
    return std::nullopt;

  size_t at = *question_end + 4;
  for (uint16_t i = 0; i < ancount; ++i) {
    if (!read_answer(msg, &at, qtype, &answer)) {
      if (answer.truncated) break;
      return std::nullopt;
    }
  }
  return answer;
}

std::vector<uint8_t> tcp_frame(std::span<const uint8_t> msg) {
  if (msg.size() > 0xffff) return {};
  std::vector<uint8_t> framed;
  framed.reserve(2 + msg.size());
  put_u16(framed, static_cast<uint16_t>(msg.size()));
  framed.insert(framed.end(), msg.begin(), msg.end());
  return framed;
}

std::optional<std::span<const uint8_t>> tcp_unframe(std::span<const uint8_t> stream) {
  if (stream.size() < 2) return std::nullopt;
  const size_t len = load_u16(stream, 0);
  if (stream.size() - 2 < len) return std::nullopt;
  return stream.subspan(2, len);
}

}  // namespace netstack::dns
