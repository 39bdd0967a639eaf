// Strong unit types used across longhaul.
//
// Time is an absolute instant in integer nanoseconds on whatever clock the driver uses
// (a monotonic clock for real drivers, the virtual clock of the simulator); the core
// never reads a clock itself. Duration is a signed span in nanoseconds. Bandwidth is
// bits per second. ByteCount and PacketNumber are plain integers with names that say
// what they count; PacketNumber values are never reused within a connection.
//
// All types are trivially copyable values; thread-safe as values are.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

namespace longhaul {

using ByteCount = uint64_t;
using PacketNumber = uint64_t;

class Duration {
 public:
  constexpr Duration() = default;
  static constexpr Duration Nanoseconds(int64_t ns) { return Duration(ns); }
  static constexpr Duration Microseconds(int64_t us) { return Duration(us * 1000); }
  static constexpr Duration Milliseconds(int64_t ms) { return Duration(ms * 1000000); }
  static constexpr Duration Seconds(double s) {
    return Duration(static_cast<int64_t>(s * 1e9));
  }
  static constexpr Duration Zero() { return Duration(0); }
  static constexpr Duration Infinite() {
    return Duration(std::numeric_limits<int64_t>::max());
  }

  constexpr int64_t ns() const { return ns_; }
  constexpr double seconds() const { return static_cast<double>(ns_) * 1e-9; }
  constexpr double milliseconds() const { return static_cast<double>(ns_) * 1e-6; }
  constexpr double microseconds() const { return static_cast<double>(ns_) * 1e-3; }
  constexpr bool IsInfinite() const { return ns_ == std::numeric_limits<int64_t>::max(); }

  constexpr Duration operator+(Duration o) const { return Duration(ns_ + o.ns_); }
  constexpr Duration operator-(Duration o) const { return Duration(ns_ - o.ns_); }
  constexpr Duration operator*(int64_t k) const { return Duration(ns_ * k); }
  constexpr Duration operator/(int64_t k) const { return Duration(ns_ / k); }
  constexpr Duration Scaled(double f) const {
    return Duration(static_cast<int64_t>(static_cast<double>(ns_) * f));
  }
  constexpr Duration& operator+=(Duration o) {
    ns_ += o.ns_;
    return *this;
  }
  constexpr Duration& operator-=(Duration o) {
    ns_ -= o.ns_;
    return *this;
  }
  constexpr auto operator<=>(const Duration&) const = default;

  std::string ToString() const;

 private:
  constexpr explicit Duration(int64_t ns) : ns_(ns) {}
  int64_t ns_ = 0;
};

class Time {
 public:
  constexpr Time() = default;
  static constexpr Time FromNanoseconds(int64_t ns) { return Time(ns); }
  static constexpr Time Zero() { return Time(0); }
  static constexpr Time Infinite() { return Time(std::numeric_limits<int64_t>::max()); }

  constexpr int64_t ns() const { return ns_; }
  constexpr double seconds() const { return static_cast<double>(ns_) * 1e-9; }
  constexpr bool IsInfinite() const { return ns_ == std::numeric_limits<int64_t>::max(); }

  constexpr Time operator+(Duration d) const {
    if (IsInfinite() || d.IsInfinite()) return Infinite();
    return Time(ns_ + d.ns());
  }
  constexpr Time operator-(Duration d) const { return Time(ns_ - d.ns()); }
  constexpr Duration operator-(Time o) const { return Duration::Nanoseconds(ns_ - o.ns_); }
  constexpr Time& operator+=(Duration d) {
    *this = *this + d;
    return *this;
  }
  constexpr auto operator<=>(const Time&) const = default;

 private:
  constexpr explicit Time(int64_t ns) : ns_(ns) {}
  int64_t ns_ = 0;
};

class Bandwidth {
 public:
  constexpr Bandwidth() = default;
  static constexpr Bandwidth BitsPerSecond(double bps) { return Bandwidth(bps); }
  static constexpr Bandwidth Gbps(double g) { return Bandwidth(g * 1e9); }
  static constexpr Bandwidth Mbps(double m) { return Bandwidth(m * 1e6); }
  static constexpr Bandwidth Zero() { return Bandwidth(0); }
  static constexpr Bandwidth FromBytesAndDuration(ByteCount bytes, Duration d) {
    return d.ns() <= 0 ? Bandwidth(0)
                       : Bandwidth(static_cast<double>(bytes) * 8e9 / static_cast<double>(d.ns()));
  }

  constexpr double bps() const { return bps_; }
  constexpr double BytesPerSecond() const { return bps_ / 8; }
  constexpr bool IsZero() const { return bps_ <= 0; }

  // Time to serialise `bytes` at this rate (zero rate: infinite).
  constexpr Duration TransferTime(ByteCount bytes) const {
    if (bps_ <= 0) return Duration::Infinite();
    return Duration::Nanoseconds(static_cast<int64_t>(static_cast<double>(bytes) * 8e9 / bps_));
  }
  // Bytes carried in `d` at this rate.
  constexpr ByteCount BytesIn(Duration d) const {
    return static_cast<ByteCount>(bps_ * d.seconds() / 8);
  }
  constexpr Bandwidth Scaled(double f) const { return Bandwidth(bps_ * f); }
  constexpr auto operator<=>(const Bandwidth&) const = default;

  std::string ToString() const;

 private:
  constexpr explicit Bandwidth(double bps) : bps_(bps) {}
  double bps_ = 0;
};

}  // namespace longhaul
