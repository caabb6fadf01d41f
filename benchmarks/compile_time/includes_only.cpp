// Compile-time table (scripts/compile_times): flowlib's umbrella header and
// the SQLite headers included, nothing used.
#include <flowlib/checkpoint/sqlite.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/storage/sqlite.hpp>

int main() { return 0; }
