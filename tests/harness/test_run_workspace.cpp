// A run's L2 workspace (run_workspace.h): which directories a run may write under, checked before
// it is stored, and its own subdirectories, removed whatever the outcome.
#include <catch2/catch.hpp>

#include <filesystem>
#include <functional>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "run_workspace.h"
#include "runtime/error.h"
#include "test_support.h"

using namespace kvbench;
namespace fs = std::filesystem;

namespace {

void refused(const std::function<void()>& body, const std::string& where, const std::string& field, const std::string& reason) {
  try {
    body();
    FAIL("no error");
  } catch (const kv::InputError& e) {
    CHECK(e.where() == where);
    CHECK(e.field() == field);
    CHECK_THAT(e.reason(), Catch::Contains(reason));
  }
}

}  // namespace

TEST_CASE("the default L2 base is l2 beside the database, made only when a case offloads to it", "[harness]") {
  kvtest::TempDir tmp("workspace");
  const std::string db = tmp.path + "/results/kvbench.sqlite";
  fs::create_directories(tmp.path + "/results");
  RunWorkspace workspace("", db);
  CHECK(workspace.default_base() == tmp.path + "/results/l2");
  workspace.make_default_base();  // nothing planned: nothing made
  CHECK_FALSE(fs::exists(tmp.path + "/results/l2"));
  workspace.plan("", "suite.json", "/policies/0/memory/l2_dir");
  workspace.make_default_base();
  CHECK(fs::is_directory(tmp.path + "/results/l2"));
  CHECK(RunWorkspace("", "kvbench.sqlite").default_base() == "l2");
}

TEST_CASE("bases are planned once each in first-use order, and a policy's own must be a directory", "[harness]") {
  kvtest::TempDir tmp("workspace");
  const std::string own = tmp.path + "/own";
  fs::create_directories(own);
  std::ofstream(tmp.path + "/file") << "x";
  RunWorkspace workspace(tmp.path, tmp.path + "/db.sqlite");
  workspace.plan(own, "suite.json", "/policies/1/memory/l2_dir");
  workspace.plan("", "suite.json", "/policies/0/memory/l2_dir");
  workspace.plan(own, "suite.json", "/policies/2/memory/l2_dir");
  CHECK(workspace.bases() == std::vector<std::string>{own, tmp.path});
  refused([&] { workspace.plan(tmp.path + "/missing", "suite.json", "/policies/3/memory/l2_dir"); }, "suite.json",
          "/policies/3/memory/l2_dir", "does not exist");
  refused([&] { workspace.plan(tmp.path + "/file", "suite.json", "/policies/4/memory/l2_dir"); }, "suite.json",
          "/policies/4/memory/l2_dir", "is not a directory");
}

TEST_CASE("the L2 directory flag must name a directory, and is never created", "[harness]") {
  kvtest::TempDir tmp("workspace");
  std::ofstream(tmp.path + "/file") << "x";
  refused([&] { RunWorkspace(tmp.path + "/missing", "db.sqlite"); }, tmp.path + "/missing", "--l2-dir", "does not exist");
  refused([&] { RunWorkspace(tmp.path + "/file", "db.sqlite"); }, tmp.path + "/file", "--l2-dir", "is not a directory");
  RunWorkspace workspace(tmp.path, "db.sqlite");
  workspace.plan("", "suite.json", "/policies/0/memory/l2_dir");
  workspace.make_default_base();
  CHECK(workspace.default_base() == tmp.path);
}

TEST_CASE("a run's subdirectories are its own, made on first use and removed with what they hold", "[harness]") {
  kvtest::TempDir tmp("workspace");
  const std::string own = tmp.path + "/own";
  fs::create_directories(own);
  const std::string mine = "kvbench-run-" + std::to_string(::getpid()) + "-42";
  std::string made;
  {
    RunWorkspace workspace("", tmp.path + "/db.sqlite");
    workspace.plan(own, "suite.json", "/policies/0/memory/l2_dir");
    workspace.open(42);
    CHECK(workspace.run_dir(own) == own + "/" + mine);
    CHECK(fs::is_directory(own + "/" + mine));
    // The default base was not planned: a SoC's own run that caps L1 makes it and its subdirectory.
    made = workspace.run_dir("");
    CHECK(made == tmp.path + "/l2/" + mine);
    CHECK(workspace.run_dir("") == made);  // once
    std::ofstream(made + "/segment") << "pages";
    // A second run of the same id in this process cannot take the same subdirectory.
    RunWorkspace other("", tmp.path + "/db.sqlite");
    other.plan(own, "suite.json", "/policies/0/memory/l2_dir");
    refused([&] { other.open(42); }, own, "l2_dir", "already exists");
  }
  CHECK_FALSE(fs::exists(made));
  CHECK_FALSE(fs::exists(own + "/" + mine));
  CHECK(fs::is_directory(own));  // the user's directory stays
  CHECK(fs::is_directory(tmp.path + "/l2"));
}
