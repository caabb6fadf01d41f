// AUTO CDC: apply the users change feed of the reference docs to an SCD type 1
// table (current rows) and to an SCD type 2 table (full history), print both,
// and check them against the documented results.
#include <flowlib/flows/auto_cdc.hpp>
#include <flowlib/table.hpp>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace fl = flowlib;

// One row of the change feed.
struct Change {
  std::int64_t userId;
  std::optional<std::string> name;
  std::optional<std::string> city;
  std::string operation;  // INSERT, UPDATE, DELETE or TRUNCATE
  std::int64_t sequenceNum;
};
FLOWLIB_SCHEMA(Change, userId, name, city, operation, sequenceNum);

// SCD type 1 target: the change's columns but operation and sequenceNum.
struct User {
  std::int64_t userId;
  std::optional<std::string> name;
  std::optional<std::string> city;
  friend bool operator==(const User&, const User&) = default;
};
FLOWLIB_SCHEMA(User, userId, name, city);

// SCD type 2 target: the same columns plus __START_AT and __END_AT, of the
// sequence's type (C++ reserves names with a double underscore, so the
// members are renamed in the schema).
struct UserHistory {
  std::int64_t userId;
  std::optional<std::string> name;
  std::optional<std::string> city;
  std::int64_t start_at;
  std::optional<std::int64_t> end_at;  // null: the current version
  friend bool operator==(const UserHistory&, const UserHistory&) = default;
};
FLOWLIB_SCHEMA(UserHistory, userId, name, city, (start_at, "__START_AT"), (end_at, "__END_AT"));

struct IsDelete {
  bool operator()(const Change& c) const { return c.operation == "DELETE"; }
};
struct IsTruncate {
  bool operator()(const Change& c) const { return c.operation == "TRUNCATE"; }
};

using UsersScd1 = fl::AutoCdc<fl::Key<&Change::userId>, fl::Seq<&Change::sequenceNum>, fl::Scd1,
                              fl::apply_as_deletes<IsDelete>, fl::apply_as_truncates<IsTruncate>,
                              fl::except_column_list<"operation", "sequenceNum">>;
using UsersScd2 = fl::AutoCdc<fl::Key<&Change::userId>, fl::Seq<&Change::sequenceNum>, fl::Scd2<>,
                              fl::apply_as_deletes<IsDelete>,
                              fl::except_column_list<"operation", "sequenceNum">>;

namespace {

const char* text(const std::optional<std::string>& s) { return s ? s->c_str() : "null"; }

void print(const fl::StreamingTable<User>& t) {
  std::printf("| userId | name | city |\n|---|---|---|\n");
  for (const User& u : t.sorted_rows()) {
    std::printf("| %lld | %s | %s |\n", static_cast<long long>(u.userId), text(u.name), text(u.city));
  }
}

void print(const fl::StreamingTable<UserHistory>& t) {
  std::printf("| userId | name | city | __START_AT | __END_AT |\n|---|---|---|---|---|\n");
  for (const UserHistory& u : t.sorted_rows()) {
    std::printf("| %lld | %s | %s | %lld | %s |\n", static_cast<long long>(u.userId), text(u.name),
                text(u.city), static_cast<long long>(u.start_at),
                u.end_at ? std::to_string(*u.end_at).c_str() : "null");
  }
}

bool check(bool ok, const char* what) {
  if (!ok) std::fprintf(stderr, "unexpected result: %s\n", what);
  return ok;
}

}  // namespace

int main() {
  const std::vector<Change> feed{
      {124, "Raul", "Oaxaca", "INSERT", 1},
      {123, "Isabel", "Monterrey", "INSERT", 1},
      {125, "Mercedes", "Tijuana", "INSERT", 2},
      {126, "Lily", "Cancun", "INSERT", 2},
      {123, std::nullopt, std::nullopt, "DELETE", 6},
      {125, "Mercedes", "Guadalajara", "UPDATE", 6},
      {125, "Mercedes", "Mexicali", "UPDATE", 5},
      {123, "Isabel", "Chihuahua", "UPDATE", 5},
  };
  bool ok = true;

  // SCD type 1: the current row of every user.
  fl::StreamingTable<User> users{"users"};
  UsersScd1 scd1{"users_cdc"};
  const fl::BatchStats s1 = scd1.apply(users, feed);
  std::printf("SCD type 1 (upserted %llu, deleted %llu):\n\n",
              static_cast<unsigned long long>(s1.upserted_rows),
              static_cast<unsigned long long>(s1.deleted_rows));
  print(users);
  ok &= check(users.sorted_rows() == std::vector<User>{{124, "Raul", "Oaxaca"},
                                                       {125, "Mercedes", "Guadalajara"},
                                                       {126, "Lily", "Cancun"}},
              "SCD1");

  // A truncate removes every row older than it: only 125 (sequence 6) stays.
  scd1.apply(users, std::vector<Change>{{0, std::nullopt, std::nullopt, "TRUNCATE", 3}});
  std::printf("\nSCD type 1 after TRUNCATE at 3:\n\n");
  print(users);
  ok &= check(users.sorted_rows() == std::vector<User>{{125, "Mercedes", "Guadalajara"}},
              "SCD1 truncate");

  // SCD type 2: every version of every user. The feed arrives in two
  // batches, the second one late: the flow puts it at its place in history.
  fl::StreamingTable<UserHistory> history{"users_history"};
  UsersScd2 scd2{"users_history_cdc"};
  scd2.apply(history, std::vector<Change>(feed.begin(), feed.begin() + 6));
  scd2.apply(history, std::vector<Change>(feed.begin() + 6, feed.end()));
  std::printf("\nSCD type 2:\n\n");
  print(history);
  ok &= check(history.sorted_rows() ==
                  std::vector<UserHistory>{{123, "Isabel", "Chihuahua", 5, 6},
                                           {123, "Isabel", "Monterrey", 1, 5},
                                           {124, "Raul", "Oaxaca", 1, std::nullopt},
                                           {125, "Mercedes", "Guadalajara", 6, std::nullopt},
                                           {125, "Mercedes", "Mexicali", 5, 6},
                                           {125, "Mercedes", "Tijuana", 2, 5},
                                           {126, "Lily", "Cancun", 2, std::nullopt}},
              "SCD2");
  return ok ? 0 : 1;
}
