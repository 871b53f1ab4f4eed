// Sliding-window replay check on received transport counters: an RFC 6479 bitmap ring,
// as in the kernel's counter_validate.
#pragma once

#include <array>
#include <cstdint>

namespace wg {

// How far behind the greatest accepted counter a message may be: the ring's 8192 bits
// less one block.
inline constexpr uint64_t kReplayWindow = 8128;

// One per receiving keypair; about 1 KiB, no allocation. Not thread-safe: called on the
// peer's in-order receive path, only for authenticated messages.
class ReplayFilter {
public:
  // Records `counter` and returns true if it is below `limit` (REJECT_AFTER_MESSAGES),
  // inside the window and new. False changes nothing.
  bool validate(uint64_t counter, uint64_t limit);
  // Forgets every counter.
  void reset();

private:
  static constexpr uint64_t kBlockBits = 64;
  static constexpr uint64_t kBlocks = 128;  // power of two: the ring index is a mask

  // Bit c % 64 of block (c / 64) % 128 marks counter c within the window.
  std::array<uint64_t, kBlocks> ring_{};
  // 0 with an empty ring means nothing seen.
  uint64_t greatest_ = 0;
};

}  // namespace wg
