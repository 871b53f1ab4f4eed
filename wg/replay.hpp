// Replay check on transport counters: an RFC 6479 ring, as the kernel's.
#pragma once

#include <array>
#include <cstdint>

namespace wg {

// The ring's bits less one block.
inline constexpr uint64_t kReplayWindow = 8128;

// Not thread-safe: for authenticated messages on the in-order receive path.
class ReplayFilter {
public:
  // True, and recorded, if below `limit`, in the window and new; false changes nothing.
  bool validate(uint64_t counter, uint64_t limit);
  void reset();

private:
  static constexpr uint64_t kBlockBits = 64;
  static constexpr uint64_t kBlocks = 128;  // power of two

  // Bit c % 64 of block (c / 64) % 128 marks counter c.
  std::array<uint64_t, kBlocks> ring_{};
  uint64_t greatest_ = 0;
};

}  // namespace wg
