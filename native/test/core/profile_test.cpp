// The profile recorder alone, and profiled calls of real programs: one event
// per instruction inside the call's event, delegate stages inside their
// DelegateCall.
#include <gtest/gtest.h>

#include <thread>

#include "core/module.h"
#include "core/profile.h"
#include "test_support.h"

namespace etna {
namespace {

using test::float_tensor;
using test::testdata;

TEST(ProfileRecorder, NestsInOpenOrder) {
  ProfileRecorder recorder;
  const size_t outer = recorder.open(ProfileCategory::kCall, "forward", -1);
  const size_t inner = recorder.open(ProfileCategory::kKernel, "aten::add.out", 3);
  std::this_thread::sleep_for(std::chrono::microseconds(50));
  recorder.close(inner);
  const size_t next = recorder.open(ProfileCategory::kDelegate, "XnnpackBackend", 4);
  recorder.close(next);
  recorder.close(outer);

  const std::vector<ProfileEvent> events = recorder.take();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_TRUE(recorder.empty());
  EXPECT_EQ(events[0].name, "forward");
  EXPECT_EQ(events[0].depth, 0u);
  EXPECT_EQ(events[0].index, -1);
  EXPECT_EQ(events[1].name, "aten::add.out");
  EXPECT_EQ(events[1].depth, 1u);
  EXPECT_EQ(events[1].index, 3);
  EXPECT_GE(events[1].duration_ns, 50'000);
  EXPECT_EQ(events[2].category, ProfileCategory::kDelegate);
  EXPECT_EQ(events[2].depth, 1u);
  EXPECT_GE(events[2].start_ns, events[1].start_ns + events[1].duration_ns);
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_GE(events[i].start_ns, events[0].start_ns);
    EXPECT_LE(events[i].start_ns + events[i].duration_ns, events[0].start_ns + events[0].duration_ns);
  }
}

TEST(ProfileRecorder, ScopeClosesOnEveryExitAndNullRecordsNothing) {
  ProfileRecorder recorder;
  auto failing = [&](ProfileRecorder* profile) -> Status {
    const ProfileScope scope(profile, ProfileCategory::kStage, "stage", 0);
    return make_error(ErrorCode::kInvalidInput, "stop");
  };
  EXPECT_FALSE(failing(&recorder));
  EXPECT_FALSE(failing(nullptr));
  // Closed by the scope: a second event opens at depth 0, not 1.
  recorder.close(recorder.open(ProfileCategory::kStage, "after", 1));
  const auto events = recorder.take();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].depth, 0u);
  EXPECT_EQ(std::string(profile_category_name(events[0].category)), "stage");
}

TEST(ProfileRecorder, TakeEndsEventsStillOpen) {
  ProfileRecorder recorder;
  recorder.open(ProfileCategory::kCall, "forward", -1);
  const auto events = recorder.take();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_GE(events[0].duration_ns, 0);
  recorder.close(0);  // a slot taken already: ignored
  EXPECT_TRUE(recorder.empty());
}

struct ProfiledCall {
  std::vector<OutputValue> outputs;
  std::vector<ProfileEvent> events;
};

ProfiledCall profiled_call(const std::string& file, const std::vector<InputValue>& inputs, bool profile) {
  ProfiledCall result;
  auto program = Program::load_file(testdata(file));
  EXPECT_TRUE(program) << (program ? "" : program.error().message);
  if (!program) return result;
  auto module = Module::load(*program, ModuleOptions{});
  EXPECT_TRUE(module) << (module ? "" : module.error().message);
  if (!module) return result;
  auto capacities = (*module)->output_capacities("forward");
  EXPECT_TRUE(capacities);
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<OutputBuffer> buffers;
  for (size_t capacity : *capacities) bytes.emplace_back(capacity);
  for (auto& b : bytes) buffers.push_back(OutputBuffer{b.data(), b.size()});
  auto call = (*module)->begin_call("forward", inputs, buffers);
  EXPECT_TRUE(call) << (call ? "" : call.error().message);
  if (!call) return result;
  auto outputs = (*call)->run(profile ? &result.events : nullptr);
  EXPECT_TRUE(outputs) << (outputs ? "" : outputs.error().message);
  if (outputs) result.outputs = std::move(*outputs);
  return result;
}

void expect_inside(const ProfileEvent& child, const ProfileEvent& parent) {
  EXPECT_GE(child.start_ns, parent.start_ns) << child.name << " starts before " << parent.name;
  EXPECT_LE(child.start_ns + child.duration_ns, parent.start_ns + parent.duration_ns)
      << child.name << " ends after " << parent.name;
}

TEST(ProfiledCall, EveryKernelCallInsideTheCall) {
  ETNA_REQUIRE_TESTDATA();
  std::vector<float> x{1, 3};
  const ProfiledCall call = profiled_call("et_model_constant_buffer.pte", {float_tensor({1, 2}, x)}, true);
  auto program = Program::load_file(testdata("et_model_constant_buffer.pte"));
  ASSERT_TRUE(program);
  const fb::ExecutionPlan& plan = (*program)->method(0);
  size_t instructions = 0;
  for (const auto* chain : *plan.chains()) instructions += chain->instructions()->size();

  ASSERT_EQ(call.events.size(), 1 + instructions);
  EXPECT_EQ(call.events[0].category, ProfileCategory::kCall);
  EXPECT_EQ(call.events[0].name, "forward");
  for (size_t i = 1; i < call.events.size(); ++i) {
    const ProfileEvent& event = call.events[i];
    EXPECT_EQ(event.category, ProfileCategory::kKernel);
    EXPECT_EQ(event.depth, 1u);
    EXPECT_EQ(event.index, static_cast<int64_t>(i - 1));
    EXPECT_NE(event.name.find("::"), std::string::npos) << event.name;
    expect_inside(event, call.events[0]);
    if (i > 1) {
      EXPECT_GE(event.start_ns, call.events[i - 1].start_ns + call.events[i - 1].duration_ns);
    }
  }
}

TEST(ProfiledCall, DelegateStagesInsideTheirDelegateCall) {
  ETNA_REQUIRE_TESTDATA();
  std::vector<float> x(3 * 16 * 16, 0.5f);
  const ProfiledCall call = profiled_call("djl_conv_xnnpack.pte", {float_tensor({1, 3, 16, 16}, x)}, true);
  ASSERT_GE(call.events.size(), 3u);
  EXPECT_EQ(call.events[1].category, ProfileCategory::kDelegate);
  EXPECT_EQ(call.events[1].name, "XnnpackBackend");
  expect_inside(call.events[1], call.events[0]);
  bool convolution = false;
  for (size_t i = 2; i < call.events.size(); ++i) {
    const ProfileEvent& stage = call.events[i];
    EXPECT_EQ(stage.category, ProfileCategory::kStage);
    EXPECT_EQ(stage.depth, 2u);
    EXPECT_EQ(stage.index, static_cast<int64_t>(i - 2));
    expect_inside(stage, call.events[1]);
    convolution = convolution || stage.name == "XNNConv2d (packed operator)";
  }
  EXPECT_TRUE(convolution);
}

}  // namespace
}  // namespace etna
