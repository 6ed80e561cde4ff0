#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include "results_store.h"

using namespace kvbench;

namespace {

// A pid that no process has: a child that has exited and been reaped.
std::int64_t gone_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

}  // namespace

TEST_CASE("a file's run is alive while its process is on this boot", "[run_liveness]") {
  const RunWriter alive{::getpid(), boot_id(), 0, 10};
  CHECK_FALSE(run_writer_gone(alive, false));
  CHECK(run_writer_gone({gone_pid(), boot_id(), 0, 10}, false));
  CHECK(run_writer_gone({::getpid(), "another-boot", 0, 10}, false));
  // A file's beat is not read: a long repetition never reads as gone.
  CHECK_FALSE(run_writer_gone({::getpid(), boot_id(), 1000, 10}, false));
  CHECK(reported_run_status("running", {gone_pid(), boot_id(), 0, 10}, false) == "aborted");
  CHECK(reported_run_status("complete", {gone_pid(), boot_id(), 0, 10}, false) == "complete");
}

TEST_CASE("a server's run is alive while it beats", "[run_liveness]") {
  // Another machine's run: its beat alone decides, up to the timeout and not past it.
  CHECK_FALSE(run_writer_gone({1, "another-host", 0, 10}, true));
  CHECK_FALSE(run_writer_gone({1, "another-host", 10, 10}, true));
  CHECK(run_writer_gone({1, "another-host", 11, 10}, true));
  // This boot's too (a container's pid is not this one's to see): a beating run whose pid is not
  // here stays alive, a live process whose beats stopped does not.
  CHECK_FALSE(run_writer_gone({gone_pid(), boot_id(), 0, 10}, true));
  CHECK(run_writer_gone({::getpid(), boot_id(), 11, 10}, true));
  CHECK(reported_run_status("running", {1, "another-host", 11, 10}, true) == "aborted");
  CHECK(reported_run_status("interrupted", {1, "another-host", 11, 10}, true) == "interrupted");
}
