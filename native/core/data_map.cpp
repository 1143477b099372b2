#include "data_map.h"

#include <cstring>

#include "generated/flat_tensor_generated.h"

namespace etna {
namespace {

namespace ptd = ::etna::ptd;

constexpr size_t kHeaderOffset = 8;
constexpr uint32_t kMinHeaderLength = 40;
// Fields of the current FlatTensor root table; the older layout had more.
constexpr size_t kCurrentRootFields = 3;

Error invalid(std::string message) {
  return make_error(ErrorCode::kInvalidProgram, "external data: " + std::move(message));
}

uint64_t read_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

Result<std::shared_ptr<const DataMap>> DataMap::load_file(const std::string& path, FileAccess access) {
  auto bytes = load_file_bytes(path, access);
  if (!bytes) return bytes.error();
  auto map = load(std::move(*bytes));
  if (!map) return make_error(map.error().code, path + ": " + map.error().message);
  return map;
}

Status DataMap::parse() {
  const uint8_t* data = bytes_->data();
  const size_t size = bytes_->size();
  if (size < kHeaderOffset + kMinHeaderLength) {
    return invalid("file is " + std::to_string(size) + " bytes, too short for a FlatTensor header");
  }
  if (std::memcmp(data + 4, "FT01", 4) != 0) return invalid("identifier at byte 4 is not 'FT01' (not a .ptd file)");
  if (std::memcmp(data + kHeaderOffset, "FH01", 4) != 0) return invalid("header magic at byte 8 is not 'FH01'");
  uint32_t header_length;
  std::memcpy(&header_length, data + 12, sizeof header_length);
  if (header_length < kMinHeaderLength) {
    return invalid("header_length " + std::to_string(header_length) + " is below the minimum 40");
  }
  const uint64_t flatbuffer_offset = read_u64(data + 16);
  const uint64_t flatbuffer_size = read_u64(data + 24);
  const uint64_t segment_base = read_u64(data + 32);
  const uint64_t segment_data_size = read_u64(data + 40);
  if (flatbuffer_offset > size || flatbuffer_size > size - flatbuffer_offset) {
    return invalid("FlatBuffer region [" + std::to_string(flatbuffer_offset) + ", +" + std::to_string(flatbuffer_size) +
                   ") runs past the end of the " + std::to_string(size) + "-byte file");
  }
  const uint64_t region = flatbuffer_offset + flatbuffer_size;
  if (segment_base < region || segment_base > size || segment_data_size > size - segment_base) {
    return invalid("segment region [" + std::to_string(segment_base) + ", +" + std::to_string(segment_data_size) +
                   ") is outside the file or overlaps the FlatBuffer");
  }
  // The root table's vtable says which layout this is; check it by hand
  // before the verifier so an old file gets a clear message.
  if (region < 8 || region > FLATBUFFERS_MAX_BUFFER_SIZE) return invalid("FlatBuffer region has an invalid size");
  const uint32_t root = flatbuffers::ReadScalar<uint32_t>(data);
  if (root < 8 || root > region - 4) return invalid("root table offset " + std::to_string(root) + " is out of range");
  const int32_t vtable_delta = flatbuffers::ReadScalar<int32_t>(data + root);
  const int64_t vtable = static_cast<int64_t>(root) - vtable_delta;
  if (vtable < 0 || static_cast<uint64_t>(vtable) + 4 > region) return invalid("root vtable is out of range");
  const uint16_t vtable_length = flatbuffers::ReadScalar<uint16_t>(data + vtable);
  if (vtable_length >= 4 && (vtable_length - 4u) / 2 > kCurrentRootFields) {
    return invalid(
        "this .ptd uses the FlatTensor layout written before mid-2025, which etna does not read; "
        "re-export it with a current ExecuTorch");
  }
  flatbuffers::Verifier verifier(data, static_cast<size_t>(region), 64, 1'000'000);
  if (!verifier.VerifyBuffer<ptd::FlatTensor>("FT01")) return invalid("malformed FlatBuffer in the header region");
  const ptd::FlatTensor* root_table = ptd::GetFlatTensor(data);

  std::vector<ByteSpan> segments;
  if (const auto* list = root_table->segments()) {
    for (uint32_t i = 0; i < list->size(); ++i) {
      const uint64_t offset = list->Get(i)->offset();
      const uint64_t length = list->Get(i)->size();
      if (offset > segment_data_size || length > segment_data_size - offset) {
        return invalid("segments[" + std::to_string(i) + "] [" + std::to_string(offset) + ", +" +
                       std::to_string(length) + ") runs past the segment data (" + std::to_string(segment_data_size) +
                       " bytes)");
      }
      segments.push_back(ByteSpan{data + segment_base + offset, static_cast<size_t>(length)});
    }
  }
  segment_count_ = segments.size();
  if (const auto* entries = root_table->named_data()) {
    for (uint32_t i = 0; i < entries->size(); ++i) {
      const ptd::NamedData* entry = entries->Get(i);
      if (!entry->key()) return invalid("named_data[" + std::to_string(i) + "] has no key");
      if (entry->segment_index() >= segments.size()) {
        return invalid("named_data[" + std::to_string(i) + "] ('" + entry->key()->str() + "'): segment_index " +
                       std::to_string(entry->segment_index()) + " is out of range");
      }
      NamedBlob blob;
      blob.bytes = segments[entry->segment_index()];
      if (const ptd::TensorLayout* layout = entry->tensor_layout()) {
        blob.has_layout = true;
        blob.scalar_type = layout->scalar_type();
        if (layout->sizes()) blob.sizes.assign(layout->sizes()->begin(), layout->sizes()->end());
        if (layout->dim_order()) blob.dim_order.assign(layout->dim_order()->begin(), layout->dim_order()->end());
      }
      blobs_.emplace_back(entry->key()->str(), std::move(blob));
    }
  }
  return Status::ok();
}

std::optional<NamedBlob> DataMap::find(std::string_view key) const {
  for (const auto& [name, blob] : blobs_) {
    if (name == key) return blob;
  }
  return std::nullopt;
}

Status check_unchanged(const Program& program, const DataMap* external_data) {
  ETNA_TRY(program.check_unchanged());
  return external_data != nullptr ? external_data->check_unchanged() : Status::ok();
}

void release_pages_read_at_load(const Program& program, const DataMap* external_data) {
  program.release_file_pages();
  if (external_data != nullptr) external_data->release_pages();
}

}  // namespace etna
