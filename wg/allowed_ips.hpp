// Allowed IPs: the cryptokey routing table. Maps IP prefixes to peers with a path-compressed
// binary radix trie per family; answers "which peer owns this address" by longest-prefix match.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>

#include "wg/ip.hpp"

namespace wg {

namespace detail {

// Addresses become unsigned integers in host order, so that "bit i" (counted from the most
// significant bit of the address) and "first differing bit" are a shift and a count of leading
// zeros instead of loops over bytes.
struct Key128 {
  uint64_t hi = 0;
  uint64_t lo = 0;
  friend bool operator==(const Key128&, const Key128&) = default;
};

inline uint32_t load_be32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  if constexpr (std::endian::native == std::endian::little) v = __builtin_bswap32(v);
  return v;
}

inline uint64_t load_be64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  if constexpr (std::endian::native == std::endian::little) v = __builtin_bswap64(v);
  return v;
}

inline void store_be32(uint32_t v, uint8_t* p) {
  if constexpr (std::endian::native == std::endian::little) v = __builtin_bswap32(v);
  std::memcpy(p, &v, 4);
}

inline void store_be64(uint64_t v, uint8_t* p) {
  if constexpr (std::endian::native == std::endian::little) v = __builtin_bswap64(v);
  std::memcpy(p, &v, 8);
}

// Index of the first bit where a and b differ; the key width when they are equal.
inline unsigned first_diff(uint32_t a, uint32_t b) { return std::countl_zero(a ^ b); }
inline unsigned first_diff(const Key128& a, const Key128& b) {
  if (uint64_t x = a.hi ^ b.hi) return std::countl_zero(x);
  return 64 + std::countl_zero(a.lo ^ b.lo);
}

// Bit i of k, 0 = most significant; i must be below the key width.
inline unsigned bit_at(uint32_t k, unsigned i) { return (k >> (31 - i)) & 1; }
inline unsigned bit_at(const Key128& k, unsigned i) {
  return i < 64 ? (k.hi >> (63 - i)) & 1 : (k.lo >> (127 - i)) & 1;
}

// k with every bit from `bits` on cleared.
inline uint32_t mask_key(uint32_t k, unsigned bits) {
  return bits == 0 ? 0 : k & (~uint32_t{0} << (32 - bits));
}
inline Key128 mask_key(const Key128& k, unsigned bits) {
  if (bits == 0) return {};
  if (bits <= 64) return {k.hi & (~uint64_t{0} << (64 - bits)), 0};
  return {k.hi, k.lo & (~uint64_t{0} << (128 - bits))};
}

struct Ipv4Family {
  using Key = uint32_t;
  static constexpr unsigned kBits = 32;
  static constexpr uint8_t kFamily = 4;
  static Key load(const uint8_t* p) { return load_be32(p); }
  static void store(Key k, uint8_t* p) { store_be32(k, p); }
};

struct Ipv6Family {
  using Key = Key128;
  static constexpr unsigned kBits = 128;
  static constexpr uint8_t kFamily = 6;
  static Key load(const uint8_t* p) { return {load_be64(p), load_be64(p + 8)}; }
  static void store(const Key& k, uint8_t* p) {
    store_be64(k.hi, p);
    store_be64(k.lo, p + 8);
  }
};

// One family's trie. Each node holds a masked key and its length `cidr`; a node's children
// differ from it at bit `cidr` (child[0] has it clear, child[1] set) and may skip any number
// of bits below that. A node without a value is a pure branch point and always has exactly
// two children: removal re-establishes this, so the trie never holds more than 2n - 1 nodes
// for n prefixes.
template <class V, class Family>
class RadixTrie {
public:
  using Key = typename Family::Key;

