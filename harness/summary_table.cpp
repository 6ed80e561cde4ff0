#include "summary_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "human_units.h"
#include "metric_table.h"
#include "runtime/error.h"

namespace kvbench {

namespace {

using Style = SummaryColumn::Style;

// The parts of the case names: model, workload, policy, soc.
std::vector<std::string> parts(const CaseView& c) { return {c.model, c.workload, c.policy, c.soc}; }
const char* const kPartNames[] = {"model", "workload", "policy", "soc"};

// Which parts differ between cases; with one case, workload and policy name it.
std::vector<bool> differing_parts(const RunView& run) {
  std::vector<bool> differ(4, false);
  for (const CaseView& c : run.cases) {
    for (std::size_t p = 0; p < 4; ++p) differ[p] = differ[p] || parts(c)[p] != parts(run.cases.front())[p];
  }
  if (std::none_of(differ.begin(), differ.end(), [](bool d) { return d; })) differ[1] = differ[2] = true;
  return differ;
}

std::string short_name(const CaseView& c, const std::vector<bool>& differ) {
  std::string name;
  const auto p = parts(c);
  for (std::size_t i = 0; i < 4; ++i) {
    if (differ[i]) name += (name.empty() ? "" : "/") + p[i];
  }
  return name;
}

// After the name of a case whose timings are modelled on a view whose other cases' are
// measured (CaseView::timing).
constexpr const char* kModelledMark = "^";

// The timings a case's figures are: the view's, or the case's own on a host view.
Clock case_timing(const RunView& run, const CaseView& c) { return run.timing == Clock::Model ? Clock::Model : c.timing; }

// What a case's row says in place of figures, and its mark after the name.
std::string case_state(const RunView& run, const CaseView& c) {
  if (c.status == "running" && run.status != "running") return "aborted";
  return c.status;
}

std::string pad_left(const std::string& s, std::size_t width) { return s.size() >= width ? s : std::string(width - s.size(), ' ') + s; }
std::string pad_right(const std::string& s, std::size_t width) { return s.size() >= width ? s : s + std::string(width - s.size(), ' '); }

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

// Each line broken at spaces to fit `width`, continuations indented two more than the line; a
// word longer than the room (a path) is cut.
std::string wrap_lines(const std::string& text, std::size_t width) {
  std::string out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const std::size_t indent = line.find_first_not_of(' ') == std::string::npos ? 0 : line.find_first_not_of(' ');
    const std::string pad(indent + 2, ' ');
    std::string current = line.substr(0, indent);
    bool fresh = true;  // nothing but indentation on the current line
    std::istringstream words(line.substr(indent));
    for (std::string word; words >> word;) {
      while (true) {
        const std::size_t need = current.size() + (fresh ? 0 : 1) + word.size();
        if (need <= width) {
          current += (fresh ? "" : " ") + word;
          fresh = false;
          break;
        }
        if (!fresh) {
          out += current + "\n";
          current = pad;
          fresh = true;
          continue;
        }
        const std::size_t room = width > current.size() ? width - current.size() : 1;
        out += current + word.substr(0, room) + "\n";
        word = word.substr(room);
        current = pad;
      }
    }
    out += current + "\n";
  }
  return out;
}

std::string column_label(const SummaryColumn& c) { return c.sub.empty() ? c.head : c.head + " " + c.sub; }

void header(std::ostringstream& out, const RunView& run, const std::vector<bool>& differ) {
  out << fmt::format("run {} [{}] suite {}, {} -> {}\n", run.id, run.status, run.suite, run.started_at,
                     run.ended_at.empty() ? "(not ended)" : run.ended_at);
  out << fmt::format("  git {}{}, config {}, tags {}\n", run.git_sha, run.git_dirty ? " (dirty)" : "", run.config_hash,
                     run.tags.empty() ? "(none)" : run.tags);
  out << fmt::format("  {}{}, {} cores; L2 on {}\n", run.cpu_model, run.board.empty() ? std::string() : fmt::format(" ({})", run.board), run.cores, run.l2_fs_type);
  if (!run.device_soc.empty()) out << fmt::format("  a device run: the host cases are this machine, priced with the {} profile\n", run.device_soc);
  if (run.prefix_cache_start == "warm") {
    out << "  prefix cache warm: each repetition started with every sequence's first prompt cached (prefix_warm)\n";
  }
  std::vector<std::string> common;
  if (!run.cases.empty()) {
    const auto p = parts(run.cases.front());
    for (std::size_t i = 0; i < 4; ++i) {
      if (!differ[i]) common.push_back(fmt::format("{} {}", kPartNames[i], p[i]));
    }
  }
  if (!common.empty()) out << "  every case: " << join(common, ", ") << "\n";
}

// marks: every mark character the table printed.
void legend(std::ostringstream& out, const RunView& run, const std::vector<SummaryColumn>& columns, const std::vector<bool>& differ,
            const std::string& marks) {
  out << fmt::format("\nmedians over each case's stored repetitions ({} planned per case)\n", run.planned_repetitions);
  if (marks.find('*') != std::string::npos) {
    out << "* extrapolated: scaled from the sampled layers (or probed prefill chunks) to the whole model\n";
  }
  if (marks.find('~') != std::string::npos) {
    out << fmt::format("~ noisy: in some repetition the engine's threads waited for a core more than {}% of its wall time; "
                       "its wall-time figures are left out of comparisons (CPU-time figures are kept)\n",
                       significant(run.noise_threshold * 100.0, 2));
  }
  if (marks.find('!') != std::string::npos) out << "! degraded: the engine gave something up to keep running (said below)\n";
  const bool mixed = mixed_timings(run);
  if (mixed) {
    out << fmt::format("{} modelled: a SoC's case priced from the host run, not run on that SoC; its timings are the cost model's\n",
                       kModelledMark);
  }
  // The clocks in kClocks' order; a host column that is also modelled, on a view whose marked
  // rows are modelled, is on both (the last entry, printed first: those columns lead the table).
  std::vector<std::string> by_clock[6];
  for (const SummaryColumn& c : columns) {
    const MetricDef* def = find_metric(c.metric);
    if (def == nullptr) continue;
    const Clock clock = run.timing == Clock::Model && (def->modelled || def->clock == Clock::Model) ? Clock::Model : def->clock;
    if (run.timing == Clock::Model && host_work(clock)) continue;  // not shown on the model view
    by_clock[mixed && def->modelled && clock == Clock::Host ? 5 : static_cast<int>(clock)].push_back(column_label(c));
  }
  static const std::string kClocks[] = {"host (measured here)", "model (priced by the SoC profile)", "exact (counts and accuracy)",
                                        "cpu (the engine threads' CPU time and instructions, measured here)",
                                        "sim (the engine's work counted under callgrind, the executed layers and chunks)",
                                        fmt::format("host (measured here) on the other rows, model (priced by the row's SoC profile) on "
                                                    "the rows marked {}", kModelledMark)};
  static_assert(std::size(kClocks) == std::size(by_clock));
  for (const std::size_t k : {5, 0, 1, 2, 3, 4}) {
    if (!by_clock[k].empty()) out << fmt::format("clock {}: {}\n", kClocks[k], join(by_clock[k], ", "));
  }
  if (run.timing == Clock::Model || mixed) {
    out << "model clock: each case's operation counts priced by its SoC profile (dense layers included), see docs/cost-model.md\n";
  } else if (run.sim) {
    out << "a sim run: each engine run counted under callgrind (docs/gate.md); its host and cpu figures are not measured\n";
  } else if (run.synthetic) {
    out << "synthetic backend: ttft, tpot and tok/s time the engine's work for every layer (KV append, quantization,\n"
           "  pages, selection, attention), not model compute; quality checks are never inside a timed figure\n";
  }
  for (const CaseView& c : run.cases) {
    const std::string name = short_name(c, differ);
    const std::string state = case_state(run, c);
    if (state == "skipped") out << fmt::format("skipped {}: {}\n", name, c.note);
    if (state == "failed" && c.note == "interrupted") {
      out << fmt::format("interrupted {}: the run was stopped during this case; {} of {} repetitions were stored{}\n", name,
                         c.repetitions, run.planned_repetitions, c.repetitions > 0 ? " and its medians are over those" : "");
    } else if (state == "failed") {
      out << fmt::format("failed {}: {} ({} repetitions stored)\n", name, c.note, c.repetitions);
    }
    if (state == "aborted" || state == "running") {
      out << fmt::format("{} {}: {} repetitions stored so far\n", state, name, c.repetitions);
    }
    if (!c.degradation.empty()) {
      out << fmt::format("degraded {} (in {} of {} repetitions):\n", name, c.degraded_repetitions, c.repetitions);
      for (const std::string& line : c.degradation) out << "  " << line << "\n";
    }
    for (const std::string& line : c.pricing) out << fmt::format("priced {}: {}\n", name, line);
  }
  if (run.status == "interrupted") out << "the run was interrupted (SIGINT or SIGTERM); every finished repetition was kept\n";
  if (run.status == "aborted") out << "the run was aborted: its process died before it ended; stored repetitions are kept\n";
}

}  // namespace

