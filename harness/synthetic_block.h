// A synthetic model's `synthetic` block in a suite: which statistics model generates its Q/K/V
// and every knob of it, validated, with the defaults of engine/model/synthetic.h. Absent, the
// block is the published statistics with their defaults.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "model/synthetic.h"
#include "runtime/error.h"

namespace kvbench {

// block: the JSON value (nullptr when absent); path: its JSON path, for errors.
kv::SyntheticConfig parse_synthetic_block(const nlohmann::json* block, const std::string& path, const std::string& file,
                                          const kv::SyntheticPreset& preset);

// The JSON path of a field a synthetic validator named: its dotted names ("retrieval.sink_mass")
// are paths below the block's (`path`/retrieval/sink_mass).
std::string synthetic_error_path(const std::string& path, const kv::InputError& e);

// Every knob the chosen statistics use, with its value (the resolved configuration).
nlohmann::json synthetic_block_json(const kv::SyntheticConfig& config);

}  // namespace kvbench
