#include "profile.h"

namespace etna {

const char* profile_category_name(ProfileCategory category) {
  switch (category) {
    case ProfileCategory::kCall: return "call";
    case ProfileCategory::kKernel: return "kernel";
    case ProfileCategory::kDelegate: return "delegate";
    case ProfileCategory::kInstruction: return "instruction";
    case ProfileCategory::kStage: return "stage";
  }
  return "unknown";
}

ProfileRecorder::ProfileRecorder(size_t expected) { records_.reserve(expected); }

size_t ProfileRecorder::open(ProfileCategory category, std::string_view name, int64_t index) {
  const size_t slot = records_.size();
  records_.push_back(Record{category, name, index, open_count_, {}, {}, false});
  ++open_count_;
  records_.back().start = ProfileClock::now();
  return slot;
}

void ProfileRecorder::close(size_t slot) {
  const ProfileClock::time_point end = ProfileClock::now();
  if (slot >= records_.size() || records_[slot].closed) return;
  records_[slot].end = end;
  records_[slot].closed = true;
  --open_count_;
}

std::vector<ProfileEvent> ProfileRecorder::take() {
  const ProfileClock::time_point now = ProfileClock::now();
  auto ns = [](ProfileClock::duration d) { return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count(); };
  std::vector<ProfileEvent> events;
  events.reserve(records_.size());
  for (const Record& record : records_) {
    ProfileEvent event;
    event.category = record.category;
    event.name = std::string(record.name);
    event.start_ns = ns(record.start.time_since_epoch());
    event.duration_ns = ns((record.closed ? record.end : now) - record.start);
    event.depth = record.depth;
    event.index = record.index;
    events.push_back(std::move(event));
  }
  records_.clear();
  open_count_ = 0;
  return events;
}

}  // namespace etna
