// Speculative decoding in the workloads: a draft proposes k tokens, the target verifies them in
// one multi-query step over tentative tokens (kv::KVCache::begin_tentative), the accepted prefix
// and the target's own next token are committed, the rest rolled back.
//
// Drafts: "kv", the same model reading its own copy of the context in a more aggressive KV
// format (draft_k_format, draft_v_format), a second KV cache; "layers:N" (llama backend), the
// target's first N layers and its output head over the target's own pages (self-speculative);
// a synthetic preset's name (synthetic backend), a smaller model with its own geometry that
// prefills every prompt into its own copy and proposes from it.
// On the llama backend the draft's greedy proposals are checked against the target's greedy
// choices (measured) and decode runs free, on the model's own tokens. On the synthetic backend
// there is no model to disagree with: whether each proposal matches the target is drawn from
// `accept_rate` (configured, not measured - the figures say so), and a rejected proposal is a
// token the script does not hold, whose K/V the verify step computes and the commit drops.
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include "quant/format.h"

namespace kvbench {

struct SpeculativeConfig {
  bool enabled = false;
  std::string draft = "kv";
  int draft_layers = 0;  // "layers:N": N; 0 otherwise
  // Synthetic backend: the name of a smaller synthetic preset that drafts with its own
  // geometry, KV copy and generator ("" otherwise).
  std::string draft_preset;
  int k = 4;  // proposals per verify step; the verify attends k + 1 queries (kv::kMaxVerifyQueries at most)
  kv::Format draft_k_format = kv::Format::Q2;
  kv::Format draft_v_format = kv::Format::Q2;
  double accept_rate = 0.7;  // synthetic: each proposal's chance to match, independently
};

// The draft's layers from its name: N for "layers:N" (N >= 1), 0 for "kv", -1 for anything else
// (a preset's name, or nothing kvbench runs).
inline int parse_draft_layers(const std::string& draft) {
  if (draft == "kv") return 0;
  if (draft.rfind("layers:", 0) != 0 || draft.size() == 7 || draft.size() > 10) return -1;
  int n = 0;
  for (std::size_t i = 7; i < draft.size(); ++i) {
    if (draft[i] < '0' || draft[i] > '9') return -1;
    n = n * 10 + (draft[i] - '0');
  }
  return n >= 1 ? n : -1;
}

// How many of k proposals the target accepts: the leading ones that match, each with
// probability accept_rate.
inline int accepted_prefix(std::mt19937_64& rng, int k, double accept_rate) {
  std::bernoulli_distribution match(accept_rate);
  int accepted = 0;
  while (accepted < k && match(rng)) ++accepted;
  return accepted;
}

// A token id no script holds at `position` (a rejected proposal's): synthetic ids are below 2^31.
inline int rejected_token(int position) { return -1 - position; }

}  // namespace kvbench
