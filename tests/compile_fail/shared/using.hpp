// The row of the REPLACE USING key and sequence negative tests (R-USING-6):
// valid key columns (id, other) and sequences (seq, version), and a column
// of each type that can be neither, named after what it is.
#pragma once

#include <flowlib/flows/replace_using.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>

struct Row {
  std::int64_t id;
  std::int64_t other;
  std::int64_t seq;
  std::int64_t version;
  double price;
  float price_float;
  std::optional<double> price_or_null;
  double updated_at;
  std::map<std::string, std::int64_t> tags;
  std::map<std::int64_t, std::int64_t> versions;
  std::variant<std::int64_t, std::string> payload;
};

/// A second row type with a column of the same name.
struct Other {
  std::int64_t id;
  std::int64_t seq;
};

using flowlib::Key;
using flowlib::ReplaceUsing;
using flowlib::Seq;

/// Declares a Flow: its instantiation checks the key and the sequence.
template <class Flow>
int declare() {
  [[maybe_unused]] Flow flow{"f"};
  return 0;
}
