// A value, or the sentence that says why there is none: the one way a function inside the
// daemon, its transports, shm and common returns a failure together with a value (a failure
// with no value is a std::string, empty on success). Constructors and one-time set-up throw
// instead; the boundaries (completions, control replies, the C and NCCL APIs, Python) turn
// the sentence into their own codes (docs/architecture.md, "Error conventions").
// std::expected would do, but it needs C++23 and the project builds as C++20.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace plexus::common {

// Why something failed, on its way into a Result.
struct Failure {
  std::string why;
};
inline Failure fail(std::string why) { return Failure{std::move(why)}; }

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit, as a return value
  // A failure always has a sentence: an empty one would read as success where a caller
  // passes error() on.
  Result(Failure failure)  // NOLINT: implicit, as a return value
      : error_(failure.why.empty() ? std::string("failed (no reason given)")
                                   : std::move(failure.why)) {}

  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  // Empty when ok().
  const std::string& error() const { return error_; }

  // Only when ok().
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T take() { return std::move(*value_); }

 private:
  std::optional<T> value_;
  std::string error_;
};

}  // namespace plexus::common
