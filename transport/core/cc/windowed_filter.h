// WindowedFilter: the running maximum (or minimum) of a signal over a sliding window of
// "time" (any monotone int64 clock: round-trip counts for BBR's bandwidth filter,
// nanoseconds for an RTT filter), in O(1) space and time per sample.
//
// Kathleen Nichols' three-sample estimator: it keeps the best, second-best and
// third-best samples of successive sub-windows, so when the best one ages out the next
// candidate is already known. The estimate is exact when the best sample is at most one
// window old and conservative (never worse than a sample inside the window) otherwise.
//
// Value type; not thread-safe.
#pragma once

#include <cstdint>
#include <functional>

namespace longhaul {

template <typename T, typename Better>
class WindowedFilter {
 public:
  // `window` in the same units as the times passed to Update().
  explicit WindowedFilter(int64_t window) : window_(window) {}

  // The current estimate (T{} before the first sample or after Reset(T{})).
  const T& Get() const { return s_[0].value; }
  bool empty() const { return !has_sample_; }
  int64_t window() const { return window_; }

  // Forgets every sample and starts again from `value` at `time`.
  void Reset(const T& value, int64_t time) {
    s_[0] = s_[1] = s_[2] = Sample{value, time};
    has_sample_ = true;
  }

  // Adds a sample; `time` must not decrease between calls.
  void Update(const T& value, int64_t time) {
    const Sample v{value, time};
    if (!has_sample_ || !better_(s_[0].value, value) || time - s_[2].time > window_) {
      // A new best (ties count as new, refreshing its time), or nothing left in the
      // window: forget the rest.
      Reset(value, time);
      return;
    }
    if (!better_(s_[1].value, value)) {
      s_[1] = s_[2] = v;
    } else if (!better_(s_[2].value, value)) {
      s_[2] = v;
    }
    const int64_t age = time - s_[0].time;
    if (age > window_) {
      // The best aged out: promote the others; if the second best is also too old,
      // promote once more.
      s_[0] = s_[1];
      s_[1] = s_[2];
      s_[2] = v;
      if (time - s_[0].time > window_) {
        s_[0] = s_[1];
        s_[1] = s_[2];
        s_[2] = v;
      }
    } else if (s_[1].time == s_[0].time && age > window_ / 4) {
      // A quarter of the window passed without a second-best candidate: take this one
      // for the second and third sub-windows.
      s_[1] = s_[2] = v;
    } else if (s_[2].time == s_[1].time && age > window_ / 2) {
      // Half the window passed without a third-best candidate.
      s_[2] = v;
    }
  }

 private:
  struct Sample {
    T value{};
    int64_t time = 0;
  };
  int64_t window_;
  Sample s_[3];
  bool has_sample_ = false;
  Better better_;
};

// Running maximum and minimum. `Better(a, b)` is true if a is strictly better than b.
template <typename T>
using MaxFilter = WindowedFilter<T, std::greater<T>>;
template <typename T>
using MinFilter = WindowedFilter<T, std::less<T>>;

}  // namespace longhaul
