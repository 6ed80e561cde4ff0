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

// The same schema on PostgreSQL, rendered from the steps above rather than written a second
// time: the tables, indexes and views a SQLite database has after every step, in PostgreSQL's
// types (identity ids, 64-bit integers, double precision, text compared byte by byte as SQLite
// does) and in an order that creates a table before those that refer to it. A table without an
// id keeps its insertion order in a `rowid` column, as SQLite's implicit one does. A case's
// figures (metrics, series, histograms, events) keep no foreign key to it there: a server
// checks one row by row, at more than the cost of the write.
const std::string& postgres_schema();
// A server at version - 1 migrated to `version` (after 7, the first a server had): the SQLite
// step in PostgreSQL's types (a step that rebuilds a table needs a server text of its own).
std::string postgres_step(int version);

// The fields of an events row (JSON text, metrics/run_event.h) as an SQL expression of its kind
// and the text schemas before 7 stored; the v7 migration applies it once, and read-only opens of
// older databases as they read.
std::string event_data_from_text(const std::string& kind, const std::string& detail);

// The runs.tags column: the tags joined by commas (a tag holds none), and back.
std::string join_tags(const std::vector<std::string>& tags);
std::vector<std::string> split_tags(const std::string& tags);

}  // namespace kvbench
