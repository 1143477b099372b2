// Per-call timing: the instruction loop and the delegates it calls record what
// they run into a ProfileRecorder when the caller asks for one. Everything
// that records takes a `ProfileRecorder*` that is null when profiling is off,
// so an unprofiled call pays nothing but that null.
//
// A recorder belongs to one call on one thread; it has no lock and nothing
// else shares it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace etna {

using ProfileClock = std::chrono::steady_clock;

// What an event measures.
enum class ProfileCategory : uint8_t {
  kCall,         // one method call: its whole instruction loop
  kKernel,       // a KernelCall (named by its operator)
  kDelegate,     // a DelegateCall (named by its backend id)
  kInstruction,  // a MoveCall, JumpFalseCall or FreeCall
  kStage,        // one step a delegate runs inside its DelegateCall
};

// "call", "kernel", "delegate", "instruction", "stage".
const char* profile_category_name(ProfileCategory category);

struct ProfileEvent {
  ProfileCategory category = ProfileCategory::kCall;
  std::string name;      // method name, operator key, backend id or stage name
  int64_t start_ns = 0;  // ProfileClock time since its epoch
  int64_t duration_ns = 0;
  uint32_t depth = 0;  // events open around this one (0 for the call)
  int64_t index = -1;  // instruction index (instructions), stage index (stages), -1 for the call
};

class ProfileRecorder {
 public:
  // Room for `expected` events before the vector grows (growing inside the
  // loop would be counted as time between instructions).
  explicit ProfileRecorder(size_t expected = 0);

  // Starts an event and returns its slot for close(). The clock is read last,
  // so the bookkeeping is not counted. `name` is copied only by take(): it
  // must stay valid until then (names of a loaded method or delegate do).
  size_t open(ProfileCategory category, std::string_view name, int64_t index);
  // Ends the event of `slot`, reading the clock first.
  void close(size_t slot);

  // The events in the order they were opened (so a parent precedes its
  // children), with their names copied; the recorder is empty afterwards.
  // Events still open get the duration up to now.
  std::vector<ProfileEvent> take();

  bool empty() const { return records_.empty(); }

 private:
  struct Record {
    ProfileCategory category;
    std::string_view name;
    int64_t index;
    uint32_t depth;
    ProfileClock::time_point start;
    ProfileClock::time_point end;
    bool closed;
  };
  std::vector<Record> records_;
  uint32_t open_count_ = 0;
};

// Opens an event on `recorder` (when not null) and closes it when the scope
// ends, whichever way it ends.
class ProfileScope {
 public:
  ProfileScope(ProfileRecorder* recorder, ProfileCategory category, std::string_view name, int64_t index)
      : recorder_(recorder), slot_(recorder ? recorder->open(category, name, index) : 0) {}
  ~ProfileScope() {
    if (recorder_) recorder_->close(slot_);
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  ProfileRecorder* recorder_;
  size_t slot_;
};

}  // namespace etna
