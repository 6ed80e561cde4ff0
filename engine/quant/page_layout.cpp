#include "quant/page_layout.h"

#include <string>

#include "runtime/error.h"

namespace kv {

namespace {

std::size_t round_up(std::size_t value, std::size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

std::size_t row_bytes(Format format, int head_dim) {
  return static_cast<std::size_t>(head_dim) * static_cast<std::size_t>(format_bits(format)) / 8;
}

}  // namespace

std::string v_group_choices(int head_dim) {
  std::string choices;
  for (int g = 8; g <= head_dim; g += 8) {
    if (head_dim % g == 0) choices += (choices.empty() ? "" : ", ") + std::to_string(g);
  }
  return choices;
}

namespace {

void validate(const PageLayoutSpec& spec) {
  const std::string where = "page layout";
  if (spec.page_tokens < kMinPageTokens || spec.page_tokens > kMaxPageTokens) {
    throw InputError(where, "page_tokens",
                     std::to_string(spec.page_tokens) + " is outside " + std::to_string(kMinPageTokens) + ".." +
                         std::to_string(kMaxPageTokens));
  }
  if (spec.head_dim < 8 || spec.head_dim > 512 || spec.head_dim % 8 != 0) {
    throw InputError(where, "head_dim",
                     std::to_string(spec.head_dim) + " must be a multiple of 8 in 8..512");
  }
  // A V group is whole 8-channel blocks (every kernel path steps through a head 8 channels at a
  // time or more) and divides the head; one wider than the head is the whole head.
  if (spec.v_group < 8 || spec.v_group % 8 != 0) {
    throw InputError(where, "v_group", std::to_string(spec.v_group) + " must be a positive multiple of 8");
  }
  const int group = spec.v_group < spec.head_dim ? spec.v_group : spec.head_dim;
  if (spec.head_dim % group != 0) {
    throw InputError(where, "v_group",
                     std::to_string(spec.v_group) + " does not divide head_dim " + std::to_string(spec.head_dim) +
                         " (V groups that do: " + v_group_choices(spec.head_dim) + ")");
  }
}

}  // namespace

PageLayout PageLayout::make(const PageLayoutSpec& spec) {
  validate(spec);
  PageLayout layout;
  layout.page_tokens = spec.page_tokens;
  layout.head_dim = spec.head_dim;
  layout.v_group = spec.v_group < spec.head_dim ? spec.v_group : spec.head_dim;
  layout.k_format = spec.k_format;
  layout.v_format = spec.v_format;

  const auto tokens = static_cast<std::size_t>(spec.page_tokens);
  const auto dim = static_cast<std::size_t>(spec.head_dim);
  std::size_t offset = sizeof(PageHeader);
  auto region = [&offset](std::size_t bytes) {
    const std::size_t start = offset;
    offset = round_up(offset + bytes, kPageAlign);
    return start;
  };

  layout.k_data = region(tokens * row_bytes(spec.k_format, spec.head_dim));
  layout.v_data = region(tokens * row_bytes(spec.v_format, spec.head_dim));
  if (is_integer_format(spec.k_format)) {
    layout.k_scale = region(dim * sizeof(float));
    layout.k_zero = region(dim * sizeof(float));
  } else if (spec.k_format == Format::FP8) {
    layout.k_scale = region(sizeof(float));
  }
  if (is_integer_format(spec.v_format)) {
    layout.v_scale = region(tokens * static_cast<std::size_t>(layout.v_groups()) * sizeof(std::uint16_t));
  } else if (spec.v_format == Format::FP8) {
    layout.v_scale = region(sizeof(float));
  }
  layout.key_min = region(dim * sizeof(std::uint16_t));
  layout.key_max = region(dim * sizeof(std::uint16_t));
  layout.content_bytes = offset;
  layout.bytes = round_up(offset, spec.pad_to_4k ? kDirectIoAlign : kPageAlign);
  return layout;
}

std::size_t PageLayout::k_row_bytes() const { return row_bytes(k_format, head_dim); }
std::size_t PageLayout::v_row_bytes() const { return row_bytes(v_format, head_dim); }

std::size_t PageLayout::k_read_bytes(int tokens) const {
  std::size_t bytes = static_cast<std::size_t>(tokens) * k_row_bytes();
  if (is_integer_format(k_format)) bytes += 2 * static_cast<std::size_t>(head_dim) * sizeof(float);
  if (k_format == Format::FP8) bytes += sizeof(float);
  return bytes;
}

std::size_t PageLayout::v_read_bytes(int tokens) const {
  std::size_t bytes = static_cast<std::size_t>(tokens) * v_row_bytes();
  if (is_integer_format(v_format)) {
    bytes += static_cast<std::size_t>(tokens) * static_cast<std::size_t>(v_groups()) * sizeof(std::uint16_t);
  }
  if (v_format == Format::FP8) bytes += sizeof(float);
  return bytes;
}

}  // namespace kv
