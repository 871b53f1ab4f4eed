// In-memory Bind: a map of ports to queues, for tests of the device pipeline.
#include "bind/memory.hpp"

#include <algorithm>
#include <cstring>

namespace conn {

bool MemoryNetwork::deliver(uint16_t from_port, uint16_t to_port, std::span<const uint8_t> data, bool* nobody) {
  std::lock_guard lock(mu_);
  if (filter_ && !filter_(from_port, to_port, data)) return false;
  auto it = binds_.find(to_port);
  if (it == binds_.end()) {
    if (nobody) *nobody = true;
    return false;
  }
  return it->second->push(from_port, data);
}

void MemoryNetwork::set_filter(Filter f) {
  std::lock_guard lock(mu_);
  filter_ = std::move(f);
}

Endpoint MemoryBind::endpoint_for(uint16_t port) {
  Endpoint ep;
  ep.family = 4;
  ep.addr[0] = 127;
  ep.addr[3] = 1;
  ep.port = port;
  return ep;
}

std::vector<ReceiveFn> MemoryBind::open(uint16_t port, uint16_t& actual_port, std::error_code& ec) {
  std::lock_guard net_lock(net_.mu_);
  std::lock_guard lock(mu_);
  if (open_) {
    ec = std::make_error_code(std::errc::already_connected);
    return {};
  }
  if (port == 0) {
    while (net_.binds_.count(net_.next_port_)) ++net_.next_port_;
    port = net_.next_port_++;
  } else if (net_.binds_.count(port)) {
    ec = std::make_error_code(std::errc::address_in_use);
    return {};
  }
  net_.binds_[port] = this;
  port_ = port;
  actual_port = port;
  open_ = true;
  queue_.clear();
  refused_.clear();
  ec.clear();
  return {[this](auto bufs, auto at, auto sizes, auto eps, std::error_code& e) {
    return receive(bufs, at, sizes, eps, e);
  }};
}

void MemoryBind::close() {
  {
    std::lock_guard net_lock(net_.mu_);
    std::lock_guard lock(mu_);
    if (!open_) return;
    net_.binds_.erase(port_);
    open_ = false;
    queue_.clear();
  }
  cv_.notify_all();
}

bool MemoryBind::push(uint16_t from_port, std::span<const uint8_t> data) {
  {
    std::lock_guard lock(mu_);
    if (queue_.size() >= limit_) {
      ++dropped_;
      return false;
    }
    queue_.push_back({from_port, std::vector<uint8_t>(data.begin(), data.end())});
  }
  cv_.notify_one();
  return true;
}

uint64_t MemoryBind::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

size_t MemoryBind::receive(std::span<const std::span<uint8_t>> bufs, std::span<uint8_t*> at,
                           std::span<size_t> sizes, std::span<Endpoint> eps, std::error_code& ec) {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return !open_ || !queue_.empty() || !refused_.empty(); });
    if (!open_ || refused_.empty()) break;
    auto ports = std::move(refused_);
    refused_.clear();
    auto report = unreachable_;
    lock.unlock();
    for (uint16_t p : ports)
      if (report) report(endpoint_for(p));
    lock.lock();
  }
  if (!open_) {
    ec = std::make_error_code(std::errc::operation_canceled);
    return 0;
  }
  // Datagram n goes to bufs[k] at `used`, after the `in_k` already there; a buffer
  // holds at least one, so k <= n.
  size_t n = 0, k = 0, used = 0, in_k = 0;
  while (n < bufs.size() && !queue_.empty()) {
    auto& d = queue_.front();
    if (in_k > 0 && (in_k == pack_ || used + d.data.size() > bufs[k].size())) {
      ++k;
      used = in_k = 0;
    }
    size_t len = std::min(d.data.size(), bufs[k].size() - used);
    if (len) std::memcpy(bufs[k].data() + used, d.data.data(), len);
    at[n] = bufs[k].data() + used;
    sizes[n] = len;
    eps[n] = endpoint_for(d.from);
    used += len;
    ++in_k;
    queue_.pop_front();
    ++n;
  }
  ec.clear();
  return n;
}

void MemoryBind::send(std::span<const std::span<const uint8_t>> bufs, Endpoint& ep, std::error_code& ec) {
  uint16_t from;
  {
    std::lock_guard lock(mu_);
    if (!open_) {
      ec = std::make_error_code(std::errc::not_connected);
      return;
    }
    from = port_;
  }
  ec.clear();
  // Like UDP: datagrams to nowhere or to a full queue vanish.
  bool nobody = false;
  for (auto& b : bufs) net_.deliver(from, ep.port, b, &nobody);
  if (!nobody) return;
  {
    std::lock_guard lock(mu_);
    if (!unreachable_) return;
    refused_.push_back(ep.port);
  }
  cv_.notify_all();
}

}  // namespace conn