  // Returns true when the prefix is new, false when it replaced the owner of an existing one.
  bool insert(Key key, unsigned cidr, V v) {
    key = mask_key(key, cidr);
    std::unique_ptr<Node>* slot = &root_;
    for (;;) {
      Node* n = slot->get();
      if (!n) {
        *slot = make_node(key, cidr, v);
        ++size_;
        return true;
      }
      unsigned common = std::min({first_diff(key, n->key), cidr, unsigned{n->cidr}});
      if (common == n->cidr) {
        if (cidr == n->cidr) {  // same prefix
          bool added = n->value == V{};
          n->value = v;
          size_ += added;
          return added;
        }
        slot = &n->child[bit_at(key, n->cidr)];  // n covers the new prefix: descend
        continue;
      }
      // The new prefix leaves n's path above n: it becomes n's parent, or both hang off a
      // new branch node at the first bit where they differ.
      std::unique_ptr<Node> old = std::move(*slot);
      if (common == cidr) {
        *slot = make_node(key, cidr, v);
        (*slot)->child[bit_at(old->key, cidr)] = std::move(old);
      } else {
        auto branch = make_node(mask_key(key, common), common, V{});
        branch->child[bit_at(key, common)] = make_node(key, cidr, v);
        branch->child[bit_at(old->key, common)] = std::move(old);
        *slot = std::move(branch);
      }
      ++size_;
      return true;
    }
  }

  V lookup(Key key) const {
    V best{};
    const Node* n = root_.get();
    while (n && first_diff(key, n->key) >= n->cidr) {
      if (n->value != V{}) best = n->value;
      if (n->cidr == Family::kBits) break;
      n = n->child[bit_at(key, n->cidr)].get();
    }
    return best;
  }

  bool remove(Key key, unsigned cidr, V v) {
    return remove_at(root_, mask_key(key, cidr), cidr, v);
  }

  void remove_by_peer(V v) { remove_by_peer_at(root_, v); }

  template <class F>
  void for_each(V v, F& f) const {
    for_each_at(root_.get(), v, f);
  }

  void clear() {
    root_.reset();
    size_ = 0;
  }

  size_t size() const { return size_; }
  size_t node_count() const { return count_at(root_.get()); }

private:
  struct Node {
    Key key{};
    uint8_t cidr = 0;
    V value{};
    std::unique_ptr<Node> child[2];
  };

  static std::unique_ptr<Node> make_node(const Key& key, unsigned cidr, V v) {
    auto n = std::make_unique<Node>();
    n->key = key;
    n->cidr = static_cast<uint8_t>(cidr);
    n->value = v;
    return n;
  }

  // Restores the invariant at `slot` after its node lost its value or a child: a valueless
  // node with one child is replaced by that child (whose key already says where it sits),
  // one with none disappears.
  static void compress(std::unique_ptr<Node>& slot) {
    Node* n = slot.get();
    if (!n || n->value != V{} || (n->child[0] && n->child[1])) return;
    std::unique_ptr<Node> only = std::move(n->child[0] ? n->child[0] : n->child[1]);
    slot = std::move(only);
  }

  bool remove_at(std::unique_ptr<Node>& slot, const Key& key, unsigned cidr, V v) {
    Node* n = slot.get();
    if (!n || n->cidr > cidr || first_diff(key, n->key) < n->cidr) return false;
    if (n->cidr < cidr) {
      if (!remove_at(n->child[bit_at(key, n->cidr)], key, cidr, v)) return false;
    } else {
      if (n->value != v) return false;
      n->value = V{};
      --size_;
    }
    compress(slot);
    return true;
  }

  void remove_by_peer_at(std::unique_ptr<Node>& slot, V v) {
    Node* n = slot.get();
    if (!n) return;
    remove_by_peer_at(n->child[0], v);
    remove_by_peer_at(n->child[1], v);
    if (n->value == v) {
      n->value = V{};
      --size_;
    }
    compress(slot);
  }

  template <class F>
  static void for_each_at(const Node* n, V v, F& f) {
    if (!n) return;
    if (n->value == v) {
      IpPrefix p;
      p.addr.family = Family::kFamily;
      Family::store(n->key, p.addr.bytes.data());
      p.bits = n->cidr;
      f(p);
    }
    for_each_at(n->child[0].get(), v, f);
    for_each_at(n->child[1].get(), v, f);
  }

