#include "strict_json.h"

#include <set>
#include <vector>

#include "runtime/error.h"

namespace kvbench {

nlohmann::json parse_strict(const std::string& text, const std::string& file) {
  using json = nlohmann::json;
  std::vector<std::set<std::string>> open;
  try {
    return json::parse(text, [&](int /*depth*/, json::parse_event_t event, json& parsed) {
      if (event == json::parse_event_t::object_start) open.emplace_back();
      if (event == json::parse_event_t::object_end && !open.empty()) open.pop_back();
      if (event == json::parse_event_t::key) {
        const std::string key = parsed.get<std::string>();
        if (!open.empty() && !open.back().insert(key).second) throw kv::InputError(file, key, "duplicate key");
      }
      return true;
    });
  } catch (const json::parse_error& e) {
    throw kv::InputError(file, "byte " + std::to_string(e.byte), std::string("malformed JSON: ") + e.what());
  }
}

}  // namespace kvbench
