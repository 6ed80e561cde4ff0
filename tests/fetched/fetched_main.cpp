// The tests of the fetched models: skipped, visibly (CTest's skip code 77, the reason printed),
// where models/fetch.sh has not fetched them; never passed without running.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>

#include "fetched/stories15m.h"
#include "model_loader.h"

namespace kvtest {

std::string fetched_dir() { return kvbench::fetched_models_dir(); }

std::string stories15m_file(const std::string& name) { return fetched_dir() + "/" + name; }

std::string stories15m_missing() {
  for (const char* name : {"stories15M.bin", "tok32000.bin"}) {
    if (!std::ifstream(stories15m_file(name))) {
      return stories15m_file(name) + " is missing: models/fetch.sh fetches it (ci/test.sh does in its stories15M step)";
    }
  }
  return "";
}

const Stories15M& stories15m() {
  static const Stories15M s = [] {
    const kvbench::LoadedLlama loaded = kvbench::load_llama(stories15m_file("stories15M.bin"), stories15m_file("tok32000.bin"));
    return Stories15M{loaded.weights, loaded.tokenizer};
  }();
  return s;
}

}  // namespace kvtest

int main(int argc, char** argv) {
  const std::string missing = kvtest::stories15m_missing();
  if (!missing.empty()) {
    std::printf("SKIPPED: %s\n", missing.c_str());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
