#include "sim_regions.h"

#include "runtime/error.h"

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define KV_HAVE_CALLGRIND 1
#else
#define KV_HAVE_CALLGRIND 0
#endif

namespace {

thread_local bool t_in_region = false;

}  // namespace

// One function per region, with C names callgrind matches by pattern. noinline and the empty
// asm after the call keep each a real call frame (no inlining into the caller, no tail call
// that would leave the region before its work).
#define KV_SIM_REGION(name)                                                         \
  extern "C" __attribute__((noinline, used)) void name(void (*fn)(void*), void* context) { \
    fn(context);                                                                    \
    asm volatile("" ::: "memory");                                                  \
  }
KV_SIM_REGION(kvbench_sim_prefill_append)
KV_SIM_REGION(kvbench_sim_prefill_attend)
KV_SIM_REGION(kvbench_sim_prefill_model)
KV_SIM_REGION(kvbench_sim_decode_append)
KV_SIM_REGION(kvbench_sim_decode_attend)
KV_SIM_REGION(kvbench_sim_decode_model)
#undef KV_SIM_REGION

namespace kv::sim {

namespace {

using RegionFn = void (*)(void (*)(void*), void*);

struct Region {
  std::string_view symbol;
  RegionFn fn;
};

// [phase][part], in the order of Phase and WorkPart.
constexpr Region kRegions[kPhaseCount][kWorkPartCount] = {
    {{"kvbench_sim_prefill_append", kvbench_sim_prefill_append},
     {"kvbench_sim_prefill_attend", kvbench_sim_prefill_attend},
     {"kvbench_sim_prefill_model", kvbench_sim_prefill_model}},
    {{"kvbench_sim_decode_append", kvbench_sim_decode_append},
     {"kvbench_sim_decode_attend", kvbench_sim_decode_attend},
     {"kvbench_sim_decode_model", kvbench_sim_decode_model}},
};

const Region& region(Phase phase, WorkPart part) { return kRegions[static_cast<int>(phase)][static_cast<int>(part)]; }

}  // namespace

std::string_view region_symbol(Phase phase, WorkPart part) { return region(phase, part).symbol; }

std::string_view work_part_name(WorkPart part) {
  switch (part) {
    case WorkPart::Append: return "append";
    case WorkPart::Attend: return "attend";
    case WorkPart::Model: return "model";
  }
  return "unknown";
}

void run_counted(Phase phase, WorkPart part, void (*fn)(void*), void* context) {
  KV_ASSERT(!t_in_region, "sim regions never nest: callgrind would stop counting at the inner one's entry");
  t_in_region = true;
  struct Leave {
    ~Leave() { t_in_region = false; }
  } leave;
  region(phase, part).fn(fn, context);
}

bool client_requests_built() { return KV_HAVE_CALLGRIND != 0; }

bool under_valgrind() {
#if KV_HAVE_CALLGRIND
  return RUNNING_ON_VALGRIND != 0;
#else
  return false;
#endif
}

void discard_counts() {
#if KV_HAVE_CALLGRIND
  CALLGRIND_ZERO_STATS;
#endif
}

}  // namespace kv::sim