  static size_t count_at(const Node* n) {
    return n ? 1 + count_at(n->child[0].get()) + count_at(n->child[1].get()) : 0;
  }

  std::unique_ptr<Node> root_;
  size_t size_ = 0;
};

}  // namespace detail

// The allowed-IPs table of a device: IPv4 and IPv6 prefixes, each owned by one peer.
//
// V is a cheap, copyable, equality-comparable handle (the device uses `Peer*`); a
// value-initialized V{} means "no peer" and is never stored.
//
// Thread safety: none. Concurrent const calls (lookup, for_each, size) are safe with each
// other; anything else must be exclusive. The device holds a std::shared_mutex: shared for
// lookups on the data path, exclusive for configuration changes.
//
// Cost: lookup walks at most one node per distinct prefix length on the path (<= 33 / 129),
// with no allocation. insert/remove are O(key width). remove_by_peer and for_each visit the
// whole table (O(nodes)); they are configuration-time operations.
template <class V>
class AllowedIps {
public:
  // Routes p (host bits cleared) to v. Inserting a prefix that is already present hands it to
  // v. Ignored if v is V{}, p's family is not 4 or 6, or p.bits exceeds the family's width.
  void insert(const IpPrefix& p, V v) {
    if (v == V{} || !valid(p)) return;
    if (p.addr.is_v4()) v4_.insert(Ipv4::load(p.addr.bytes.data()), p.bits, v);
    else v6_.insert(Ipv6::load(p.addr.bytes.data()), p.bits, v);
  }

  // The owner of the longest prefix containing a, or V{} if none does. Addresses of one
  // family never match prefixes of the other.
  V lookup(const IpAddress& a) const { return lookup(a.bytes.data(), a.family); }

  // Hot-path form: addr points at 4 (family 4) or 16 (family 6) bytes in network order,
  // e.g. straight into a packet header. Any other family yields V{}.
  V lookup(const uint8_t* addr, int family) const {
    if (family == 4) return v4_.lookup(Ipv4::load(addr));
    if (family == 6) return v6_.lookup(Ipv6::load(addr));
    return V{};
  }

  // Removes p (host bits cleared) if it is present and owned by v; returns whether it did.
  bool remove(const IpPrefix& p, V v) {
    if (v == V{} || !valid(p)) return false;
    if (p.addr.is_v4()) return v4_.remove(Ipv4::load(p.addr.bytes.data()), p.bits, v);
    return v6_.remove(Ipv6::load(p.addr.bytes.data()), p.bits, v);
  }

  // Removes every prefix owned by v.
  void remove_by_peer(V v) {
    if (v == V{}) return;
    v4_.remove_by_peer(v);
    v6_.remove_by_peer(v);
  }

  void clear() {
    v4_.clear();
    v6_.clear();
  }

  // Calls f(IpPrefix) for each prefix owned by v: IPv4 first, then IPv6, each in address
  // order (a prefix before the prefixes it contains). f must not modify the table.
  template <class F>
  void for_each(V v, F f) const {
    if (v == V{}) return;
    v4_.for_each(v, f);
    v6_.for_each(v, f);
  }

  // Number of prefixes, both families.
  size_t size() const { return v4_.size() + v6_.size(); }

  // Debugging: trie nodes in use, including branch nodes (at most 2 * size() - 1 per family).
  size_t node_count() const { return v4_.node_count() + v6_.node_count(); }

private:
  using Ipv4 = detail::Ipv4Family;
  using Ipv6 = detail::Ipv6Family;

  static bool valid(const IpPrefix& p) {
    return (p.addr.is_v4() && p.bits <= Ipv4::kBits) || (p.addr.is_v6() && p.bits <= Ipv6::kBits);
  }

  detail::RadixTrie<V, Ipv4> v4_;
  detail::RadixTrie<V, Ipv6> v6_;
};

}  // namespace wg