const std::vector<SummaryColumn>& default_summary_columns() {
  static const std::vector<SummaryColumn> columns = {
      {"ttft_first_request_ms", "ttft", "first", Style::Unit},
      {"ttft_followup_ms_p50", "ttft next", "p50", Style::Unit},
      {"prefill_tps", "prefill", "tok/s", Style::Unit},
      {"tpot_ms_p50", "tpot", "p50", Style::Unit},
      {"tpot_ms_p99", "tpot", "p99", Style::Unit},
      {"decode_tps", "decode", "tok/s", Style::Unit},
      {"kv_bytes_per_token", "KV", "per tok", Style::Unit},
      {"kv_compression_ratio", "compr", "vs f16", Style::Times},
      {"peak_l1_bytes", "peak", "L1", Style::Unit},
      {"token_drop_ratio", "token", "drop", Style::Percent},
      {"attn_mass_recall", "attn", "recall", Style::Unit},
      {"attn_rel_error", "attn", "rel err", Style::Unit},
      {"ppl_delta_pct", "ppl", "delta", Style::Unit},
      {"noise_run_queue_share", "noise", "share", Style::Percent},
  };
  return columns;
}

const std::vector<SummaryColumn>& sim_summary_columns() {
  static const std::vector<SummaryColumn> columns = [] {
    std::vector<SummaryColumn> c = {
        {"span_prefill_total_sim_instructions", "prefill", "instr", Style::Unit},
        {"span_prefill_total_sim_l1_misses", "prefill", "L1 miss", Style::Unit},
        {"span_decode_total_sim_instructions", "decode", "instr", Style::Unit},
        {"span_decode_total_sim_l1_misses", "decode", "L1 miss", Style::Unit},
        {"span_decode_total_sim_ll_misses", "decode", "LL miss", Style::Unit},
        {"span_decode_total_sim_cycles", "decode", "cycles", Style::Unit},
    };
    for (const SummaryColumn& d : default_summary_columns()) {
      const MetricDef* def = find_metric(d.metric);
      if (def != nullptr && def->clock == Clock::Exact) c.push_back(d);
    }
    return c;
  }();
  return columns;
}

