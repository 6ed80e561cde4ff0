#!/usr/bin/env bash
# CTest splits a test name at ';' (catch_discover_tests registers names as CMake lists): such a
# Catch2 test would run under two broken names and fail. Every TEST_CASE name must be free of ';'.
set -u
found=$(grep -rn --include='*.cpp' -E 'TEST_CASE\("[^"]*;' "$1")
if [ -n "$found" ]; then
  echo "test names with ';' (CTest splits them; use a comma):"
  echo "$found"
  exit 1
fi
echo "no test name holds ';'"
