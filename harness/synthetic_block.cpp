#include "synthetic_block.h"

#include "json_fields.h"

namespace kvbench {

namespace {

using json = nlohmann::json;
using json_fields::fail;
using json_fields::Fields;
using json_fields::shortest;

const char* const kUniformOnly[] = {"sink_mass", "window_mass", "heavy_fraction", "heavy_mass", "needle_strength"};

void read_type(Fields& f, const char* name, kv::HeadTypeMasses& t, const std::string& file) {
  const json* block = f.child(name);
  if (block == nullptr) return;
  Fields m(*block, f.at(name), file);
  t.sink = static_cast<float>(m.number("sink_mass", t.sink));
  t.window = static_cast<float>(m.number("window_mass", t.window));
  t.span = static_cast<float>(m.number("span_mass", t.span));
  t.coverage = static_cast<float>(m.number("span_coverage", t.coverage));
  m.done();
}

json type_json(const kv::HeadTypeMasses& t) {
  return {{"sink_mass", shortest(t.sink)}, {"window_mass", shortest(t.window)}, {"span_mass", shortest(t.span)}, {"span_coverage", shortest(t.coverage)}};
}

}  // namespace

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
  c.outlier_gain_min = static_cast<float>(f.number("outlier_gain_min", c.outlier_gain_min));
  c.outlier_gain_max = static_cast<float>(f.number("outlier_gain_max", c.outlier_gain_max));
  c.query_similarity = static_cast<float>(f.number("query_similarity", c.query_similarity));
  c.head_variation = static_cast<float>(f.number("head_variation", c.head_variation));
  if (uniform) {
    c.sink_mass = static_cast<float>(f.number("sink_mass", c.sink_mass));
    c.window_mass = static_cast<float>(f.number("window_mass", c.window_mass));
    c.heavy_fraction = static_cast<float>(f.number("heavy_fraction", c.heavy_fraction));
    c.heavy_mass = static_cast<float>(f.number("heavy_mass", c.heavy_mass));
    c.needle_strength = static_cast<float>(f.number("needle_strength", c.needle_strength));
  } else {
    for (const char* name : kUniformOnly) {
      if (f.has(name)) fail(file, f.at(name), "is a uniform-heads knob; the published statistics set masses per head type");
    }
    kv::HeadMix& m = c.mix;
    m.streaming_share = static_cast<float>(f.number("streaming_share", m.streaming_share));
    m.retrieval_share = static_cast<float>(f.number("retrieval_share", m.retrieval_share));
    m.diffuse_share = static_cast<float>(f.number("diffuse_share", m.diffuse_share));
    m.dense_layers = static_cast<int>(f.integer("dense_layers", m.dense_layers, 0, 1024));
    read_type(f, "streaming", m.streaming, file);
    read_type(f, "retrieval", m.retrieval, file);
    read_type(f, "diffuse", m.diffuse, file);
    m.sink_concentration = static_cast<float>(f.number("sink_concentration", m.sink_concentration));
    m.group_shared_spans = static_cast<float>(f.number("group_shared_spans", m.group_shared_spans));
    m.span_median = static_cast<float>(f.number("span_median", m.span_median));
    m.span_sigma = static_cast<float>(f.number("span_sigma", m.span_sigma));
    m.span_max = static_cast<int>(f.integer("span_max", m.span_max, 1, 1 << 20));
    m.span_zipf_ranks = static_cast<float>(f.number("span_zipf_ranks", m.span_zipf_ranks));
    m.token_jitter = static_cast<float>(f.number("token_jitter", m.token_jitter));
    m.step_sigma = static_cast<float>(f.number("step_sigma", m.step_sigma));
    m.span_turnover = static_cast<float>(f.number("span_turnover", m.span_turnover));
    m.turnover_sigma = static_cast<float>(f.number("turnover_sigma", m.turnover_sigma));
    m.adjacent_layer_share = static_cast<float>(f.number("adjacent_layer_share", m.adjacent_layer_share));
    m.far_layer_share = static_cast<float>(f.number("far_layer_share", m.far_layer_share));
    m.needle_mass = static_cast<float>(f.number("needle_mass", m.needle_mass));
    m.needle_tokens = static_cast<int>(f.integer("needle_tokens", m.needle_tokens, 1, 1 << 20));
    m.image_region = static_cast<int>(f.integer("image_region", m.image_region, 1, 1 << 20));
    m.image_suppression = static_cast<float>(f.number("image_suppression", m.image_suppression));
  }
  f.done();
  // The engine's validator names the field; dotted names ("retrieval.sink_mass") are JSON paths.
  try {
    kv::SyntheticConfig check = c;
    if (uniform) check.calibration_ctx = std::max(check.calibration_ctx, check.sinks + check.window + 16);
    kv::validate_synthetic_config(check, preset);
  } catch (const kv::InputError& e) {
    std::string field = e.field();
    for (char& ch : field) ch = ch == '.' ? '/' : ch;
    fail(file, path + "/" + field, e.reason());
  }
  return c;
}

json synthetic_block_json(const kv::SyntheticConfig& c) {
  json j;
  j["statistics"] = std::string(kv::statistics_name(c.statistics));
  j["sinks"] = c.sinks;
  j["window"] = c.window;
  j["outlier_channels"] = c.outlier_channels;
  j["outlier_gain_min"] = shortest(c.outlier_gain_min);
  j["outlier_gain_max"] = shortest(c.outlier_gain_max);
  j["query_similarity"] = shortest(c.query_similarity);
  j["head_variation"] = shortest(c.head_variation);
  if (c.statistics == kv::SyntheticStatistics::UniformHeads) {
    j["sink_mass"] = shortest(c.sink_mass);
    j["window_mass"] = shortest(c.window_mass);
    j["heavy_fraction"] = shortest(c.heavy_fraction);
    j["heavy_mass"] = shortest(c.heavy_mass);
    j["needle_strength"] = shortest(c.needle_strength);
    return j;
  }
  const kv::HeadMix& m = c.mix;
  j["streaming_share"] = shortest(m.streaming_share);
  j["retrieval_share"] = shortest(m.retrieval_share);
  j["diffuse_share"] = shortest(m.diffuse_share);
  j["dense_layers"] = m.dense_layers;
  j["streaming"] = type_json(m.streaming);
  j["retrieval"] = type_json(m.retrieval);
  j["diffuse"] = type_json(m.diffuse);
  j["sink_concentration"] = shortest(m.sink_concentration);
  j["group_shared_spans"] = shortest(m.group_shared_spans);
  j["span_median"] = shortest(m.span_median);
  j["span_sigma"] = shortest(m.span_sigma);
  j["span_max"] = m.span_max;
  j["span_zipf_ranks"] = shortest(m.span_zipf_ranks);
  j["token_jitter"] = shortest(m.token_jitter);
  j["step_sigma"] = shortest(m.step_sigma);
  j["span_turnover"] = shortest(m.span_turnover);
  j["turnover_sigma"] = shortest(m.turnover_sigma);
  j["adjacent_layer_share"] = shortest(m.adjacent_layer_share);
  j["far_layer_share"] = shortest(m.far_layer_share);
  j["needle_mass"] = shortest(m.needle_mass);
  j["needle_tokens"] = m.needle_tokens;
  j["image_region"] = m.image_region;
  j["image_suppression"] = shortest(m.image_suppression);
  return j;
}

}  // namespace kvbench
