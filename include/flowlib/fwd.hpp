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

}  // namespace flowlib
