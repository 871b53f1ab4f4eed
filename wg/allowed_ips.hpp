// Cryptokey routing: addresses to peers by longest-prefix match.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "wg/base/ip.hpp"

namespace wg {

namespace detail {

// Keys: addresses as host-order integers.
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

// The key width if a == b.
inline unsigned first_diff(uint32_t a, uint32_t b) { return std::countl_zero(a ^ b); }
inline unsigned first_diff(const Key128& a, const Key128& b) {
  if (uint64_t x = a.hi ^ b.hi) return std::countl_zero(x);
  return 64 + std::countl_zero(a.lo ^ b.lo);
}

// Bit i of k from the top; i < key width.
inline unsigned bit_at(uint32_t k, unsigned i) { return (k >> (31 - i)) & 1; }
inline unsigned bit_at(const Key128& k, unsigned i) {
  return i < 64 ? (k.hi >> (63 - i)) & 1 : (k.lo >> (127 - i)) & 1;
}

// k with bits from `bits` on cleared.
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

// One family's path-compressed trie. A node's key is masked to `cidr` bits; its children
// differ from it at bit `cidr`. A valueless node has exactly two children. Valued nodes
// are on their owner's list.
template <class V, class Family>
class RadixTrie {
public:
  using Key = typename Family::Key;

  RadixTrie() = default;
  RadixTrie(const RadixTrie&) = delete;
  RadixTrie& operator=(const RadixTrie&) = delete;
  ~RadixTrie() { clear(); }

  // True if the prefix is new; false if it existed (v now owns it).
  bool insert(Key key, unsigned cidr, V v) {
    key = mask_key(key, cidr);
    std::unique_ptr<Node>* slot = &root_;
    Node* parent = nullptr;
    for (;;) {
      Node* n = slot->get();
      if (!n) {
        *slot = make_node(key, cidr, parent);
        own(slot->get(), v);
        ++size_;
        return true;
      }
      unsigned common = std::min({first_diff(key, n->key), cidr, unsigned{n->cidr}});
      if (common == n->cidr) {
        if (cidr == n->cidr) {
          bool added = n->value == V{};
          if (n->value != v) {
            disown(n);
            own(n, v);
          }
          size_ += added;
          return added;
        }
        parent = n;
        slot = &n->child[bit_at(key, n->cidr)];  // n covers the prefix: descend
        continue;
      }
      // Diverges above n: becomes n's parent, or both go under a new branch.
      std::unique_ptr<Node> old = std::move(*slot);
      if (common == cidr) {
        *slot = make_node(key, cidr, parent);
        own(slot->get(), v);
        adopt(**slot, std::move(old));
      } else {
        auto branch = make_node(mask_key(key, common), common, parent);
        auto leaf = make_node(key, cidr, nullptr);
        own(leaf.get(), v);
        adopt(*branch, std::move(leaf));
        adopt(*branch, std::move(old));
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
    key = mask_key(key, cidr);
    Node* n = root_.get();
    while (n && n->cidr < cidr && first_diff(key, n->key) >= n->cidr) n = n->child[bit_at(key, n->cidr)].get();
    if (!n || n->cidr != cidr || n->key != key || n->value != v) return false;
    disown(n);
    --size_;
    collapse(n);
    return true;
  }

  // Costs what v owns.
  void remove_by_peer(V v) {
    auto it = owned_.find(v);
    if (it == owned_.end()) return;
    Node* n = it->second;
    owned_.erase(it);
    while (n) {
      Node* next = n->next_owned;
      n->value = V{};
      n->prev_owned = n->next_owned = nullptr;
      --size_;
      collapse(n);  // never frees a listed node: next stays valid
      n = next;
    }
  }

  template <class F>
  void for_each(V v, F& f) const {
    auto it = owned_.find(v);
    if (it == owned_.end()) return;
    const Node* head = it->second;
    if (!head->next_owned) {
      f(prefix_of(*head));
      return;
    }
    std::vector<const Node*> nodes;
    for (const Node* n = head; n; n = n->next_owned) nodes.push_back(n);
    std::sort(nodes.begin(), nodes.end(), [](const Node* a, const Node* b) {
      return a->key != b->key ? less(a->key, b->key) : a->cidr < b->cidr;
    });
    for (const Node* n : nodes) f(prefix_of(*n));
  }

  void clear() {
    // Iterative, so a deep trie cannot overflow the stack.
    std::vector<std::unique_ptr<Node>> stack;
    if (root_) stack.push_back(std::move(root_));
    while (!stack.empty()) {
      auto n = std::move(stack.back());
      stack.pop_back();
      for (auto& c : n->child)
        if (c) stack.push_back(std::move(c));
    }
    owned_.clear();
    size_ = 0;
  }

  size_t size() const { return size_; }
  size_t node_count() const { return count_at(root_.get()); }
  size_t owner_count() const { return owned_.size(); }

  bool check() const {
    size_t valued = 0;
    if (root_ && root_->parent) return false;
    if (!check_at(root_.get(), valued)) return false;
    size_t listed = 0;
    for (auto& [v, head] : owned_) {
      if (!head || head->prev_owned) return false;
      for (const Node* n = head; n; n = n->next_owned) {
        if (n->value != v || (n->next_owned && n->next_owned->prev_owned != n)) return false;
        ++listed;
      }
    }
    return valued == size_ && listed == size_;
  }

private:
  struct Node {
    Key key{};
    uint8_t cidr = 0;
    V value{};
    Node* parent = nullptr;
    std::unique_ptr<Node> child[2];
    Node* prev_owned = nullptr;  // the owner's list; null when valueless
    Node* next_owned = nullptr;
  };

  static std::unique_ptr<Node> make_node(const Key& key, unsigned cidr, Node* parent) {
    auto n = std::make_unique<Node>();
    n->key = key;
    n->cidr = static_cast<uint8_t>(cidr);
    n->parent = parent;
    return n;
  }

  // Hangs c below p on its key's side.
  static void adopt(Node& p, std::unique_ptr<Node> c) {
    c->parent = &p;
    p.child[bit_at(c->key, p.cidr)] = std::move(c);
  }

  static bool less(const Key& a, const Key& b) {
    if constexpr (std::is_same_v<Key, Key128>) return a.hi != b.hi ? a.hi < b.hi : a.lo < b.lo;
    else return a < b;
  }

  static IpPrefix prefix_of(const Node& n) {
    IpPrefix p;
    p.addr.family = Family::kFamily;
    Family::store(n.key, p.addr.bytes.data());
    p.bits = n.cidr;
    return p;
  }

  // Gives valueless n to v.
  void own(Node* n, V v) {
    n->value = v;
    auto [it, fresh] = owned_.try_emplace(v, n);
    if (!fresh) {
      n->next_owned = it->second;
      it->second->prev_owned = n;
      it->second = n;
    }
  }

  // Clears n's value and unlists it.
  void disown(Node* n) {
    if (n->value == V{}) return;
    if (n->prev_owned) n->prev_owned->next_owned = n->next_owned;
    else if (n->next_owned) owned_[n->value] = n->next_owned;
    else owned_.erase(n->value);
    if (n->next_owned) n->next_owned->prev_owned = n->prev_owned;
    n->prev_owned = n->next_owned = nullptr;
    n->value = V{};
  }

  std::unique_ptr<Node>& slot_of(Node* n) {
    return n->parent ? n->parent->child[bit_at(n->key, n->parent->cidr)] : root_;
  }

  // Restores the branch invariant upward from n.
  void collapse(Node* n) {
    while (n && n->value == V{} && !(n->child[0] && n->child[1])) {
      Node* parent = n->parent;
      bool leaf = !n->child[0] && !n->child[1];
      std::unique_ptr<Node> only = std::move(n->child[0] ? n->child[0] : n->child[1]);
      if (only) only->parent = parent;
      slot_of(n) = std::move(only);  // frees n
      n = leaf ? parent : nullptr;   // else the parent keeps two children
    }
  }

  bool check_at(const Node* n, size_t& valued) const {
    if (!n) return true;
    if (n->cidr > Family::kBits || !(mask_key(n->key, n->cidr) == n->key)) return false;
    if (n->value != V{}) ++valued;
    else if (!n->child[0] || !n->child[1] || n->prev_owned || n->next_owned) return false;
    for (unsigned side = 0; side < 2; ++side) {
      const Node* c = n->child[side].get();
      if (!c) continue;
      if (c->parent != n || c->cidr <= n->cidr || first_diff(c->key, n->key) < n->cidr ||
          bit_at(c->key, n->cidr) != side)
        return false;
      if (!check_at(c, valued)) return false;
    }
    return true;
  }

  static size_t count_at(const Node* n) {
    return n ? 1 + count_at(n->child[0].get()) + count_at(n->child[1].get()) : 0;
  }

  std::unique_ptr<Node> root_;
  std::unordered_map<V, Node*> owned_;  // list heads
  size_t size_ = 0;
};

}  // namespace detail

// A device's allowed IPs. V is a cheap handle; V{} means none and is never stored. Not
// thread-safe: const calls may run concurrently, others must be exclusive. lookup does not
// allocate.
template <class V>
class AllowedIps {
public:
  // Takes p from any other owner. Ignored if v is V{} or p is invalid.
  void insert(const IpPrefix& p, V v) {
    if (v == V{} || !valid(p)) return;
    if (p.addr.is_v4()) v4_.insert(Ipv4::load(p.addr.bytes.data()), p.bits, v);
    else v6_.insert(Ipv6::load(p.addr.bytes.data()), p.bits, v);
  }

