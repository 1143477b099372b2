// DynamicLinear's packed weights (dynamic_linear.h): where each code and
// scale lives, the view the dot-product kernels read, and the packing that
// writes them (dynamic_linear_packing.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/xnnpack/dot_path.h"
#include "backends/xnnpack/graph.h"

namespace etna::xnn::dynamic_linear_detail {

constexpr size_t kChunk = 64;       // per-channel layouts pad input channels to a multiple of this
constexpr size_t kColumns = 8;      // output channels a register holds: a group
constexpr size_t kPanelGroups = 4;  // groups stored as one run of memory: a panel
constexpr size_t kPanelChannels = kPanelGroups * kColumns;
constexpr size_t kQuad = 4;      // input channels of one channel side by side
constexpr int kFourBitZero = 8;  // 4-bit codes store value + 8, as the exporter writes them

inline size_t round_up(size_t value, size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

struct CodePlace {
  size_t byte;
  bool high_nibble;
};

// Where the packed weights put each byte. Channels come in panels of 32 (four
// groups of 8), and a panel is one run of memory, block after block of input
// channels: each block holds the four groups' codes, then, in blockwise
// layouts, the block's 32 bf16 scales. A single row (decode) so reads its
// weights as one sequential stream. In a standalone 4-bit GEMV over 57 MB on
// one core, 12 streams (four groups' codes, scales and weight sums) read
// 26 GB/s and one stream 36 GB/s, the core's plain read speed.
//
// Within a group's block, each quad t of input channels (4t..4t+3) is 32
// bytes: channel j's four codes at bytes 4j..4j+3, so one register times a
// broadcast of 4 activations gives all 8 channels. 8-bit codes are int8
// weights; 4-bit codes are weight + 8, quads 2u and 2u + 1 sharing 32 bytes
// (low and high nibbles). Per-channel layouts are one block of all the
// (padded) input channels, whose scales are the channels' own.
struct PanelLayout {
  size_t block_length = 0;  // input channels per block
  size_t blocks = 0;
  bool four_bit = false;
  bool blockwise = false;
  size_t quads_per_block = 0;    // quads of a block, in whole pairs: the vector tiles read two a step
  size_t group_block_bytes = 0;  // one group's codes for one block
  size_t block_bytes = 0;        // a panel's codes and scales for one block
  size_t panel_bytes = 0;

  PanelLayout(size_t length, size_t block_count, bool four, bool block_scales)
      : block_length(length), blocks(block_count), four_bit(four), blockwise(block_scales) {
    quads_per_block = round_up(length, 2 * kQuad) / kQuad;
    group_block_bytes = quads_per_block * (four ? kQuad / 2 : kQuad) * kColumns;
    block_bytes = kPanelGroups * group_block_bytes + (blockwise ? kPanelChannels * sizeof(uint16_t) : 0);
    panel_bytes = blocks * block_bytes;
  }
  // Offsets from the first panel: group g's codes for block b, and its 8 scales.
  size_t group_block(size_t group, size_t block) const {
    return group / kPanelGroups * panel_bytes + block * block_bytes + group % kPanelGroups * group_block_bytes;
  }
  size_t block_scales(size_t group, size_t block) const {
    return group / kPanelGroups * panel_bytes + block * block_bytes + kPanelGroups * group_block_bytes +
           group % kPanelGroups * kColumns * sizeof(uint16_t);
  }
  // Where the code of (channel n, input k) lives.
  CodePlace code_place(size_t n, size_t k) const {
    const size_t within = k % block_length, quad = within / kQuad;
    return {group_block(n / kColumns, k / block_length) + (four_bit ? quad / 2 : quad) * 32 + n % kColumns * kQuad +
                within % kQuad,
            four_bit && quad % 2 == 1};
  }
};

// What the dot-product paths read: the packed weights of some panels.
struct PackedView {
  const uint8_t* codes;  // the first panel
  PanelLayout layout;
  size_t padded_out;  // channels: whole panels
  // Per-channel layouts: each channel's scale and signed weights summed. The
  // zero point comes off in integers, as in XNNPACK's qc8w and qc4w kernels,
  // so a row of zero-point codes (an all-zero input) sums to exactly 0.
  const float* channel_scales;
  const int32_t* weight_sums;
  // Blockwise layouts: per channel, the blocks' scales times their weight
  // sums, summed in block order with fused multiply-adds, which the zero point
  // multiplies once after the blocks, as in XNNPACK's qb4w kernels. Per-block
  // sums would add a fifth to the bytes a decode step reads.
  const float* scaled_sums;
};

// What packing reads: the filter as the exporter wrote it ([N, K], or [K, N]
// when transposed; 4-bit rows as weight + 8, two a byte, the even element in
// the low nibble, each row padded to whole bytes) and its scales.
struct PackSource {
  const uint8_t* codes;
  const ScaleList& scales;
  size_t out_channels, in_channels, row_bytes;
  bool transposed;
};

// Where packing writes (DynamicLinear's arrays; those a layout lacks are null).
struct PackTarget {
  uint8_t* codes;
  float* channel_scales;
  int32_t* weight_sums;
  float* scaled_sums;
};

// Packs panels [first, end) (codes, scales and per-channel terms, in block
// order per channel) with the build `path`'s CPU runs. False when a blockwise
// scale is not a bf16 value (the payload reader makes every one of them bf16,
// rounding fp32 ones as upstream does, so their high halves hold them).
bool pack_panels(DotPath path, const PanelLayout& layout, const PackSource& from, const PackTarget& to, size_t first,
                 size_t end);

}  // namespace etna::xnn::dynamic_linear_detail
