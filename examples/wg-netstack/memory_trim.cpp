#include "memory_trim.hpp"

#include <fcntl.h>
#include <malloc.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>

#include "wg/base/log.hpp"

namespace wgns {

size_t resident_bytes() {
  static const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  char text[128];
  const ssize_t n = fd < 0 ? -1 : ::pread(fd, text, sizeof text - 1, 0);
  if (n <= 0) return 0;
  text[n] = 0;
  size_t pages_total = 0, pages_resident = 0;
  if (std::sscanf(text, "%zu %zu", &pages_total, &pages_resident) != 2) return 0;
  return pages_resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

size_t heap_slack() {
  const struct mallinfo2 info = mallinfo2();
  const size_t in_use = info.uordblks + info.hblkhd;
  const size_t resident = resident_bytes();
  return resident > in_use ? resident - in_use : 0;
}

namespace {

// CPU time of the whole process so far.
std::chrono::microseconds process_cpu() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::microseconds(ts.tv_nsec / 1000);
}

// `every`: the time to the next check, doubled (up to kTrimCheckIdleMax) while idle.
void trim_loop(std::shared_ptr<boost::asio::steady_timer> timer, size_t base_slack,
               std::chrono::microseconds looked_at, std::chrono::seconds every) {
  timer->expires_after(every);
  timer->async_wait([timer, base_slack, looked_at, every](const boost::system::error_code& ec) mutable {
    if (ec) return;
    if (process_cpu() - looked_at < kTrimCheckCpu)
      return trim_loop(timer, base_slack, looked_at, std::min(every * 2, kTrimCheckIdleMax));
    const size_t slack = heap_slack();
    if (slack >= base_slack + kTrimSlackGrowth) {
      const auto start = std::chrono::steady_clock::now();
      malloc_trim(0);
      base_slack = heap_slack();
      wg::log::verbose("memory: {} MiB resident beyond the heap's use, {} MiB after malloc_trim ({} ms)",
                       slack >> 20, base_slack >> 20,
                       std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count());
    } else {
      base_slack = std::min(base_slack, slack);
    }
    trim_loop(timer, base_slack, process_cpu(), std::chrono::seconds(1));
  });
}

}  // namespace

void trim_when_slack_grows(std::shared_ptr<boost::asio::steady_timer> timer, size_t base_slack) {
  trim_loop(std::move(timer), base_slack, process_cpu(), std::chrono::seconds(1));
}

}  // namespace wgns