const std::vector<SummaryColumn>& run_summary_columns(const RunView& run) {
  return run.sim && run.timing != Clock::Model ? sim_summary_columns() : default_summary_columns();
}

std::vector<SummaryColumn> summary_columns(const std::string& list) {
  std::vector<SummaryColumn> columns;
  if (list == "all") {
    for (const MetricDef& def : metric_table()) columns.push_back({def.name, def.name, "", Style::Unit});
    return columns;
  }
  std::stringstream in(list);
  std::string name;
  while (std::getline(in, name, ',')) {
    if (name.empty()) continue;
    if (find_metric(name) == nullptr) {
      throw kv::InputError("--metrics", name, "not a metric (`kvbench metrics` lists them; \"all\" shows every one)");
    }
    SummaryColumn column{name, name, "", Style::Unit};
    for (const auto* known : {&default_summary_columns(), &sim_summary_columns()}) {
      const auto it = std::find_if(known->begin(), known->end(), [&](const SummaryColumn& c) { return c.metric == name; });
      if (it != known->end()) column = *it;
    }
    columns.push_back(column);
  }
  if (columns.empty()) throw kv::InputError("--metrics", list, "names no metric");
  return columns;
}

std::string summary_cell(const SummaryColumn& column, const CaseFigure& figure) {
  if (!figure.median) return "-";
  const double v = *figure.median;
  std::string text;
  switch (column.style) {
    case Style::Percent: text = significant(v * 100.0) + "%"; break;
    case Style::Times: text = significant(v) + "x"; break;
    case Style::Unit: {
      const MetricDef* def = find_metric(column.metric);
      text = human_value(v, def != nullptr ? def->unit : "");
      break;
    }
  }
  if (figure.extrapolated) text += "*";
  if (figure.noisy && column.metric == "noise_run_queue_share") text += "~";
  return text;
}

