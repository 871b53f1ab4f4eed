// Replay window (replay.hpp).
#include "wg/replay.hpp"

#include <algorithm>

namespace wg {

bool ReplayFilter::validate(uint64_t counter, uint64_t limit) {
  if (counter >= limit) return false;
  // Too old: its bit may belong to a newer block.
  if (counter < greatest_ && greatest_ - counter > kReplayWindow) return false;

  const uint64_t block = counter / kBlockBits;
  if (counter > greatest_) {
    // Slide: clear the blocks after the old top through the new one (at most the ring).
    const uint64_t top = greatest_ / kBlockBits;
    const uint64_t n = std::min(block - top, kBlocks);
    for (uint64_t i = 1; i <= n; ++i) ring_[(top + i) & (kBlocks - 1)] = 0;
    greatest_ = counter;
  }

  uint64_t& word = ring_[block & (kBlocks - 1)];
  const uint64_t bit = uint64_t{1} << (counter % kBlockBits);
  if (word & bit) return false;  // replay
  word |= bit;
  return true;
}

void ReplayFilter::reset() {
  ring_.fill(0);
  greatest_ = 0;
}

}  // namespace wg
