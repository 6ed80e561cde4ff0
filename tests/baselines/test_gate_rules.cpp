#include <catch2/catch.hpp>

#include "gate_rules.h"
#include "runtime/error.h"
#include "test_support.h"

using namespace kvbench;

TEST_CASE("Gate defaults follow the metric table, the built-in rules refine them", "[gate]") {
  const GateRules none = parse_gate_rules(R"({"rules": []})", "empty.json");
  const MetricRule ttft = none.rule_for("ttft_ms");
  CHECK(ttft.kind == GateClass::Statistical);
  CHECK(ttft.relative == 0.05);
  CHECK(ttft.better == Better::Lower);
  CHECK(none.rule_for("decode_tps").better == Better::Higher);
  CHECK(none.rule_for("span_decode_total_ms").kind == GateClass::Statistical);
  const MetricRule bytes = none.rule_for("kv_bytes_per_token");
  CHECK(bytes.kind == GateClass::Deterministic);
  CHECK(bytes.relative == 1e-9);
  CHECK_FALSE(none.rule_for("noise_cpu_share").gated);
  CHECK_FALSE(none.rule_for("case_wall_ms").gated);

  const GateRules builtin = parse_gate_rules(kvtest::file_bytes(std::string(KVBENCH_SOURCE_DIR) + "/configs/gate.json"), "gate.json");
  CHECK(builtin.fdr == 0.05);
  const MetricRule rss = builtin.rule_for("peak_rss_bytes");
  CHECK(rss.kind == GateClass::Statistical);
  CHECK(rss.relative == 0.10);
  const MetricRule errors = builtin.rule_for("l2_errors");
  CHECK(errors.kind == GateClass::Deterministic);
  CHECK(errors.relative == 0.0);
  CHECK(errors.gated);
  // Later entries win; globs reach every span.
  const GateRules spans = parse_gate_rules(
      R"({"rules": [{"metric": "span_*", "gated": false}, {"metric": "span_decode_total_ms", "gated": true, "relative": 0.2}]})", "s.json");
  CHECK_FALSE(spans.rule_for("span_prefill_total_ms").gated);
  CHECK(spans.rule_for("span_decode_total_ms").gated);
  CHECK(spans.rule_for("span_decode_total_ms").relative == 0.2);
}

TEST_CASE("A bad rules file names the file, the field and the reason", "[gate]") {
  struct Bad {
    std::string text, field, reason;
  };
  for (const Bad& bad : std::vector<Bad>{
           {R"({"rules": [{"metric": "tpot_*", "direction": "up"}]})", "/rules/0/direction", "not one of lower, higher, none"},
           {R"({"rules": [{"metric": "no_such_metric"}]})", "/rules/0/metric", "matches no metric"},
           {R"({"rules": [{"metric": "ttft_ms", "colour": 1}]})", "/rules/0/colour", "unknown field"},
           {R"({"rules": [{"metric": "ttft_ms", "relative": -1}]})", "/rules/0/relative", "must be >= 0"},
           {R"({"rules": [{"metric": "ttft_ms", "class": "fuzzy"}]})", "/rules/0/class", "not one of deterministic, statistical"},
           {R"({"fdr": 2, "rules": []})", "/fdr", "must be in (0, 1)"},
           {R"({"rules": {}})", "/rules", "must be an array"},
           {R"({"rules": [)", "byte", "malformed JSON"},
       }) {
    INFO(bad.text);
    CHECK_THROWS_MATCHES(parse_gate_rules(bad.text, "rules.json"), kv::InputError,
                         Catch::Predicate<kv::InputError>([&](const kv::InputError& e) {
                           return e.where() == "rules.json" && e.field().find(bad.field) == 0 &&
                                  e.reason().find(bad.reason) != std::string::npos;
                         }));
  }
}

TEST_CASE("a modelled figure is deterministic and takes only rules that name its clock", "[gate_rules]") {
  const GateRules rules = parse_gate_rules(
      R"({"rules": [{"metric": "tpot_*", "class": "statistical", "relative": 0.2},
                    {"metric": "tpot_ms_p99@model", "relative": 0.01}]})",
      "clocks.json");
  const MetricRule host = rules.rule_for("tpot_ms_p50");
  CHECK(host.kind == GateClass::Statistical);
  CHECK(host.relative == 0.2);
  const MetricRule model = rules.rule_for("tpot_ms_p50@model");
  CHECK(model.kind == GateClass::Deterministic);
  CHECK(model.relative == 1e-9);
  CHECK(rules.rule_for("tpot_ms_p99@model").relative == 0.01);
  CHECK(rules.rule_for("energy_mj_per_token").kind == GateClass::Deterministic);
}
