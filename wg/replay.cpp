// Sliding-window replay check for transport counters (see replay.hpp).
#include "wg/replay.hpp"

#include <algorithm>

namespace wg {

bool ReplayFilter::validate(uint64_t counter, uint64_t limit) {
  if (counter >= limit) return false;
  // Too old: its bit may already have been reused by a newer block.
  if (counter < greatest_ && greatest_ - counter > kReplayWindow) return false;

  const uint64_t block = counter / kBlockBits;
  if (counter > greatest_) {
    // Slide forward. Blocks after the old top block, up to and including the new one,
    // now stand for counters never seen; a jump of a whole ring or more clears it all.
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
