// flowlib/flows/cdc/detail/flow.hpp
//
// The parts of an AUTO CDC flow and the types they share. cdc_flow<K, S,
// Scd, Options...> (the parameters of flowlib::AutoCdc) names the flow's
// types once (its change, key and sequence types, its options, the column
// mapping) and declares its parts as member classes, each defined in a
// header of its own:
//
//   staging         staging.hpp        configuration and the staging of a batch
//   scd1_state      scd1_state.hpp     SCD1: key index, tombstones, truncate floor
//   scd1_planned    scd1_planned.hpp   SCD1: the planned path
//   scd1_one_pass   scd1_one_pass.hpp  SCD1: the one-pass path
//   scd2_state      scd2_state.hpp     SCD2: key index, versions, kept history
//   scd2_planned    scd2_planned.hpp   SCD2: the planned path
//   scd2_one_pass   scd2_one_pass.hpp  SCD2: the one-pass path
//   engine          engine.hpp         an engine: staging, a state and its two
//                                      paths; scd1_engine and scd2_engine
//
// A part names the flow's types and its sibling parts directly (they are
// members of the enclosing class), and holds the parts it works on as
// members (the engines) or takes them by reference (the paths). Also here:
// what both engines' paths share. Internal.
#pragma once

#include <flowlib/columns.hpp>
#include <flowlib/flows/cdc/detail/batch.hpp>
#include <flowlib/flows/cdc/detail/mapping.hpp>
#include <flowlib/flows/cdc/detail/option_traits.hpp>
#include <flowlib/schema.hpp>
#include <flowlib/storage/row_store.hpp>

#include <cstddef>
#include <cstdint>
#include <ranges>
#include <type_traits>

namespace flowlib::detail {

template <class Engine>
struct cdc_checkpoint;  // checkpoint.hpp; a friend of the engines

/// What a change does.
enum class cdc_op : std::uint8_t { upsert, remove, truncate };

/// The row id of a key without a target row (an SCD1 tombstone).
inline constexpr row_id cdc_no_row = npos;

/// Whether a batch of type R can be applied in one pass into a target of
/// row type Target (both engines): its rows stay put while it is applied
/// (a forward range of lvalues of the change type; the pass keeps pointers
/// into it), and target rows move without throwing (the undo moves them).
template <class R, class Change, class Target>
concept cdc_one_pass_batch =
    std::ranges::forward_range<R> &&
    std::is_lvalue_reference_v<std::ranges::range_reference_t<R>> &&
    std::is_same_v<std::remove_cvref_t<std::ranges::range_reference_t<R>>, Change> &&
    std::is_nothrow_move_constructible_v<Target> && std::is_nothrow_move_assignable_v<Target>;

/// The number of an engine's next one pass, whose index entries record the
/// pass that last touched them (0: none). When the count wraps, every
/// entry is cleared first, so that none looks touched by the new pass.
template <class Index>
std::uint32_t cdc_next_pass(std::uint32_t pass, Index& index) {
  if (++pass == 0) {
    for (auto& kv : index) kv.second.pass = 0;
    pass = 1;
  }
  return pass;
}

/// The types and parts of an AUTO CDC flow (see the header comment).
template <class K, class S, class Scd, class... Options>
struct cdc_flow {
  using opts = cdc_options<Scd, Options...>;
  using change_type = typename K::row_type;
  using key_type = typename K::value_type;
  using sequence_type = typename S::value_type;
  using traits = key_traits<K>;
  using op = cdc_op;
  using probe = cdc_probe<change_type>;
  using scratch_type = cdc_batch<K>;  // the batch grouped by key
  using ignored_cols = cdc_ignored_columns<change_type, opts>;
  static constexpr std::size_t n_ignored = ignored_cols::count();
  template <class Target>
  using mapping = cdc_mapping<change_type, Target, opts>;
  template <class Target>
  using start_col = column_named_t<Target, "__START_AT">;
  template <class Target>
  using end_col = column_named_t<Target, "__END_AT">;

  // SCD2's kept history (scd2_state.hpp): with every column tracked and
  // none ignoring nulls, a key keeps only the changes its versions do not
  // show, each referring to a version (compact); otherwise every change.
  static constexpr bool scd2_compact_history =
      opts::ignore_mode == 0 && opts::scd::track_mode == 0 && !opts::strict &&
      std::is_nothrow_move_constructible_v<sequence_type> &&
      std::is_nothrow_move_assignable_v<sequence_type>;
  struct scd2_full_event;
  struct scd2_ref_event;
  using scd2_event = std::conditional_t<scd2_compact_history, scd2_ref_event, scd2_full_event>;
  struct scd2_entry;
  struct scd2_pass_record;
  struct scd2_pass_context;

  class staging;
  struct scd1_state;
  class scd1_planned;
  class scd1_one_pass;
  struct scd2_state;
  class scd2_planned;
  class scd2_one_pass;
  template <class State, class Planned, class OnePass>
  class engine;
  using scd1_engine = engine<scd1_state, scd1_planned, scd1_one_pass>;
  using scd2_engine = engine<scd2_state, scd2_planned, scd2_one_pass>;
};

}  // namespace flowlib::detail
