// Allowed IPs: the cryptokey routing table. Maps IP prefixes to peers with a path-compressed
// binary radix trie per family; answers "which peer owns this address" by longest-prefix match.
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
//
// As in the kernel's allowedips.c, every node with a value is also on its owner's list
// (doubly linked through the nodes, headed in `owned_`), and every node knows its parent:
// listing or removing one owner's prefixes visits only that owner's nodes, never the trie.
//
//            branch               owned_[A] -> n1 <-> n3
//           /      \            owned_[B] -> n2
//        n1:A     branch
//                /      \   (every node also points to its parent)
//              n2:B    n3:A
template <class V, class Family>
class RadixTrie {
public:
  using Key = typename Family::Key;

  RadixTrie() = default;
  RadixTrie(const RadixTrie&) = delete;
  RadixTrie& operator=(const RadixTrie&) = delete;
  ~RadixTrie() { clear(); }

  // Returns true when the prefix is new, false when it replaced the owner of an existing one.
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
        if (cidr == n->cidr) {  // same prefix
          bool added = n->value == V{};
          if (n->value != v) {
            disown(n);
            own(n, v);
          }
          size_ += added;
          return added;
        }
        parent = n;
        slot = &n->child[bit_at(key, n->cidr)];  // n covers the new prefix: descend
        continue;
      }
      // The new prefix leaves n's path above n: it becomes n's parent, or both hang off a
      // new branch node at the first bit where they differ.
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

  // Costs what v owns: its list, each node unlinked and the trie repaired around it.
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
      collapse(n);  // frees n and at most its valueless parent, never a listed node
      n = next;
    }
  }

  // f(IpPrefix) for each prefix of v, in address order (a prefix before those it contains).
  template <class F>
  void for_each(V v, F& f) const {
    auto it = owned_.find(v);
    if (it == owned_.end()) return;
    const Node* head = it->second;
    if (!head->next_owned) {  // the common case: one prefix, nothing to sort
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
    // Iteratively: a deep trie (up to kBits levels) must not recurse in destructors.
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
  // Owners with at least one prefix.
  size_t owner_count() const { return owned_.size(); }

  // Debugging and tests: every structural invariant holds (parents, branch nodes with two
  // children, keys masked and on their parent's side, each owner's list exactly its nodes).
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
    Node* prev_owned = nullptr;  // the owner's list; null on both ends and without a value
    Node* next_owned = nullptr;
  };

  static std::unique_ptr<Node> make_node(const Key& key, unsigned cidr, Node* parent) {
    auto n = std::make_unique<Node>();
    n->key = key;
    n->cidr = static_cast<uint8_t>(cidr);
    n->parent = parent;
    return n;
  }

  // Hangs c below p on the side its key says.
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

  // Gives the valueless node n to v, at the head of v's list.
  void own(Node* n, V v) {
    n->value = v;
    auto [it, fresh] = owned_.try_emplace(v, n);
    if (!fresh) {
      n->next_owned = it->second;
      it->second->prev_owned = n;
      it->second = n;
    }
  }

  // Takes n (which has a value) off its owner's list and clears its value.
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

  // Restores the invariant at n after it lost its value or a child: a valueless node with
  // one child is replaced by that child (whose key already says where it sits), one with
  // none disappears, and then its parent may be a valueless node with one child.
  void collapse(Node* n) {
    while (n && n->value == V{} && !(n->child[0] && n->child[1])) {
      Node* parent = n->parent;
      bool leaf = !n->child[0] && !n->child[1];
      std::unique_ptr<Node> only = std::move(n->child[0] ? n->child[0] : n->child[1]);
      if (only) only->parent = parent;
      slot_of(n) = std::move(only);  // frees n
      n = leaf ? parent : nullptr;   // a replaced node leaves its parent with two children
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
  std::unordered_map<V, Node*> owned_;  // the head of each owner's list
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
// with no allocation. insert/remove are O(key width). remove_by_peer and for_each cost what
// the peer owns (each owner's nodes are on a list, as in the kernel), plus a hash lookup; so
// replacing one peer's prefixes among 65,536 peers costs no more than among ten.
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

  // Tests: the tries' structure and the per-peer lists agree (O(nodes)).
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