  // The owner of the longest prefix containing a, or V{}.
  V lookup(const IpAddress& a) const { return lookup(a.bytes.data(), a.family); }

  // addr: 4 or 16 network-order bytes; other families give V{}.
  V lookup(const uint8_t* addr, int family) const {
    if (family == 4) return v4_.lookup(Ipv4::load(addr));
    if (family == 6) return v6_.lookup(Ipv6::load(addr));
    return V{};
  }

  // Only if v owns p.
  bool remove(const IpPrefix& p, V v) {
    if (v == V{} || !valid(p)) return false;
    if (p.addr.is_v4()) return v4_.remove(Ipv4::load(p.addr.bytes.data()), p.bits, v);
    return v6_.remove(Ipv6::load(p.addr.bytes.data()), p.bits, v);
  }

  void remove_by_peer(V v) {
    if (v == V{}) return;
    v4_.remove_by_peer(v);
    v6_.remove_by_peer(v);
  }

  void clear() {
    v4_.clear();
    v6_.clear();
  }

  // IPv4 then IPv6, in address order. f must not modify the table.
  template <class F>
  void for_each(V v, F f) const {
    if (v == V{}) return;
    v4_.for_each(v, f);
    v6_.for_each(v, f);
  }

  // Both families.
  size_t size() const { return v4_.size() + v6_.size(); }

  // At most 2 * size() - 1 per family.
  size_t node_count() const { return v4_.node_count() + v6_.node_count(); }

  // Tests: structure and owner lists are consistent; O(nodes).
  bool check() const { return v4_.check() && v6_.check(); }

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
