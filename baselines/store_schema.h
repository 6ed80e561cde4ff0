// The results store's schema, described once: version 1's tables and each later version's
// migration, in order. A step is never edited once shipped: a database migrated by it keeps
// what it did. Internal to baselines/.
#pragma once

#include <string>
#include <vector>

namespace kvbench {

// The SQL of one step: version 1 creates the schema; version v (2..kSchemaVersion) migrates a
// database at v - 1 to v.
const std::string& schema_step(int version);

// The fields of an events row (JSON text, metrics/run_event.h) as an SQL expression of its kind
// and the text schemas before 7 stored; the v7 migration applies it once, and read-only opens of
// older databases as they read.
std::string event_data_from_text(const std::string& kind, const std::string& detail);

// The runs.tags column: the tags joined by commas (a tag holds none), and back.
std::string join_tags(const std::vector<std::string>& tags);
std::vector<std::string> split_tags(const std::string& tags);

}  // namespace kvbench
