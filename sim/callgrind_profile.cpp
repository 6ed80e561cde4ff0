#include "callgrind_profile.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

#include "runtime/error.h"

namespace kvbench::sim {

namespace {

std::vector<std::string_view> words(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t at = 0;
  while (at < text.size()) {
    while (at < text.size() && (text[at] == ' ' || text[at] == '\t')) ++at;
    const std::size_t begin = at;
    while (at < text.size() && text[at] != ' ' && text[at] != '\t') ++at;
    if (at > begin) out.push_back(text.substr(begin, at - begin));
  }
  return out;
}

// A cost line starts with a position: a number, a hexadecimal address, or a relative one.
bool is_cost_line(std::string_view line) {
  const char c = line.empty() ? '\0' : line.front();
  return (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '*';
}

class Parser {
 public:
  Parser(std::string where) : where_(std::move(where)) {}

  void line(std::string_view text) {
    ++number_;
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    if (text.empty() || text.front() == '#') return;
    if (is_cost_line(text)) return cost(text);
    const std::size_t eq = text.find('=');
    const std::size_t colon = text.find(':');
    if (eq != std::string_view::npos && (colon == std::string_view::npos || eq < colon)) return spec(text.substr(0, eq), text.substr(eq + 1));
    if (colon != std::string_view::npos) return header(text.substr(0, colon), text.substr(colon + 1));
    fail("not a callgrind profile line: '" + std::string(text.substr(0, 60)) + "'");
  }

  CallgrindProfile finish() {
    if (p_.events.empty()) fail("no `events:` line: not a callgrind profile");
    if (call_pending_) fail("a `calls=` line without its cost line");
    if (p_.totals.empty()) {  // no summary: the sum of every function's own lines
      p_.totals = self_total_;
    }
    for (auto& [name, costs] : p_.inclusive) costs.resize(p_.events.size(), 0);
    p_.totals.resize(p_.events.size(), 0);
    return std::move(p_);
  }

 private:
  [[noreturn]] void fail(const std::string& reason) const { throw kv::InputError(where_, "line " + std::to_string(number_), reason); }

  std::vector<std::uint64_t> counts(const std::vector<std::string_view>& tokens, std::size_t first) const {
    if (tokens.size() - first > p_.events.size()) fail("more costs than events");
    std::vector<std::uint64_t> out(p_.events.size(), 0);
    for (std::size_t i = first; i < tokens.size(); ++i) {
      const std::string_view t = tokens[i];
      std::uint64_t v = 0;
      const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
      if (ec != std::errc() || end != t.data() + t.size()) fail("'" + std::string(t) + "' is not a count");
      out[i - first] = v;
    }
    return out;
  }

  void header(std::string_view key, std::string_view value) {
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (key == "events") {
      for (std::string_view w : words(value)) p_.events.emplace_back(w);
      if (p_.events.empty()) fail("an empty `events:` line");
      self_total_.assign(p_.events.size(), 0);
    } else if (key == "positions") {
      positions_ = words(value).size();
      if (positions_ == 0) fail("an empty `positions:` line");
    } else if (key == "summary" || key == "totals") {
      if (p_.events.empty()) fail("`" + std::string(key) + ":` before `events:`");
      p_.totals = counts(words(value), 0);
    } else if (key == "desc") {
      const std::size_t colon = value.find(':');
      if (colon != std::string_view::npos) {
        std::string_view text = value.substr(colon + 1);
        while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
        p_.descriptions[std::string(value.substr(0, colon))] = std::string(text);
      }
    }
    // version, creator, pid, cmd, part, event: and the rest say nothing the counts need.
  }

  // fn=(id) name, fn=(id) or fn=name; cfn shares fn's ids. An id is a number: a name such as
  // "(below main)" starts with a parenthesis too.
  std::string name(std::string_view value) {
    const std::size_t close = value.find(')');
    const bool id_first = !value.empty() && value.front() == '(' && close != std::string_view::npos && close > 1 &&
                          std::all_of(value.begin() + 1, value.begin() + static_cast<std::ptrdiff_t>(close),
                                      [](char ch) { return ch >= '0' && ch <= '9'; });
    if (!id_first) return std::string(value);
    const std::string id(value.substr(1, close - 1));
    std::string_view rest = value.substr(close + 1);
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    if (!rest.empty()) return names_[id] = std::string(rest);
    const auto known = names_.find(id);
    if (known == names_.end()) fail("name id (" + id + ") used before it was defined");
    return known->second;
  }

  void spec(std::string_view key, std::string_view value) {
    if (call_pending_) fail("`" + std::string(key) + "=` where a call's cost line belongs");
    if (key == "fn") {
      fn_ = name(value);
      p_.inclusive.try_emplace(fn_, std::vector<std::uint64_t>(p_.events.size(), 0));
    } else if (key == "cfn") {
      name(value);  // may define an id that a later fn= uses
    } else if (key == "calls") {
      if (fn_.empty()) fail("`calls=` outside a function");
      call_pending_ = true;
    }
    // ob, fl, fi, fe, cob, cfi, cfl, jump, jcnd: places and jumps, not costs.
  }

  void cost(std::string_view text) {
    if (p_.events.empty()) fail("a cost line before `events:`");
    if (fn_.empty()) fail("a cost line outside a function");
    const std::vector<std::string_view> tokens = words(text);
    if (tokens.size() < positions_) fail("a cost line without its position");
    const std::vector<std::uint64_t> c = counts(tokens, positions_);
    std::vector<std::uint64_t>& into = p_.inclusive[fn_];
    for (std::size_t e = 0; e < c.size(); ++e) {
      into[e] += c[e];
      if (!call_pending_) self_total_[e] += c[e];
    }
    call_pending_ = false;
  }

  std::string where_;
  std::size_t number_ = 0;
  std::size_t positions_ = 1;
  CallgrindProfile p_;
  std::vector<std::uint64_t> self_total_;
  std::map<std::string, std::string> names_;  // compressed fn/cfn ids
  std::string fn_;
  bool call_pending_ = false;
};

}  // namespace

std::optional<std::size_t> CallgrindProfile::event_index(std::string_view name) const {
  const auto it = std::find(events.begin(), events.end(), name);
  if (it == events.end()) return std::nullopt;
  return static_cast<std::size_t>(it - events.begin());
}

std::uint64_t CallgrindProfile::event(const std::vector<std::uint64_t>& costs, std::string_view name) const {
  const std::optional<std::size_t> i = event_index(name);
  return i && *i < costs.size() ? costs[*i] : 0;
}

std::vector<std::uint64_t> CallgrindProfile::function(const std::string& name) const {
  const auto it = inclusive.find(name);
  return it == inclusive.end() ? std::vector<std::uint64_t>(events.size(), 0) : it->second;
}

CallgrindProfile parse_callgrind(std::istream& in, const std::string& where) {
  Parser parser(where);
  for (std::string line; std::getline(in, line);) parser.line(line);
  return parser.finish();
}

CallgrindProfile read_callgrind(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw kv::InputError(path, "callgrind output", "cannot be read");
  return parse_callgrind(in, path);
}

}  // namespace kvbench::sim