namespace {

// Columns in blocks that fit `limit` after a lead of `lead` characters, as [begin, end): at least
// one column each.
std::vector<std::pair<std::size_t, std::size_t>> column_blocks(const std::vector<std::size_t>& widths, std::size_t lead, std::size_t limit) {
  std::vector<std::pair<std::size_t, std::size_t>> blocks;
  for (std::size_t begin = 0; begin < widths.size();) {
    std::size_t end = begin, used = lead;
    while (end < widths.size() && (end == begin || used + widths[end] + 1 <= limit)) used += widths[end++] + 1;
    blocks.emplace_back(begin, end);
    begin = end;
  }
  return blocks;
}

}  // namespace

std::string render_summary(const RunView& run, const std::vector<SummaryColumn>& columns, int width) {
  const std::vector<bool> differ = differing_parts(run);
  std::ostringstream head;
  header(head, run, differ);
  std::ostringstream out;
  out << wrap_lines(head.str(), static_cast<std::size_t>(width));
  // Cells first: the widths follow from them.
  std::vector<std::string> names;
  std::vector<std::vector<std::string>> cells;
  std::vector<std::size_t> widths;
  for (const SummaryColumn& c : columns) widths.push_back(std::max(c.head.size(), c.sub.size()));
  std::size_t name_width = 4;
  for (const CaseView& c : run.cases) {
    const std::string state = case_state(run, c);
    std::string name = short_name(c, differ) + (c.degradation.empty() ? "" : " !");
    if (run.timing == Clock::Host && c.timing == Clock::Model) name += std::string(" ") + kModelledMark;
    if (state != "complete") name += " [" + (state == "failed" && c.note == "interrupted" ? std::string("interrupted") : state) + "]";
    names.push_back(name);
    name_width = std::max(name_width, name.size());
    std::vector<std::string> row;
    if (c.repetitions > 0) {
      for (std::size_t i = 0; i < columns.size(); ++i) {
        const auto it = c.figures.find(columns[i].metric);
        row.push_back(it == c.figures.end() ? "-" : summary_cell(columns[i], it->second));
        widths[i] = std::max(widths[i], row.back().size());
      }
    }
    cells.push_back(std::move(row));
  }
  // One table when it fits, names inline or on their own line; else blocks of columns that fit,
  // each repeating the names.
  std::size_t figures_width = 0;
  for (std::size_t w : widths) figures_width += w + 1;
  const auto limit = static_cast<std::size_t>(width);
  bool wrap = name_width + figures_width > limit;
  if (wrap && 2 + figures_width > limit) wrap = name_width > limit / 2;
  const std::size_t lead = wrap ? 2 : name_width;
  for (const auto& [begin, end] : column_blocks(widths, lead, limit)) {
    const auto row_line = [&, begin = begin, end = end](const std::string& first, const std::vector<std::string>& items) {
      std::string line = pad_right(first, lead);
      for (std::size_t i = begin; i < end; ++i) line += " " + pad_left(items[i], widths[i]);
      while (!line.empty() && line.back() == ' ') line.pop_back();
      return line + "\n";
    };
    std::vector<std::string> heads, subs;
    for (const SummaryColumn& c : columns) {
      heads.push_back(c.head);
      subs.push_back(c.sub);
    }
    out << "\n" << row_line(wrap ? "" : "case", heads);
    if (std::any_of(subs.begin() + static_cast<std::ptrdiff_t>(begin), subs.begin() + static_cast<std::ptrdiff_t>(end),
                    [](const std::string& sub) { return !sub.empty(); })) {
      out << row_line("", subs);
    }
    for (std::size_t i = 0; i < run.cases.size(); ++i) {
      const CaseView& c = run.cases[i];
      if (wrap) out << names[i] << "\n";
      if (cells[i].empty()) {
        const std::string what = case_state(run, c) == "skipped" ? "skipped (below)" : "no repetition stored (below)";
        out << pad_right(wrap ? "" : names[i], lead) << " " << what << "\n";
        continue;
      }
      out << row_line(wrap ? "" : names[i], cells[i]);
    }
  }
  std::string marks;
  for (const CaseView& c : run.cases) marks += c.degradation.empty() ? "" : "!";
  for (const auto& row : cells) {
    for (const std::string& cell : row) marks += cell;
  }
  std::ostringstream notes;
  legend(notes, run, columns, differ, marks);
  return out.str() + wrap_lines(notes.str(), limit);
}

