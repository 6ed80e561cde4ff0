#include "strict_json.h"

#include <set>
#include <vector>

#include "runtime/error.h"

namespace kvbench {

namespace {

using json = nlohmann::json;

// Where the parser is, as a JSON pointer: the containers it is inside, the key or element it
// is reading in each.
struct Frame {
  bool array = false;
  std::string key;          // an object's current key
  int elements = 0;         // an array's elements begun so far
  std::set<std::string> keys;
};

std::string escaped_key(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

// The innermost array names the element being read (a scalar not yet begun counts as the next).
std::string pointer(const std::vector<Frame>& frames, bool in_scalar) {
  std::string out;
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const Frame& f = frames[i];
    const bool innermost = i + 1 == frames.size();
    if (f.array) {
      out += "/" + std::to_string(innermost && in_scalar ? f.elements : std::max(0, f.elements - 1));
    } else if (!f.key.empty() || !innermost) {
      out += "/" + escaped_key(f.key);
    }
  }
  return out.empty() ? "/" : out;
}

}  // namespace

json parse_strict(const std::string& text, const std::string& file) {
  std::vector<Frame> frames;
  const auto element_begins = [&] {
    if (!frames.empty() && frames.back().array) ++frames.back().elements;
  };
  try {
    return json::parse(text, [&](int /*depth*/, json::parse_event_t event, json& parsed) {
      switch (event) {
        case json::parse_event_t::object_start:
          element_begins();
          frames.push_back({});
          break;
        case json::parse_event_t::array_start:
          element_begins();
          frames.push_back({true, "", 0, {}});
          break;
        case json::parse_event_t::object_end:
        case json::parse_event_t::array_end:
          if (!frames.empty()) frames.pop_back();
          break;
        case json::parse_event_t::key:
          if (!frames.empty()) {
            frames.back().key = parsed.get<std::string>();
            if (!frames.back().keys.insert(frames.back().key).second) throw kv::InputError(file, pointer(frames, true), "duplicate key");
          }
          break;
        case json::parse_event_t::value:
          element_begins();
          break;
      }
      return true;
    });
  } catch (const json::parse_error& e) {
    throw kv::InputError(file, "byte " + std::to_string(e.byte), std::string("malformed JSON: ") + e.what());
  } catch (const json::out_of_range& e) {
    // A number beyond a double's range (1e400): nlohmann reports it while reading the value.
    std::string what = e.what();
    const std::size_t quote = what.find('\'');
    const std::string value = quote != std::string::npos ? what.substr(quote) : what;
    throw kv::InputError(file, pointer(frames, true), "number beyond a double's range (" + value + ")");
  }
}

}  // namespace kvbench
