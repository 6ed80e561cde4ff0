#include "synthetic_block.h"

#include <algorithm>

#include "json_fields.h"

namespace kvbench {

namespace {

using json = nlohmann::json;
using json_fields::fail;
using json_fields::Fields;
using json_fields::shortest;

// The float knobs, each read and resolved through the same table.
template <class Owner>
struct FloatKnob {
  const char* name;
  float Owner::*field;
};

constexpr FloatKnob<kv::SyntheticConfig> kCommon[] = {{"outlier_gain_min", &kv::SyntheticConfig::outlier_gain_min},
                                                      {"outlier_gain_max", &kv::SyntheticConfig::outlier_gain_max},
                                                      {"query_similarity", &kv::SyntheticConfig::query_similarity},
                                                      {"head_variation", &kv::SyntheticConfig::head_variation}};
constexpr FloatKnob<kv::SyntheticConfig> kUniform[] = {{"sink_mass", &kv::SyntheticConfig::sink_mass},
                                                       {"window_mass", &kv::SyntheticConfig::window_mass},
                                                       {"heavy_fraction", &kv::SyntheticConfig::heavy_fraction},
                                                       {"heavy_mass", &kv::SyntheticConfig::heavy_mass},
                                                       {"needle_strength", &kv::SyntheticConfig::needle_strength}};
constexpr FloatKnob<kv::HeadMix> kMix[] = {{"streaming_share", &kv::HeadMix::streaming_share},
                                           {"retrieval_share", &kv::HeadMix::retrieval_share},
                                           {"diffuse_share", &kv::HeadMix::diffuse_share},
                                           {"sink_concentration", &kv::HeadMix::sink_concentration},
                                           {"group_shared_spans", &kv::HeadMix::group_shared_spans},
                                           {"span_median", &kv::HeadMix::span_median},
                                           {"span_sigma", &kv::HeadMix::span_sigma},
                                           {"span_zipf_ranks", &kv::HeadMix::span_zipf_ranks},
                                           {"token_jitter", &kv::HeadMix::token_jitter},
                                           {"step_sigma", &kv::HeadMix::step_sigma},
                                           {"span_turnover", &kv::HeadMix::span_turnover},
                                           {"turnover_sigma", &kv::HeadMix::turnover_sigma},
                                           {"adjacent_layer_share", &kv::HeadMix::adjacent_layer_share},
                                           {"far_layer_share", &kv::HeadMix::far_layer_share},
                                           {"needle_mass", &kv::HeadMix::needle_mass},
                                           {"image_suppression", &kv::HeadMix::image_suppression}};
constexpr FloatKnob<kv::HeadTypeMasses> kType[] = {{"sink_mass", &kv::HeadTypeMasses::sink},
                                                   {"window_mass", &kv::HeadTypeMasses::window},
                                                   {"span_mass", &kv::HeadTypeMasses::span},
                                                   {"span_coverage", &kv::HeadTypeMasses::coverage}};
struct TypeBlock {
  const char* name;
  kv::HeadTypeMasses kv::HeadMix::*masses;
};
constexpr TypeBlock kTypes[] = {
    {"streaming", &kv::HeadMix::streaming}, {"retrieval", &kv::HeadMix::retrieval}, {"diffuse", &kv::HeadMix::diffuse}};

template <class Owner, std::size_t N>
void read(Fields& f, const FloatKnob<Owner> (&knobs)[N], Owner& owner) {
  for (const auto& knob : knobs) owner.*knob.field = static_cast<float>(f.number(knob.name, owner.*knob.field));
}

template <class Owner, std::size_t N>
void write(json& j, const FloatKnob<Owner> (&knobs)[N], const Owner& owner) {
  for (const auto& knob : knobs) j[knob.name] = shortest(owner.*knob.field);
}

}  // namespace

std::string synthetic_error_path(const std::string& path, const kv::InputError& e) {
  std::string field = e.field();
  std::replace(field.begin(), field.end(), '.', '/');
  return path + "/" + field;
}

kv::SyntheticConfig parse_synthetic_block(const json* block, const std::string& path, const std::string& file,
                                          const kv::SyntheticPreset& preset) {
  kv::SyntheticConfig c;
  if (block == nullptr) return c;
  Fields f(*block, path, file);
  const std::string statistics = f.string("statistics", "published");
  if (statistics == "uniform-heads") {
    c.statistics = kv::SyntheticStatistics::UniformHeads;
  } else if (statistics != "published") {
    fail(file, f.at("statistics"), "'" + statistics + "' is not one of published, uniform-heads");
  }
  const bool uniform = c.statistics == kv::SyntheticStatistics::UniformHeads;
  c.sinks = static_cast<int>(f.integer("sinks", c.sinks, 1, 1 << 16));
  c.window = static_cast<int>(f.integer("window", c.window, 1, 1 << 20));
  c.outlier_channels = static_cast<int>(f.integer("outlier_channels", c.outlier_channels, 0, 512));
  read(f, kCommon, c);
  if (uniform) {
    read(f, kUniform, c);
  } else {
    for (const auto& knob : kUniform) {
      if (f.has(knob.name)) fail(file, f.at(knob.name), "is a uniform-heads knob; the published statistics set masses per head type");
    }
    kv::HeadMix& m = c.mix;
    read(f, kMix, m);
    m.dense_layers = static_cast<int>(f.integer("dense_layers", m.dense_layers, 0, 1024));
    m.span_max = static_cast<int>(f.integer("span_max", m.span_max, 1, 1 << 20));
    m.needle_tokens = static_cast<int>(f.integer("needle_tokens", m.needle_tokens, 1, 1 << 20));
    m.image_region = static_cast<int>(f.integer("image_region", m.image_region, 1, 1 << 20));
    for (const TypeBlock& type : kTypes) {
      if (const json* masses = f.child(type.name)) {
        Fields t(*masses, f.at(type.name), file);
        read(t, kType, m.*type.masses);
        t.done();
      }
    }
  }
  f.done();
  try {
    kv::SyntheticConfig check = c;
    if (uniform) check.calibration_ctx = std::max(check.calibration_ctx, check.sinks + check.window + 16);
    kv::validate_synthetic_config(check, preset);
  } catch (const kv::InputError& e) {
    fail(file, synthetic_error_path(path, e), e.reason());
  }
  return c;
}

json synthetic_block_json(const kv::SyntheticConfig& c) {
  json j;
  j["statistics"] = std::string(kv::statistics_name(c.statistics));
  j["sinks"] = c.sinks;
  j["window"] = c.window;
  j["outlier_channels"] = c.outlier_channels;
  write(j, kCommon, c);
  if (c.statistics == kv::SyntheticStatistics::UniformHeads) {
    write(j, kUniform, c);
    return j;
  }
  const kv::HeadMix& m = c.mix;
  write(j, kMix, m);
  j["dense_layers"] = m.dense_layers;
  j["span_max"] = m.span_max;
  j["needle_tokens"] = m.needle_tokens;
  j["image_region"] = m.image_region;
  for (const TypeBlock& type : kTypes) write(j[type.name], kType, m.*type.masses);
  return j;
}

}  // namespace kvbench
