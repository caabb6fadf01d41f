// flowlib/detail/config.hpp
//
// Header-only or compiled. By default flowlib is header-only: every
// function is defined in the headers (the row-type-independent ones in the
// .ipp files each header includes at its end, as inline functions), and a
// program compiles all it uses. A program that defines
// FLOWLIB_SEPARATE_COMPILATION in every one of its translation units gets
// the declarations only of those functions, and their definitions from
// the library flowlib::compiled (src/flowlib.cpp, which compiles the .ipp
// files once): the pipeline runtime, the checkpoint stores, the record
// framing, the event log, the task pool, FileStorage's record layout. Only
// templates are compiled in each program then. See
// docs/design/separate-compilation.md.
//
// The parts that need another library (wings) have switches of their own,
// set by their compiled targets, so that a program that defines
// FLOWLIB_SEPARATE_COMPILATION alone still gets them inline, as in
// header-only mode:
//   FLOWLIB_SQLITE_SEPARATE_COMPILATION  SqliteCheckpoint, SqliteStorage's
//       SQL, the SQLite connection layer: flowlib::sqlite_compiled
//       (src/sqlite.cpp, links SQLite);
//   FLOWLIB_KAFKA_SEPARATE_COMPILATION   the librdkafka layer, KafkaSink's
//       engine, KafkaSource's consumer: flowlib::kafka_compiled
//       (src/kafka.cpp, links librdkafka and simdjson).
// Each compiled wing target links flowlib::compiled, whose switch it needs.
//
// FLOWLIB_DECL (and FLOWLIB_SQLITE_DECL, FLOWLIB_KAFKA_DECL) prefixes those
// functions' definitions in the .ipp files, and the declarations of free
// functions: `inline` in header-only mode, nothing where the library
// compiles them. Every translation unit of a program must see the same
// switches (CMake's targets set them as usage requirements).
#pragma once

#if defined(FLOWLIB_SEPARATE_COMPILATION)
#define FLOWLIB_DECL
#else
#define FLOWLIB_DECL inline
#endif

#if defined(FLOWLIB_SQLITE_SEPARATE_COMPILATION)
#define FLOWLIB_SQLITE_DECL
#else
#define FLOWLIB_SQLITE_DECL inline
#endif

#if defined(FLOWLIB_KAFKA_SEPARATE_COMPILATION)
#define FLOWLIB_KAFKA_DECL
#else
#define FLOWLIB_KAFKA_DECL inline
#endif
