// flowlib/fwd.hpp
//
// Declarations of flowlib's public class templates, for headers that only
// name them.
#pragma once

#include <cstdint>

namespace flowlib {

template <class Row>
struct schema_tag;
template <auto... Members>
struct Key;
template <auto... Members>
struct Seq;
struct MemoryStorage;
template <class Row, class Storage>
class StreamingTable;
struct BatchStats;
struct ExpectationMetrics;
enum class on_violation;
template <class Pred>
struct Expectation;
template <class... Preds>
class Expectations;
class error;
enum class errc;

// Tables.
template <class Row, class Layout>
class TableOptions;
template <class Row, class Storage>
class ManagedTable;
class Catalog;

// Flows and operators. ReplaceUsing and AutoCdc constrain their parameters
// with concepts from <flowlib/columns.hpp>; include their headers to name them.
struct Once;
struct AppendStats;
template <class... Opts>
class Append;
struct Scd1;
template <class... TrackOptions>
struct Scd2;
struct CdcOptions;
struct CdcEngineOptions;
template <auto... Members>
struct EventTime;
struct DedupStats;
struct DedupOptions;
template <class K, class T>
class DedupWithinWatermark;


// The REPLACE WHERE predicate language (<flowlib/where.hpp>).
namespace where {
class value;
struct interval;
struct context;
struct endpoint;
class window;
class expr;
template <class Row>
class bound;
template <class Row>
class column_reader;
}  // namespace where

}  // namespace flowlib
