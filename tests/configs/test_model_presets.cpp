#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>

#include "model/synthetic_presets.h"

using namespace kv;

TEST_CASE("configs/models JSON presets equal the built-in presets", "[model]") {
  for (const SyntheticPreset& p : synthetic_presets()) {
    const std::string path = std::string(KVBENCH_SOURCE_DIR) + "/configs/models/" + p.name + ".json";
    std::ifstream in(path);
    REQUIRE(in.good());
    const nlohmann::json j = nlohmann::json::parse(in);
    CAPTURE(path);
    CHECK(j.at("name") == p.name);
    CHECK(j.at("layers") == p.layers);
    CHECK(j.at("q_heads") == p.q_heads);
    CHECK(j.at("kv_heads") == p.kv_heads);
    CHECK(j.at("head_dim") == p.head_dim);
    CHECK(j.at("rope_theta").get<double>() == p.rope_theta);
    CHECK(j.at("max_seq") == p.max_seq);
    CHECK(j.at("max_seq_long") == p.max_seq_long);
    CHECK(j.at("hidden_size") == p.hidden_size);
    CHECK(j.at("intermediate_size") == p.intermediate_size);
    CHECK(j.at("vocab_size") == p.vocab_size);
    CHECK(j.at("tied_embeddings") == p.tied_embeddings);
    CHECK(j.at("weight_bits") == p.weight_bits);
    CHECK(j.at("weight_group") == p.weight_group);
    CHECK(j.at("source").get<std::string>().find(p.source.substr(0, p.source.find(' '))) != std::string::npos);
  }
}
