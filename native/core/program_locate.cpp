// Finds where a FlatBuffer that failed verification is damaged. The whole
// buffer verifier only says yes or no; this walks the tables top-down with a
// fresh verifier per piece and reports the first piece that fails.
#include <optional>
#include <string>

#include "program.h"
#include "program_checks.h"

namespace etna {
namespace {

using flatbuffers::Table;
using flatbuffers::Verifier;

class Locator {
 public:
  Locator(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  std::string locate() const {
    if (size_ < 8) return "the program region is shorter than 8 bytes";
    const uint32_t root = flatbuffers::ReadScalar<flatbuffers::uoffset_t>(data_);
    if (root < 8 || root > size_ - 4) {
      return "root table offset " + std::to_string(root) + " (byte 0) points outside the " + std::to_string(size_) +
             "-byte program region";
    }
    const fb::Program* program = fb::GetProgram(data_);
    if (!table_start_ok(program)) return "root Program table at byte " + at(program) + ": its vtable is out of range";
    using P = fb::Program;
    if (auto e = table_vector(
            "execution_plan", program, P::VT_EXECUTION_PLAN, [&] { return program->execution_plan(); },
            [&](const std::string& path, const fb::ExecutionPlan* plan) { return in_plan(path, plan); }))
      return *e;
    if (auto e =
            table_vector("constant_buffer", program, P::VT_CONSTANT_BUFFER, [&] { return program->constant_buffer(); }))
      return *e;
    if (auto e = table_vector("backend_delegate_data", program, P::VT_BACKEND_DELEGATE_DATA,
                              [&] { return program->backend_delegate_data(); }))
      return *e;
    if (auto e = table_vector("segments", program, P::VT_SEGMENTS, [&] { return program->segments(); })) return *e;
    if (auto e = table_field("constant_segment", program, P::VT_CONSTANT_SEGMENT,
                             [&] { return program->constant_segment(); }))
      return *e;
    if (auto e = table_vector("mutable_data_segments", program, P::VT_MUTABLE_DATA_SEGMENTS,
                              [&] { return program->mutable_data_segments(); }))
      return *e;
    if (auto e = table_vector("named_data", program, P::VT_NAMED_DATA, [&] { return program->named_data(); }))
      return *e;
    return "a nested table, vector or string is out of range or misaligned (program region " + std::to_string(size_) +
           " bytes)";
  }

 private:
  Verifier fresh() const { return Verifier(data_, size_, /*max_depth=*/64, /*max_tables=*/10'000'000); }
  std::string at(const void* p) const { return std::to_string(static_cast<const uint8_t*>(p) - data_); }
  template <typename T>
  static const Table* table(const T* t) {
    return reinterpret_cast<const Table*>(t);
  }
  template <typename T>
  bool table_start_ok(const T* t) const {
    Verifier v = fresh();
    return table(t)->VerifyTableStart(v);
  }

  // A sub-table field: offset in range and the table itself sound.
  // Accessors are passed as getters: reading a field before its offset is
  // verified could itself read out of bounds.
  template <typename Owner, typename Get>
  std::optional<std::string> table_field(const std::string& path, const Owner* owner, flatbuffers::voffset_t field,
                                         Get get) const {
    Verifier v = fresh();
    if (!table(owner)->VerifyOffset(v, field)) return path + ": offset field points outside the program region";
    const auto* value = get();
    if (value == nullptr) return std::nullopt;
    Verifier w = fresh();
    if (!value->Verify(w)) return path + " (table at byte " + at(value) + ") is malformed";
    return std::nullopt;
  }

  // A scalar vector or string field.
  template <typename Owner, typename Get>
  std::optional<std::string> plain_field(const std::string& path, const Owner* owner, flatbuffers::voffset_t field,
                                         Get get) const {
    using V = std::remove_cv_t<std::remove_pointer_t<decltype(get())>>;
    Verifier v = fresh();
    if (!table(owner)->VerifyOffset(v, field)) return path + ": offset field points outside the program region";
    const V* value = get();
    if (value == nullptr) return std::nullopt;
    Verifier w = fresh();
    bool ok;
    if constexpr (std::is_same_v<V, flatbuffers::String>) {
      ok = w.VerifyString(value);
    } else {
      ok = w.VerifyVector(value);
    }
    if (!ok) return path + " (at byte " + at(value) + ") runs past the program region or is misaligned";
    return std::nullopt;
  }

  template <typename Owner, typename Get, typename Deeper>
  std::optional<std::string> table_vector(const std::string& path, const Owner* owner, flatbuffers::voffset_t field,
                                          Get get, Deeper&& deeper) const {
    if (auto e = plain_field(path, owner, field, get)) return e;
    const auto* vec = get();
    if (vec == nullptr) return std::nullopt;
    for (flatbuffers::uoffset_t i = 0; i < vec->size(); ++i) {
      const std::string item = path + "[" + std::to_string(i) + "]";
      const uint8_t* slot = reinterpret_cast<const uint8_t*>(vec->Data()) + i * sizeof(flatbuffers::uoffset_t);
      const uint32_t rel = flatbuffers::ReadScalar<flatbuffers::uoffset_t>(slot);
      if (rel > size_ - static_cast<size_t>(slot - data_)) {
        return item + ": offset at byte " + at(slot) + " points outside the program region";
      }
      const auto* element = vec->Get(i);
      Verifier v = fresh();
      if (element->Verify(v)) continue;
      if (!table_start_ok(element)) return item + " (table at byte " + at(element) + "): vtable out of range";
      if (auto e = deeper(item, element)) return e;
      return item + " (table at byte " + at(element) + ") is malformed";
    }
    return std::nullopt;
  }

  template <typename Owner, typename Get>
  std::optional<std::string> table_vector(const std::string& path, const Owner* owner, flatbuffers::voffset_t field,
                                          Get get) const {
    return table_vector(path, owner, field, get,
                        [](const std::string&, const auto*) { return std::optional<std::string>(); });
  }

  std::optional<std::string> in_plan(const std::string& path, const fb::ExecutionPlan* plan) const {
    using E = fb::ExecutionPlan;
    if (auto e = plain_field(path + ".name", plan, E::VT_NAME, [&] { return plan->name(); })) return e;
    const std::string named = plan->name() ? path + " ('" + plan->name()->str() + "')" : path;
    if (auto e = table_field(named + ".container_meta_type", plan, E::VT_CONTAINER_META_TYPE,
                             [&] { return plan->container_meta_type(); }))
      return e;
    if (auto e = table_vector(named + ".values", plan, E::VT_VALUES, [&] { return plan->values(); })) return e;
    if (auto e = plain_field(named + ".inputs", plan, E::VT_INPUTS, [&] { return plan->inputs(); })) return e;
    if (auto e = plain_field(named + ".outputs", plan, E::VT_OUTPUTS, [&] { return plan->outputs(); })) return e;
    if (auto e = table_vector(
            named + ".chains", plan, E::VT_CHAINS, [&] { return plan->chains(); },
            [&](const std::string& chain_path, const fb::Chain* chain) {
              return table_vector(chain_path + ".instructions", chain, fb::Chain::VT_INSTRUCTIONS,
                                  [&] { return chain->instructions(); });
            }))
      return e;
    if (auto e = table_vector(named + ".operators", plan, E::VT_OPERATORS, [&] { return plan->operators(); })) return e;
    if (auto e = table_vector(named + ".delegates", plan, E::VT_DELEGATES, [&] { return plan->delegates(); })) return e;
    if (auto e = plain_field(named + ".non_const_buffer_sizes", plan, E::VT_NON_CONST_BUFFER_SIZES,
                             [&] { return plan->non_const_buffer_sizes(); }))
      return e;
    return table_vector(named + ".non_const_buffer_device", plan, E::VT_NON_CONST_BUFFER_DEVICE,
                        [&] { return plan->non_const_buffer_device(); });
  }

  const uint8_t* data_;
  size_t size_;
};

}  // namespace

std::string locate_structure_error(const uint8_t* data, size_t size) { return Locator(data, size).locate(); }

}  // namespace etna
