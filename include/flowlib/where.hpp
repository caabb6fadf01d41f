// flowlib/where.hpp
//
// The REPLACE WHERE predicate language, namespace flowlib::where:
//
//   namespace w = flowlib::where;
//   w::expr p = w::col("event_date") >= w::current_date() - w::days(7);
//   auto b = w::bind<Event>(p);                 // where/bind.hpp
//   b.prepare(w::context{now});                 // the update's clock
//   bool keep = b(event);
//   std::optional<w::window> win = p.window(w::context{now});  // where/window.hpp
//
// Components: where/value.hpp (values, literals, context), where/expr.hpp
// (the expression tree and its inspection), where/window.hpp (single-column
// intervals), where/column.hpp (reading columns by name), where/bind.hpp
// (fast evaluation on a row type). docs/where-expressions.md is the
// reference.
#pragma once

#include <flowlib/where/bind.hpp>
#include <flowlib/where/column.hpp>
#include <flowlib/where/expr.hpp>
#include <flowlib/where/value.hpp>
#include <flowlib/where/window.hpp>
