// The byte layout of one KV page: `page_tokens` tokens of K and V for one (sequence, layer,
// kv head). Kernels, quantizers, the pool and checksums all read this struct and nothing
// else; it only does offset arithmetic.
//
//   offset 0       PageHeader (64 B): checksum, version, tokens, formats
//   k_data         K payload, token-major: token t's row is k_row_bytes() bytes
//   v_data         V payload, token-major, v_row_bytes() per token
//   k_scale        q8/q4/q2: f32[head_dim] per-channel scale; fp8: f32[1]; else empty
//   k_zero         q8/q4/q2: f32[head_dim] per-channel offset (k = zero + code * scale)
//   v_scale        q8/q4/q2: f16[page_tokens][v_groups] per token group; fp8: f32[1]
//   key_min        f16[head_dim], rounded down: min over the page's stored (dequantized) keys
//   key_max        f16[head_dim], rounded up: max over the page's stored keys
//
// Every region starts at a multiple of 64 bytes; the page size is a multiple of 64, or of
// 4096 with pad_to_4k so that a direct-I/O tier can move pages as they are.
//
// Bit packing of integer codes (unsigned, 0..2^bits-1), channel c of a token row:
//   q8: byte c;  q4: in full blocks of 64 channels, byte j of the block holds channel j (low
//   nibble) and j + 32 (high), after the last full block byte c/2, low nibble for even c
//   (codes.h);  q2: byte c/4, bits 2*(c%4)..+1.
// Decoding: K = zero[c] + code * scale[c] (asymmetric, per channel over the page's tokens);
//           V = (code - max_code/2) * scale[t][g] (symmetric midrise, per token and group).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "quant/format.h"

namespace kv {

inline constexpr std::size_t kPageAlign = 64;
inline constexpr std::size_t kDirectIoAlign = 4096;
inline constexpr int kMinPageTokens = 16;
inline constexpr int kMaxPageTokens = 256;
inline constexpr int kDefaultPageTokens = 64;

struct PageHeader {
  std::uint64_t checksum;  // xxh64 of bytes [sizeof(PageHeader), page bytes); 0 until sealed
  std::uint32_t version;   // even when stable, odd while being rewritten
  std::uint16_t tokens;    // valid tokens in the page
  std::uint8_t k_format;
  std::uint8_t v_format;
  std::uint8_t reserved[48];
};
static_assert(sizeof(PageHeader) == 64, "PageHeader is one cache line");

struct PageLayoutSpec {
  int page_tokens = kDefaultPageTokens;
  int head_dim = 128;
  Format k_format = Format::F16;
  Format v_format = Format::F16;
  int v_group = 32;  // channels per V scale group: a multiple of 8 dividing head_dim (clamped to it)
  bool pad_to_4k = false;
};

// The V groups a head of `head_dim` channels takes, for error messages: "8, 16, 24, 48".
std::string v_group_choices(int head_dim);

struct PageLayout {
  int page_tokens = 0;
  int head_dim = 0;
  int v_group = 0;  // after clamping to head_dim
  Format k_format = Format::F32;
  Format v_format = Format::F32;

  std::size_t k_data = 0;
  std::size_t v_data = 0;
  std::size_t k_scale = 0;
  std::size_t k_zero = 0;
  std::size_t v_scale = 0;
  std::size_t key_min = 0;
  std::size_t key_max = 0;
  std::size_t bytes = 0;          // whole page, padded
  std::size_t content_bytes = 0;  // header plus regions, before padding

  // Validates the spec (throws InputError naming the field) and computes offsets.
  static PageLayout make(const PageLayoutSpec& spec);

  int v_groups() const { return head_dim / v_group; }
  std::size_t k_row_bytes() const;
  std::size_t v_row_bytes() const;
  // Bytes of K (or V) that attention reads for `tokens` tokens: payload rows plus the
  // scales/offsets the format needs; excludes header and Quest metadata.
  std::size_t k_read_bytes(int tokens) const;
  std::size_t v_read_bytes(int tokens) const;
  std::size_t metadata_bytes() const { return 2 * static_cast<std::size_t>(head_dim) * sizeof(std::uint16_t); }

  // Typed accessors: offset arithmetic only.
  static PageHeader* header(std::byte* page) { return reinterpret_cast<PageHeader*>(page); }
  static const PageHeader* header(const std::byte* page) { return reinterpret_cast<const PageHeader*>(page); }
  template <typename T>
  T* at(std::byte* page, std::size_t offset) const { return reinterpret_cast<T*>(page + offset); }
  template <typename T>
  const T* at(const std::byte* page, std::size_t offset) const {
    return reinterpret_cast<const T*>(page + offset);
  }
  const std::uint8_t* k_row(const std::byte* page, int token) const {
    return at<std::uint8_t>(page, k_data) + static_cast<std::size_t>(token) * k_row_bytes();
  }
  const std::uint8_t* v_row(const std::byte* page, int token) const {
    return at<std::uint8_t>(page, v_data) + static_cast<std::size_t>(token) * v_row_bytes();
  }
};

// A page as kernels see it: its layout, its bytes and how many of its tokens are valid.
struct PageView {
  const PageLayout* layout = nullptr;
  const std::byte* data = nullptr;
  int tokens = 0;
  // Optional contiguous copy of the page's key_min then key_max (f16[2][head_dim]): selection
  // reads it instead of the page's own metadata, which sits in cold memory page by page.
  const std::uint16_t* key_bounds = nullptr;
  // Absolute position of the page's first token; -1: follows from the pages before it (a list
  // that is not a subset).
  int first_token = -1;
  // Optional f16[2][head_dim]: the page's mean key then mean value (compensation).
  const std::uint16_t* means = nullptr;
  // Optional prefetch hint: the page a kernel will be given next (its bytes are requested a few
  // cache lines at a time while this page is computed). Null: none.
  const PageView* next = nullptr;

  const std::uint16_t* key_min() const {
    return key_bounds != nullptr ? key_bounds : layout->at<std::uint16_t>(data, layout->key_min);
  }
  const std::uint16_t* key_max() const {
    return key_bounds != nullptr ? key_bounds + layout->head_dim : layout->at<std::uint16_t>(data, layout->key_max);
  }
};

}  // namespace kv
