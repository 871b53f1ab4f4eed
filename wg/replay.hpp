// ReplayFilter: WireGuard's sliding-window check on the 64-bit counter of received
// transport messages (RFC 6479-style bitmap ring, as in the kernel's counter_validate).
#pragma once

#include <array>
#include <cstdint>

namespace wg {

// How far behind the greatest accepted counter a message may still arrive: the ring
// holds 8192 bits, but the block of the newest counter is only partly usable, so one
// 64-bit block's worth is given up (8192 - 64).
inline constexpr uint64_t kReplayWindow = 8128;

// One per receiving keypair. Fixed size (~1 KiB), no heap allocation.
// Not thread-safe: it is called from the peer's single, in-order receive path, after
// the message authenticated (never on an unauthenticated counter).
class ReplayFilter {
public:
  // True, and records `counter`, when it is below `limit` (REJECT_AFTER_MESSAGES),
  // not more than kReplayWindow behind the greatest counter accepted so far, and not
  // accepted before. False changes nothing.
  bool validate(uint64_t counter, uint64_t limit);
  // Back to the state of a new keypair: nothing seen.
  void reset();

private:
  static constexpr uint64_t kBlockBits = 64;
  static constexpr uint64_t kBlocks = 128;  // power of two: the ring index is a mask

  // Bit (c % 64) of block (c / 64) % 128 is set when counter c was accepted. It is
  // meaningful for c in [greatest_ - kReplayWindow, greatest_], which always spans at
  // most 128 blocks; blocks are cleared as the window slides forward over them.
  std::array<uint64_t, kBlocks> ring_{};
  // Greatest counter accepted so far. Starting at 0 with an empty ring needs no
  // "nothing seen yet" flag: counter 0 is then still free, and nothing is too old.
  uint64_t greatest_ = 0;
};

}  // namespace wg
