// Tests' key to Peer's pipeline methods, which programs cannot call (wg::PeerAccess).
#pragma once

#include "wg/peer.hpp"

namespace wg {

struct PeerTestAccess {
  static PeerAccess key() { return {}; }
};

}  // namespace wg
