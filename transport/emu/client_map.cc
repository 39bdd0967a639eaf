#include "transport/emu/client_map.h"

#include <algorithm>

#include "glog/logging.h"

namespace longhaul::emu {

ClientMap::ClientMap(size_t max_clients) : max_clients_(std::max<size_t>(max_clients, 1)) {}

std::optional<uint32_t> ClientMap::Find(const net::SocketAddress& addr) const {
  auto it = by_addr_.find(addr);
  if (it == by_addr_.end()) return std::nullopt;
  return it->second;
}

ClientMap::InsertResult ClientMap::Insert(const net::SocketAddress& addr, int64_t now_ns) {
  DCHECK(!by_addr_.contains(addr));
  InsertResult r;
  uint32_t index;
  if (!free_.empty()) {
    index = free_.back();
    free_.pop_back();
  } else if (entries_.size() < max_clients_) {
    index = static_cast<uint32_t>(entries_.size());
    entries_.emplace_back();
  } else {
    // Full: evict the least recently used. A linear scan is fine: it only happens when a
    // new client arrives at a full table.
    index = 0;
    for (uint32_t i = 1; i < entries_.size(); ++i) {
      if (entries_[i].last_used_ns < entries_[index].last_used_ns) index = i;
    }
    r.evicted = true;
    r.evicted_addr = entries_[index].addr;
    by_addr_.erase(entries_[index].addr);
    ++evictions_;
  }
  Entry& e = entries_[index];
  e.addr = addr;
  e.last_used_ns = now_ns;
  e.in_use = true;
  ++e.generation;
  by_addr_[addr] = index;
  ++inserted_;
  r.index = index;
  return r;
}

void ClientMap::Remove(uint32_t index) {
  Entry& e = entries_[index];
  if (!e.in_use) return;
  by_addr_.erase(e.addr);
  e.in_use = false;
  ++e.generation;
  free_.push_back(index);
}

}  // namespace longhaul::emu
