// ClientMap: the UDP relay's table of client flows. Each distinct client source address
// (IP + port) gets its own entry (and, in the relay, its own upstream socket), so
// multi-flow clients keep their flows apart and answers find their way back to the
// socket that sent the request.
//
// The table is bounded: when it is full, inserting a new client evicts the least recently
// used one. Every entry carries a generation that changes when its index is reused, so a
// datagram queued for an evicted client can be recognised (Valid()) and dropped instead
// of being sent to the new owner of the index.
//
// Times are integer nanoseconds on the caller's clock. Thread-safety: none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "transport/net/socket_address.h"

namespace longhaul::emu {

class ClientMap {
 public:
  struct Entry {
    net::SocketAddress addr;
    int64_t last_used_ns = 0;
    uint32_t generation = 0;
    bool in_use = false;
  };
  struct InsertResult {
    uint32_t index = 0;
    bool evicted = false;        // an older client was removed to make room
    net::SocketAddress evicted_addr;  // ... this one
  };

  // `max_clients` >= 1.
  explicit ClientMap(size_t max_clients);

  // The index of `addr`, if present.
  std::optional<uint32_t> Find(const net::SocketAddress& addr) const;

  // Adds `addr` (which must not be present), evicting the least recently used client if
  // the map is full.
  InsertResult Insert(const net::SocketAddress& addr, int64_t now_ns);

  // Removes the client at `index` (e.g. its upstream socket could not be created).
  void Remove(uint32_t index);

  // Marks the client at `index` as used at `now_ns`.
  void Touch(uint32_t index, int64_t now_ns) { entries_[index].last_used_ns = now_ns; }

  // Whether `index` still belongs to the client that had generation `generation`.
  bool Valid(uint32_t index, uint32_t generation) const {
    return index < entries_.size() && entries_[index].in_use &&
           entries_[index].generation == generation;
  }

  const Entry& entry(uint32_t index) const { return entries_[index]; }
  size_t size() const { return by_addr_.size(); }
  size_t capacity() const { return max_clients_; }
  // Indices ever allocated (entries_ grows up to capacity()).
  size_t slots() const { return entries_.size(); }
  uint64_t inserted() const { return inserted_; }
  uint64_t evictions() const { return evictions_; }

 private:
  size_t max_clients_;
  std::vector<Entry> entries_;
  std::vector<uint32_t> free_;
  absl::flat_hash_map<net::SocketAddress, uint32_t> by_addr_;
  uint64_t inserted_ = 0;
  uint64_t evictions_ = 0;
};

}  // namespace longhaul::emu