std::string summary_json(const RunView& run, const std::vector<SummaryColumn>& columns) {
  using json = nlohmann::json;
  json cases = json::array();
  for (const CaseView& c : run.cases) {
    json metrics = json::object();
    for (const SummaryColumn& column : columns) {
      const MetricDef& def = metric(column.metric);
      const auto it = c.figures.find(column.metric);
      const CaseFigure figure = it == c.figures.end() ? CaseFigure{std::nullopt, "not recorded", false, false} : it->second;
      metrics[column.metric] = {{"median", figure.median ? json(*figure.median) : json(nullptr)},
                                {"na_reason", figure.median ? "" : figure.na_reason},
                                {"unit", def.unit},
                                {"clock", clock_name(case_timing(run, c) == Clock::Model && def.modelled ? Clock::Model : def.clock)},
                                {"extrapolated", figure.extrapolated},
                                {"noisy", figure.noisy}};
    }
    cases.push_back({{"name", c.name},
                     {"status", case_state(run, c)},
                     {"note", c.note},
                     {"repetitions", c.repetitions},
                     {"degraded", c.degradation},
                     {"degraded_repetitions", c.degraded_repetitions},
                     {"pricing", c.pricing},
                     {"timings", clock_name(case_timing(run, c))},
                     {"metrics", metrics}});
  }
  json doc{{"run",
            {{"id", run.id},
             {"status", run.status},
             {"suite", run.suite},
             {"started_at", run.started_at},
             {"ended_at", run.ended_at},
             {"git_sha", run.git_sha},
             {"git_dirty", run.git_dirty},
             {"config_hash", run.config_hash},
             {"tags", run.tags},
             {"planned_repetitions", run.planned_repetitions}}},
           {"cases", cases}};
  return doc.dump(2);
}

}  // namespace kvbench
