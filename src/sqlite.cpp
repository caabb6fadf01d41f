// src/sqlite.cpp: the library flowlib::sqlite_compiled.
//
// Compiles, once, the SQLite wing's row-type-independent definitions:
// SqliteCheckpoint, the SQLite connection layer and SqliteStorage's SQL.
// A program that defines FLOWLIB_SQLITE_SEPARATE_COMPILATION declares them
// only and links this library (detail/config.hpp).
#if !defined(FLOWLIB_SQLITE_SEPARATE_COMPILATION)
#error "src/sqlite.cpp is compiled with FLOWLIB_SQLITE_SEPARATE_COMPILATION (the CMake target flowlib::sqlite_compiled defines it)"
#endif

#include <flowlib/storage/detail/impl/sqlite_db.ipp>
#include <flowlib/checkpoint/impl/sqlite.ipp>
#include <flowlib/storage/impl/sqlite.ipp>
