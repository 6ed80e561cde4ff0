// SoC profiles: configs/socs/*.json compiled in, a database's own host profile (written by
// `kvbench calibrate`), parsing with errors that name the file, the JSON path and the reason,
// and writing a profile back as JSON.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "soc/soc_profile.h"

namespace kvbench {

// (name, JSON) of every compiled-in profile.
const std::vector<std::pair<std::string, std::string>>& builtin_soc_profiles();
bool is_builtin_soc(const std::string& name);
// The compiled-in profiles' names, comma-separated, for a message; "host" left out unless asked.
std::string builtin_soc_names(bool with_host = true);

// Parses and validates a profile. Throws kv::InputError(file, JSON path, reason) for a missing
// or unknown field, a value without unit and source or derivation, a wrong unit, a
// non-positive rate or capacity, or an engine the schedule names but the profile lacks.
kv::soc::SocProfile parse_soc_profile(const std::string& text, const std::string& file);

// The host profile a database uses: socs/host.json in its store_local_dir (the file's directory,
// kvbench-results/ for a server) when `kvbench calibrate` wrote one, else the compiled-in
// fallback. Other names are the compiled-in profiles.
std::string host_profile_path(const std::string& db_path);
kv::soc::SocProfile load_soc_profile(const std::string& name, const std::string& db_path);

// The profile as JSON text in the schema parse_soc_profile reads.
std::string soc_profile_json(const kv::soc::SocProfile& profile);

}  // namespace kvbench
