// Program policy, not the library's: glibc keeps the heap memory of closed connections in
// the process, so resident memory would stay at its peak after many connections closed.
// Once a second, if the process used kTrimCheckCpu of CPU time since the last look, the
// slack is looked at: resident memory beyond what the allocator has handed out
// (mallinfo2's in-use and mmapped bytes). When it has grown by kTrimSlackGrowth since
// the last trim, malloc_trim(0) hands the free pages back, and the slack left after it
// (pages holding some live data, arenas' tops, code, stacks) is the new base. Free bytes
// alone cannot tell: pages a trim released and a later load touched again still count
// as free. Steady churn reuses the same pages and does not grow it. An idle process is
// not looked at: mallinfo2 walks the whole heap, and no work means no new slack; while
// it stays idle the checks space out to one per kTrimCheckIdleMax.
#pragma once

#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstddef>
#include <memory>

namespace wgns {

inline constexpr size_t kTrimSlackGrowth = 16 << 20;
inline constexpr std::chrono::microseconds kTrimCheckCpu{2000};
inline constexpr std::chrono::seconds kTrimCheckIdleMax{8};

// Resident bytes of this process (/proc/self/statm, second field); 0 if unreadable. The
// file stays open from the first call on: call it once before the sandbox.
size_t resident_bytes();

// Resident memory beyond what the allocator has handed out (0 if RSS is unreadable).
size_t heap_slack();

// Checks the slack every second on timer's executor, from base_slack on, until the
// timer is cancelled.
void trim_when_slack_grows(std::shared_ptr<boost::asio::steady_timer> timer, size_t base_slack);

}  // namespace wgns
