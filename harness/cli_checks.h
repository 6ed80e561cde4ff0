// Argument checks that say what is wrong with the value given: "'abc' is not a whole number",
// "1001 is not in 1..1000" (CLI11's Range says "Value abc not in range" for both).
#pragma once

#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "runtime/error.h"
#include "runtime/thread_limit.h"
#include "store_location.h"

namespace kvbench {

// --model, --tokenizer and --text of the commands that run a real model over a text.
inline void add_real_model_options(CLI::App* cmd, std::string& model, std::string& tokenizer, std::string& text,
                                   const std::string& text_help) {
  cmd->add_option("--model", model, "llama2.c checkpoint (.bin) or GGUF file")->required();
  cmd->add_option("--tokenizer", tokenizer, "llama2.c tokenizer (.bin); GGUF files carry their own");
  cmd->add_option("--text", text, text_help)->required();
}

// An option naming a results database (--db, --into, --balance-from): a file, or a PostgreSQL URI
// whose password is dropped as it is parsed, so nothing after the command line (messages, --json,
// a run's metadata, a child process) sees it. Only CLI11's own errors leave parsing as usage
// errors, so an unparsable URI's InputError (naming it without its password) becomes the
// option's message: "--db: URI: reason".
inline CLI::Validator without_password_transform(const std::string& flag) {
  return CLI::Validator(
      [flag](std::string& value) -> std::string {
        try {
          value = without_password(value, flag);
        } catch (const kv::InputError& error) {
          return fmt::format("{}: {}", error.where(), error.reason());
        }
        return "";
      },
      "");
}

inline CLI::Option* add_db_option(CLI::App* cmd, const std::string& flag, std::string& db, const std::string& help) {
  return cmd->add_option(flag, db, help)->transform(without_password_transform(flag));
}

inline CLI::Validator whole_number_in(long lo, long hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        long value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (error != std::errc() || end != text.data() + text.size()) return fmt::format("'{}' is not a whole number", text);
        if (value < lo || value > hi) return fmt::format("{} is not in {}..{}", value, lo, hi);
        return "";
      },
      fmt::format("INT in {}..{}", lo, hi));
}

// A count of things (`--last N`): a whole number, 1 or more, that an int holds. CLI11's
// PositiveNumber takes fractions and prints its bound, the largest double, in 300 digits.
inline CLI::Validator positive_count() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        long value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (end != text.data() + text.size() || (error != std::errc() && error != std::errc::result_out_of_range)) {
          return fmt::format("'{}' is not a whole number", text);
        }
        if (error == std::errc::result_out_of_range || value > std::numeric_limits<int>::max()) {
          return fmt::format("{} is too large (at most {})", text, std::numeric_limits<int>::max());
        }
        if (value < 1) return fmt::format("{} is not a positive whole number (1 or more)", value);
        return "";
      },
      "INT >= 1");
}

// A --threads value: a whole number in 0..4096 (0 = one per hardware thread) that the machine's
// thread limit allows (runtime/thread_limit.h), checked before any work.
inline CLI::Validator thread_count() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        long value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (error != std::errc() || end != text.data() + text.size()) return fmt::format("'{}' is not a whole number", text);
        try {
          return kv::thread_count_problem(value);
        } catch (const kv::InputError& bad) {
          return fmt::format("{}: {}", bad.field(), bad.reason());
        }
      },
      fmt::format("INT in 0..{} (0 = all cores)", kv::kMaxThreadsEver));
}

inline CLI::Validator number_in(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        std::size_t used = 0;
        double value = 0.0;
        try {
          value = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != text.size() || !std::isfinite(value)) return fmt::format("'{}' is not a number", text);
        if (value < lo || value > hi) return fmt::format("{} is not in [{}, {}]", text, lo, hi);
        return "";
      },
      fmt::format("NUMBER in [{}, {}]", lo, hi));
}

}  // namespace kvbench
