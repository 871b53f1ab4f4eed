// Result<T>: a value or a std::error_code, for code paths that do not throw
// (g++ 12 has no std::expected).
#pragma once

#include <system_error>
#include <utility>
#include <variant>

namespace wg {

template <class T>
class Result {
public:
  Result(T value) : v_(std::move(value)) {}                // NOLINT: implicit by design
  Result(std::error_code ec) : v_(ec) {}                   // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  T& operator*() { return value(); }
  T* operator->() { return &value(); }
  std::error_code error() const { return ok() ? std::error_code{} : std::get<1>(v_); }

private:
  std::variant<T, std::error_code> v_;
};

}  // namespace wg
