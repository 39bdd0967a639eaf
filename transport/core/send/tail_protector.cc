#include "transport/core/send/tail_protector.h"

namespace longhaul {

void TailProtector::OnDataPacketSent(Time now, PacketNumber pn, Duration srtt,
                                     SentPacketTable* sent) {
  const Time oldest = now - srtt;
  while (!candidates_.empty()) {
    const PacketNumber front = candidates_.front();
    if (front >= sent->base() && sent->Get(front).sent_time >= oldest) break;
    candidates_.pop_front();
  }
  candidates_.push_back(pn);
}

bool TailProtector::NextCopy(Time now, Duration srtt, const SendStream& stream,
                             SentPacketTable* sent, uint64_t* start, uint64_t* units) {
  const Time oldest = now - srtt;
  while (!candidates_.empty()) {
    const PacketNumber pn = candidates_.back();
    candidates_.pop_back();
    if (pn < sent->base()) continue;
    SentPacket& p = sent->Get(pn);
    if (p.sent_time < oldest) {
      candidates_.clear();  // everything below is older still
      return false;
    }
    if (p.finished || p.tail_copied) continue;
    if (stream.IsAcked(p.stream_start, p.stream_units)) continue;
    p.tail_copied = true;
    *start = p.stream_start;
    *units = p.stream_units;
    return true;
  }
  return false;
}

}  // namespace longhaul
