// The comparison record: every field survives its JSON form; a record stored by an older kvbench
// (no `failing`, no judged rows, no definition change) reads with the defaults its readers
// assumed; text that is not a record, or a row whose verdict is missing or unknown, is refused,
// naming where it came from.
#include <catch2/catch.hpp>

#include "comparison_record.h"
#include "runtime/error.h"

using namespace kvbench;

TEST_CASE("a comparison record survives its JSON form", "[comparison]") {
  ComparisonRecord r;
  r.baseline_run = 3;
  r.candidate_run = 7;
  r.suite = "nightly";
  r.fdr = 0.1;
  r.regressed = 2;
  r.failing = 1;
  r.unreliable = 1;
  r.unreliable_judged_by_cpu = 2;
  r.outcome = "fail";
  r.plain_pass = false;
  r.improved = 4;
  r.inconclusive = 5;
  r.unchanged = 6;
  r.not_gated = 7;
  r.caveats = {"machine changed"};
  r.definition_changed = std::pair{2, 3};
  r.only_in_baseline = {"a/b/c/host"};
  r.only_in_candidate = {"d/e/f/host"};
  r.cases = {{"m/w/p/host", {"policies.sparse.budget: 0.25 -> 0.1"}, "another CPU"}};
  ComparisonRowRecord row;
  row.case_name = "m/w/p/host";
  row.metric = "tpot_ms_p50";
  row.verdict = Verdict::Regressed;
  row.acknowledged = "known";
  row.baseline_median = 10.0;
  row.candidate_median = 12.5;
  row.ratio = 1.25;
  row.ratio_low = 1.2;
  row.ratio_high = 1.3;
  row.p = 0.001;
  row.adjusted_p = 0.004;
  row.judged_by = "cpu_tpot_ms_p50";
  row.judged_verdict = Verdict::Regressed;
  row.core_slowdown = 1.1;
  row.baseline_repetitions = 5;
  row.candidate_repetitions = 4;
  row.noisy_left_out = 1;
  row.repetitions_needed = 9;
  row.note = "why";
  ComparisonRowRecord unreliable;
  unreliable.case_name = "m/w/p/host";
  unreliable.metric = "ttft_ms";
  unreliable.verdict = Verdict::Unreliable;
  unreliable.note = "too noisy";
  r.rows = {row, unreliable};

  const ComparisonRecord back = parse_comparison_record(comparison_record_json(r), "test");
  CHECK(comparison_record_json(back) == comparison_record_json(r));
  CHECK(back.failing == 1);
  CHECK(back.definition_changed == std::pair{2, 3});
  REQUIRE(back.rows.size() == 2);
  CHECK(back.rows[0].judged_by == std::optional<std::string>("cpu_tpot_ms_p50"));
  CHECK(back.rows[0].core_slowdown == Approx(1.1));
  CHECK(back.rows[0].verdict == Verdict::Regressed);
  CHECK(back.rows[0].judged_verdict == std::optional<Verdict>(Verdict::Regressed));
  CHECK(back.rows[0].statistical());
  CHECK_FALSE(back.rows[0].failing());  // acknowledged
  CHECK(back.rows[1].verdict == Verdict::Unreliable);
  CHECK(back.rows[1].unreliable());
  CHECK_FALSE(back.rows[1].ratio);  // no estimate stays no estimate, never a 1.0
  CHECK_FALSE(back.rows[1].baseline_median);
  CHECK(back.cases[0].config_changes == std::vector<std::string>{"policies.sparse.budget: 0.25 -> 0.1"});
}

TEST_CASE("a record from an older kvbench reads with its readers' defaults", "[comparison]") {
  const ComparisonRecord old = parse_comparison_record(
      R"({"baseline_run": 1, "candidate_run": 2, "regressed": 3, "improved": 1,
          "rows": [{"case": "m/w/p/host", "metric": "ttft_ms", "verdict": "regressed", "ratio": 1.5}]})",
      "verdict 4");
  CHECK(old.failing == 3);  // before acknowledgements every regression failed
  CHECK_FALSE(old.definition_changed);
  REQUIRE(old.rows.size() == 1);
  CHECK(old.rows[0].ratio == Approx(1.5));
  CHECK_FALSE(old.rows[0].judged_by);
  CHECK(old.rows[0].acknowledged.empty());
}

TEST_CASE("text that is not a comparison record is refused, naming where it came from", "[comparison]") {
  CHECK_THROWS_WITH(parse_comparison_record("{not json", "verdict 9"), Catch::Contains("verdict 9: comparison: not JSON"));
  CHECK_THROWS_WITH(parse_comparison_record("[1]", "gate.json"), Catch::Contains("gate.json: comparison: not a JSON object"));
  // A verdict this kvbench does not know is refused: read as "unchanged" it could pass a gate.
  CHECK_THROWS_WITH(parse_comparison_record(R"({"rows": [{"case": "c", "metric": "m", "verdict": "worse"}]})", "verdict 9"),
                    Catch::Contains("verdict 9: rows[0].verdict: not a verdict: \"worse\""));
  CHECK_THROWS_WITH(parse_comparison_record(R"({"rows": [{"case": "c", "metric": "m"}]})", "verdict 9"),
                    Catch::Contains("verdict 9: rows[0].verdict: missing"));
}
