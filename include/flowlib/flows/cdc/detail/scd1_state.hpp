// flowlib/flows/cdc/detail/scd1_state.hpp
//
// AUTO CDC, SCD type 1: the state the engine keeps between batches (a
// member of cdc_flow::scd1_engine, engine.hpp), which both of its apply
// paths read and write: the key index with each key's entry (its last sequence, its row or
// a tombstone, and with ignore_null_updates the sequence that set each
// column that ignores nulls), the tombstones and their GC queue, and the
// truncate floor. checkpoint.hpp persists it. Internal.
#pragma once

#include <flowlib/detail/flat_index.hpp>
#include <flowlib/detail/key_index.hpp>
#include <flowlib/flows/cdc/detail/change_log.hpp>
#include <flowlib/flows/cdc/detail/flow.hpp>
#include <flowlib/flows/cdc/detail/staging.hpp>
#include <flowlib/flows/cdc/options.hpp>
#include <flowlib/storage/row_store.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

namespace flowlib::detail {

/// The SCD1 state (K, S, Scd, Options as in flowlib::AutoCdc).
template <class K, class S, class Scd, class... Options>
struct cdc_flow<K, S, Scd, Options...>::scd1_state {
  static constexpr bool ignore_active = n_ignored > 0;

  struct null_state {};
  struct ignore_state {
    std::optional<sequence_type> since;  // the latest delete at or below seq
    std::array<std::optional<sequence_type>, n_ignored> colseq{};  // who set each column
  };
  struct entry {
    sequence_type seq;          // the latest change applied (upsert or delete)
    row_id row = cdc_no_row;    // cdc_no_row: a tombstone
    std::uint32_t pass = 0;     // one-pass apply: the pass that last touched the key
    cdc_clock::time_point deleted_at{};
    std::uint32_t rec = 0;      // ... and the key's undo record in that pass
    [[no_unique_address]] std::conditional_t<ignore_active, ignore_state, null_state> ign{};
  };
  // (Not key_index: see flat_index.hpp for what it adds.)
  using index_type = flat_index<key_type, entry, key_index_hash<K, probe>,
                                key_index_eq<K, probe>>;

  explicit scd1_state(const staging& stage)
      : index(stage.template empty_index<index_type>()) {}

  /// As new (R-EXACT-5): no keys, tombstones or floor; the index is freed.
  void reset(const staging& stage) noexcept {
    index = stage.template empty_index<index_type>();
    floor.reset();
    tombstones = 0;
    gc_queue = {};
    gc_head = 0;
  }

  /// Reads the batch's time (once per batch), where tombstones are collected.
  void read_clock(const CdcOptions& settings) {
    if (!settings.tombstone_gc_threshold) {
      now = cdc_clock::time_point{};
    } else {
      now = settings.clock ? settings.clock() : cdc_clock::now();
    }
  }
  /// Whether e is a tombstone old enough to be collected.
  bool expired(const CdcOptions& settings, const entry& e) const noexcept {
    return settings.tombstone_gc_threshold &&
           e.deleted_at + *settings.tombstone_gc_threshold <= now;
  }

  // Tombstone GC (R-CDC-2): tombstones older than the threshold go, oldest
  // first; a queue entry whose key was changed since is stale and skipped.
  void collect_tombstones(const CdcOptions& settings) noexcept {
    while (gc_head < gc_queue.size()) {
      auto& [key, at] = gc_queue[gc_head];
      if (at + *settings.tombstone_gc_threshold > now) break;
      auto it = index.find(key);
      if (it != index.end() && it->second.row == cdc_no_row && it->second.deleted_at == at) {
        index.erase(it);
        --tombstones;
      }
      ++gc_head;
    }
  }

  /// Drops the GC queue's examined entries once they are more than half of
  /// it (moves only); a checkpoint that follows lists their keys.
  void compact_gc_queue(cdc_change_log<key_type>& changes) {
    if (gc_head <= gc_queue.size() / 2) return;
    if (changes.tracking) {
      for (std::size_t i = changes.gc_from; i < gc_head; ++i) {
        changes.touched.push_back(gc_queue[i].first);
      }
      changes.gc_from = 0;
    }
    gc_queue.erase(gc_queue.begin(), gc_queue.begin() + static_cast<std::ptrdiff_t>(gc_head));
    gc_head = 0;
  }

  // With ignore_null_updates, a truncate acts on a row that survives it as a
  // delete at the truncate's sequence would: values that columns ignoring
  // nulls kept from changes below it are gone (R-CDC-1 with R-CDC-3, R-CDC-6).
  /// Whether e keeps a value set below the truncate at f.
  static bool kept_below(const entry& e, const sequence_type& f) {
    for (const auto& cs : e.ign.colseq) {
      if (cs && *cs < f) return true;
    }
    return false;
  }
  /// e as the truncate at f leaves it (its target row's columns whose
  /// sequence is below f are made null by the caller first).
  static void clear_below(entry& e, const sequence_type& f) {
    if (!e.ign.since || *e.ign.since < f) e.ign.since = f;
    for (auto& cs : e.ign.colseq) {
      if (cs && *cs < f) cs.reset();
    }
  }

  index_type index;
  std::optional<sequence_type> floor;  // highest truncate applied
  std::size_t tombstones = 0;
  std::vector<std::pair<key_type, cdc_clock::time_point>> gc_queue;  // by deletion time
  std::size_t gc_head = 0;
  cdc_clock::time_point now{};  // the batch's time (tombstone GC)
};

}  // namespace flowlib::detail
