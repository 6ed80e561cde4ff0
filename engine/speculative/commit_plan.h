// Speculative decoding on one page pool: what a verify step's commit does to a sequence.
//
// A verify step appends the proposed tokens (and the target's own next token) to the target's
// sequence as tentative tokens (KVCache::begin_tentative). They stay in the full-precision
// residual and seal nothing - not even an older residual page they would push out of the recent
// window - so a rejected token never reaches a sealed page. A commit keeps the accepted prefix
// and drops the rest; only then does sealing catch up, so the cache ends page for page as if
// the kept tokens had been appended one decode step at a time. The plan is pure (what to keep,
// what to release), the cache applies it.
#pragma once

#include <span>

#include "page_table.h"

namespace kv {

struct CommitPlan {
  SeqId seq = 0;
  int committed = 0;  // the sequence's length when its tentative tokens began
  int tentative = 0;  // tentative tokens every layer holds
  int keep = 0;       // of them, the ones committed (the accepted prefix)
  int new_length() const { return committed + keep; }
  int released() const { return tentative - keep; }
};

// The commit of `keep` tentative tokens of a sequence whose layers hold `layer_lengths` tokens
// and whose tentative tokens began at `committed`. Throws InputError(api, ...) for a forward
// pass some layers have not finished ("seq"), a sequence cut below where its tentative tokens
// began ("seq") or a keep outside [0, tentative] ("keep").
CommitPlan plan_commit(SeqId seq, int committed, std::span<const int> layer_lengths, int keep, const char* api);

}  // namespace kv
