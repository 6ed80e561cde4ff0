#include <catch2/catch.hpp>

#include <chrono>
#include <regex>
#include <vector>
#include <cstdio>
#include <string>
#include <thread>

#include "progress.h"

using namespace kvbench;

namespace {

// What a Progress wrote into `file`.
std::string contents(std::FILE* file) {
  std::fflush(file);
  std::rewind(file);
  std::string text;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, file)) > 0;) text.append(buffer, n);
  return text;
}

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("in a log: the plan, a line per repetition and per case, the ETA over planned work", "[progress]") {
  std::FILE* file = std::tmpfile();
  REQUIRE(file != nullptr);
  {
    Progress progress(2, 30.0, Progress::Mode::Log, file, 0.0);
    progress.note("2 cases: 3 engine runs planned");
    progress.start(1, "m/w/p/host", "repetition 1/2");
    progress.done(10.0);
    progress.repetition_done(0.5);
    progress.start(1, "m/w/p/host", "repetition 2/2");
    progress.done(10.0);
    progress.repetition_done(0.5);
    progress.case_done(1, "m/w/p/host", "complete", " in 1.00 s");
    progress.case_done(2, "m/w/p/soc", "complete", ", priced from the host run");
    progress.skip(10.0);  // a SoC run the plan expected did not happen: nothing is left
    progress.case_done(3, "m/w/q/host", "skipped", "");
  }
  const std::string log = contents(file);
  std::fclose(file);
  INFO(log);
  CHECK(log.rfind("kvbench: 2 cases: 3 engine runs planned\n", 0) == 0);
  CHECK(log.find("kvbench: [1/2] m/w/p/host repetition 1/2 done in 500 ms (ETA ") != std::string::npos);
  CHECK(log.find("kvbench: [1/2] m/w/p/host complete in 1.00 s (ETA ") != std::string::npos);
  CHECK(log.find("kvbench: [2/2] m/w/p/soc complete, priced from the host run (ETA ") != std::string::npos);
  CHECK(log.find("kvbench: [3/2] m/w/q/host skipped (ETA 0 s)") != std::string::npos);
  CHECK(count_of(log, "\n") == 6);
  CHECK(log.find("still running") == std::string::npos);  // no heartbeat asked for
}

TEST_CASE("in a log, a long repetition says it is still running at least every heartbeat", "[progress]") {
  std::FILE* file = std::tmpfile();
  REQUIRE(file != nullptr);
  {
    Progress progress(1, 2.0, Progress::Mode::Log, file, 0.05);
    progress.start(1, "m/w/p/host", "repetition 1/1");
    std::this_thread::sleep_for(std::chrono::milliseconds(400));  // an injected long repetition
    progress.done(1.0);
    progress.repetition_done(0.4);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // between repetitions: no beat
    progress.case_done(1, "m/w/p/host", "complete", " in 400 ms");
  }
  const std::string log = contents(file);
  std::fclose(file);
  INFO(log);
  const int beats = count_of(log, "kvbench: [1/1] m/w/p/host repetition 1/1 still running after ");
  CHECK(beats >= 2);   // 400 ms at most 50 ms apart, on a busy machine too
  CHECK(beats <= 9);   // never more often than the heartbeat
  const auto done = log.find("done in");
  REQUIRE(done != std::string::npos);
  CHECK(log.find("still running", done) == std::string::npos);
}

TEST_CASE("on a terminal the line is redrawn in place, and off says nothing", "[progress]") {
  std::FILE* file = std::tmpfile();
  REQUIRE(file != nullptr);
  {
    Progress progress(1, 1.0, Progress::Mode::Terminal, file, 0.05);
    progress.start(1, "m/w/p/host", "repetition 1/1");
    progress.done(1.0);
    progress.repetition_done(0.1);
    progress.case_done(1, "m/w/p/host", "complete", " in 100 ms");
  }
  const std::string terminal = contents(file);
  std::fclose(file);
  CHECK(terminal == "\r\033[K[1/1] m/w/p/host repetition 1/1 (ETA -)");
  std::FILE* quiet = std::tmpfile();
  {
    Progress progress(1, 1.0, Progress::Mode::Off, quiet, 0.05);
    progress.note("planned");
    progress.start(1, "m/w/p/host", "repetition 1/1");
    progress.case_done(1, "m/w/p/host", "failed", " after 1 s");
  }
  CHECK(contents(quiet).empty());
  std::fclose(quiet);
}

TEST_CASE("inside a long repetition the ETA counts down, never up", "[progress]") {
  std::FILE* file = std::tmpfile();
  REQUIRE(file != nullptr);
  {
    Progress progress(1, 3.0, Progress::Mode::Log, file, 0.03);
    progress.start(1, "m/w/p/host", "repetition 1/3", 1.0);
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    progress.done(1.0);
    progress.repetition_done(0.06);
    // The second repetition runs four times as long as the first: the ETA falls to the third's
    // expected time and stays there.
    progress.start(1, "m/w/p/host", "repetition 2/3", 1.0);
    std::this_thread::sleep_for(std::chrono::milliseconds(240));
    progress.done(1.0);
    progress.repetition_done(0.24);
  }
  const std::string log = contents(file);
  std::fclose(file);
  INFO(log);
  std::vector<double> etas;
  const std::regex beat(R"(repetition 2/3 still running after [^(]+\(ETA ([0-9.]+) ms\))");
  for (std::sregex_iterator it(log.begin(), log.end(), beat), end; it != end; ++it) etas.push_back(std::stod((*it)[1].str()));
  REQUIRE(etas.size() >= 2);
  for (std::size_t i = 1; i < etas.size(); ++i) CHECK(etas[i] <= etas[i - 1]);
}
