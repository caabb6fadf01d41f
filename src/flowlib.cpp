// src/flowlib.cpp: the library flowlib::compiled.
//
// Compiles, once, the definitions that every header-only program compiles
// again: the row-type-independent functions of the core (the pipeline
// runtime, the checkpoint stores and their record framing, the event log,
// the task pool, FileStorage's record layout). A program that defines
// FLOWLIB_SEPARATE_COMPILATION declares them only and links this library
// (detail/config.hpp, docs/design/separate-compilation.md). The wings that
// need other libraries are compiled by src/sqlite.cpp and src/kafka.cpp.
#if !defined(FLOWLIB_SEPARATE_COMPILATION)
#error "src/flowlib.cpp is compiled with FLOWLIB_SEPARATE_COMPILATION (the CMake target flowlib::compiled defines it)"
#endif

// Framing and checksums.
#include <flowlib/detail/impl/crc32.ipp>
#include <flowlib/detail/impl/checkpoint_record.ipp>

// Threads.
#include <flowlib/detail/impl/task_pool.ipp>

// Checkpoint stores.
#include <flowlib/checkpoint/detail/impl/file_io.ipp>
#include <flowlib/checkpoint/detail/impl/journal.ipp>
#include <flowlib/checkpoint/impl/file.ipp>
#include <flowlib/checkpoint/impl/memory.ipp>

// The pipeline runtime.
#include <flowlib/runtime/impl/batch_protocol.ipp>
#include <flowlib/runtime/impl/catalog.ipp>
#include <flowlib/runtime/impl/checkpoint_log.ipp>
#include <flowlib/runtime/impl/event_log.ipp>
#include <flowlib/runtime/impl/export.ipp>
#include <flowlib/runtime/impl/pipeline.ipp>

// FileStorage's record layout.
#include <flowlib/storage/impl/file.ipp>
