// flowlib/flows/cdc/detail/checkpoint.hpp
//
// AUTO CDC's state in a checkpoint: the byte encoding of both engines'
// state (SCD1: scd1_state.hpp, SCD2: scd2_state.hpp), as a whole
// (a snapshot) or as what the last batches changed (a delta), and its
// restore. AutoCdc::write_checkpoint() and read_checkpoint() call it.
// Internal.
//
// What is persisted, and why (the rest is rebuilt or is scratch):
//   - SCD1, per key: the sequence of the last change applied (it may not be
//     in the target: the column selection can drop the sequence column), the
//     key's row id or a tombstone with its deletion time (tombstones are not
//     in the table), and with ignore_null_updates the sequences that set each
//     column. Also the truncate floor (not in the table). The tombstone GC
//     queue is rebuilt from the tombstones, oldest first (with a clock that
//     does not go back, it collects exactly what the old queue did).
//   - SCD2, per key: its version rows' ids, by __START_AT, and its history:
//     the changes its versions do not show (compact history) or every change
//     with the values of its selected columns (the engine reads no other
//     column of a kept change).
//   - Row ids rather than a scan of the target: the target need not hold the
//     key columns (the column selection may drop them), and the row store
//     contract does not say which id a row in rows() has. Ids are stable
//     while a row lives, so the target a flow is restored over must be the
//     table it wrote (the same object, or one restored with its storage). A
//     restore checks that the state refers to as many rows as the target
//     holds, all below its id_bound(), and fails otherwise
//     (errc::checkpoint_mismatch).
//   - Tombstone deletion times are counts of CdcOptions::clock (steady_clock
//     by default, whose epoch is the boot): for GC to stay meaningful after
//     a restart in a new process, use a clock that continues across
//     processes (one derived from system time, say).
//   - Scratch (batch grouping, plans, one-pass marks and undo records) is not
//     persisted: a restored engine starts as a new one does.
//
// Deltas are O(the batch): the engines record, only once checkpointing
// began (the first write_checkpoint or read_checkpoint; before that apply()
// records nothing), the keys a batch changed (cdc_change_log,
// change_log.hpp), and SCD1 the
// keys its tombstone GC examined. A delta writes each such key's current
// entry, or that it has none. Keys a truncate removed are not listed: the
// truncate floor is, and a restore removes what lies below it, as the
// truncate did (R-CDC-3). A delta that follows changes made before
// checkpointing began holds the whole state, flagged as a reset.
//
// Blob format (little-endian, detail/byte_codec.hpp):
//   tag[4] ("ACD1" SCD1, "ACD2" SCD2), u16 version (1), u8 kind (0 snapshot,
//   1 delta), u8 reset (the state before is dropped; always 1 in a
//   snapshot), u8 ONCE marker, body, u64 FNV-1a of everything before it.
//   SCD1 body: optional<seq> floor, u64 n, n records
//     {key, u8 present, [seq, u32 row (0xffffffff: tombstone),
//      [i64 deleted_at], [optional<seq> since, optional<seq> per column]]}.
//   SCD2 body: u64 n, n records {key, u8 present, [u32 nv, nv x u32 row id,
//     u32 ne, ne x {seq, u8 remove, u32 version | selected columns}]}. A
//     change kept with its columns has u8 remove 2 for an upsert tied after
//     a delete (it inherits no value when replayed, R-CDC-5; only with
//     ignore_null_updates).
#pragma once

#include <flowlib/checkpoint/store.hpp>
#include <flowlib/detail/byte_codec.hpp>
#include <flowlib/detail/target_binding.hpp>
#include <flowlib/error.hpp>
#include <flowlib/flows/cdc/detail/change_log.hpp>
#include <flowlib/flows/cdc/detail/option_traits.hpp>
#include <flowlib/flows/cdc/options.hpp>
#include <flowlib/schema.hpp>
#include <flowlib/storage/row_store.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace flowlib::detail {

inline constexpr std::uint16_t cdc_checkpoint_version = 1;

/// FNV-1a (64 bits): any one changed byte changes it.
inline std::uint64_t cdc_checksum(std::string_view s) noexcept {
  std::uint64_t h = 14695981039346656037ull;
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

/// Whether a change column's type can be written (SCD2's kept changes):
/// what byte_codec encodes, and floating-point numbers (their bits).
template <class T>
constexpr bool cdc_column_encodable() {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    return true;
  } else if constexpr (is_optional_v<T>) {
    return cdc_column_encodable<typename T::value_type>();
  } else {
    return byte_encodable<T>;
  }
}

template <class T>
struct cdc_column_codec {
  static void write(byte_writer& w, const T& v) {
    if constexpr (std::is_same_v<T, float>) {
      w.integer<std::uint32_t>(std::bit_cast<std::uint32_t>(v));
    } else if constexpr (std::is_same_v<T, double>) {
      w.integer<std::uint64_t>(std::bit_cast<std::uint64_t>(v));
    } else if constexpr (is_optional_v<T> && !byte_encodable<T>) {
      w.integer<std::uint8_t>(v.has_value() ? 1 : 0);
      if (v) cdc_column_codec<typename T::value_type>::write(w, *v);
    } else {
      byte_codec<T>::write(w, v);
    }
  }
  static T read(byte_reader& r) {
    if constexpr (std::is_same_v<T, float>) {
      return std::bit_cast<float>(r.integer<std::uint32_t>());
    } else if constexpr (std::is_same_v<T, double>) {
      return std::bit_cast<double>(r.integer<std::uint64_t>());
    } else if constexpr (is_optional_v<T> && !byte_encodable<T>) {
      const auto present = r.integer<std::uint8_t>();
      if (present > 1) r.fail("an optional's null flag is neither 0 nor 1");
      if (present == 0) return T{};
      return T{cdc_column_codec<typename T::value_type>::read(r)};
    } else {
      return byte_codec<T>::read(r);
    }
  }
};

/// The checkpoint of an AUTO CDC engine (cdc_flow's scd1_engine or
/// scd2_engine); a friend of the engine classes. See the header comment.
template <class Engine>
struct cdc_checkpoint {
  using flow = typename Engine::flow;
  using state_type = typename Engine::state_type;
  using opts = typename flow::opts;
  using key_type = typename flow::key_type;
  using sequence_type = typename flow::sequence_type;
  using change_type = typename flow::change_type;
  using index_type = typename state_type::index_type;
  using entry = typename state_type::entry;
  static constexpr bool scd2 = opts::scd2;
  static constexpr char tag[4] = {'A', 'C', 'D', scd2 ? '2' : '1'};
  static constexpr row_id no_row = npos;

  static_assert(byte_encodable<key_type>,
                "flowlib::AutoCdc checkpoints: the key type has no byte encoding. Use key "
                "columns of integers, bool, enums, std::string, integer std::chrono durations "
                "or time points, or std::optional of those (a key of several columns is their "
                "std::tuple).");
  static_assert(byte_encodable<sequence_type>,
                "flowlib::AutoCdc checkpoints: the sequence type has no byte encoding. Use a "
                "sequence column of an integer, enum, std::string, an integer std::chrono "
                "duration or time point, or a std::tuple of those.");

  // ---- writing -------------------------------------------------------------------------

  static void write(const Engine& e, byte_writer& out, checkpoint_scope scope, bool once_done) {
    auto& log = e.stage_.changes;
    const std::size_t start = out.out.size();
    const bool whole = scope == checkpoint_scope::snapshot || log.untracked;
    out.out.append(tag, 4);
    out.integer<std::uint16_t>(cdc_checkpoint_version);
    out.integer<std::uint8_t>(scope == checkpoint_scope::snapshot ? 0 : 1);
    out.integer<std::uint8_t>(whole || log.reset ? 1 : 0);
    out.integer<std::uint8_t>(once_done ? 1 : 0);
    std::size_t gc_head = 0;
    if constexpr (!scd2) {
      gc_head = e.state_.gc_head;
      byte_codec<std::optional<sequence_type>>::write(out, e.state_.floor);
    }
    if (whole) {
      out.integer<std::uint64_t>(e.state_.index.size());
      for (const auto& kv : e.state_.index) write_record(out, kv.first, &kv.second);
    } else {
      std::size_t n = log.touched.size();
      if constexpr (!scd2) n += e.state_.gc_head - log.gc_from;
      out.integer<std::uint64_t>(n);
      for (const key_type& k : log.touched) write_key(e, out, k);
      if constexpr (!scd2) {
        for (std::size_t i = log.gc_from; i < e.state_.gc_head; ++i)
          write_key(e, out, e.state_.gc_queue[i].first);
      }
    }
    out.integer<std::uint64_t>(cdc_checksum(std::string_view(out.out).substr(start)));
    log.restart(gc_head);
  }

  static void write_key(const Engine& e, byte_writer& out, const key_type& k) {
    auto it = e.state_.index.find(k);
    write_record(out, k, it == e.state_.index.end() ? nullptr : &it->second);
  }

  static void write_record(byte_writer& w, const key_type& k, const entry* en) {
    byte_codec<key_type>::write(w, k);
    w.integer<std::uint8_t>(en != nullptr ? 1 : 0);
    if (en == nullptr) return;
    if constexpr (!scd2) {
      byte_codec<sequence_type>::write(w, en->seq);
      w.integer<std::uint32_t>(en->row);
      if (en->row == no_row) {
        w.integer<std::int64_t>(
            static_cast<std::int64_t>(en->deleted_at.time_since_epoch().count()));
      }
      if constexpr (state_type::ignore_active) {
        byte_codec<std::optional<sequence_type>>::write(w, en->ign.since);
        for (const auto& cs : en->ign.colseq)
          byte_codec<std::optional<sequence_type>>::write(w, cs);
      }
    } else {
      w.integer<std::uint32_t>(static_cast<std::uint32_t>(en->versions.size()));
      for (const row_id id : en->versions) w.integer<std::uint32_t>(id);
      w.integer<std::uint32_t>(static_cast<std::uint32_t>(en->history.size()));
      for (const auto& ev : en->history) {
        byte_codec<sequence_type>::write(w, ev.seq);
        if constexpr (state_type::compact_history) {
          w.integer<std::uint8_t>(ev.remove ? 1 : 0);
          w.integer<std::uint32_t>(ev.version);
        } else {
          w.integer<std::uint8_t>(ev.remove ? 1 : ev.after_delete ? 2 : 0);
          schema_of<change_type>::for_each([&](auto cc) {
            using CC = decltype(cc);
            if constexpr (cdc_rules<opts>::selected(CC::name)) {
              using V = std::remove_cvref_t<decltype(CC::get(ev.row))>;
              cdc_column_codec<V>::write(w, CC::get(ev.row));
            }
          });
        }
      }
    }
  }

  // ---- reading -------------------------------------------------------------------------

  /// The state a restore builds before it is swapped in.
  struct image {
    index_type index;
    std::optional<sequence_type> floor;  // SCD1
    bool once_done = false;
  };

  template <class Table>
  static void read(Engine& e, Table& target, const checkpoint_blobs& blobs, target_binding& binding,
                   std::string_view kind) {
    if constexpr (!scd2) {
      static_assert(std::is_default_constructible_v<sequence_type>);
    } else if constexpr (!state_type::compact_history) {
      static_assert(
          std::is_default_constructible_v<change_type>,
          "flowlib::AutoCdc checkpoints (SCD2): the change row type must be "
          "default-constructible (kept changes are rebuilt from their selected columns).");
    }
    image img{fresh_index(e), {}, false};
    if (blobs.snapshot) decode(e, img, *blobs.snapshot, checkpoint_scope::snapshot);
    for (const std::string_view d : blobs.deltas) decode(e, img, d, checkpoint_scope::delta);
    auto& store = target.store();
    check_rows(e, img, store, target.name());
    std::vector<std::pair<key_type, flowlib::cdc_clock::time_point>> queue;
    if constexpr (!scd2) {
      if (e.stage_.settings.tombstone_gc_threshold) {
        for (const auto& kv : img.index) {
          if (kv.second.row == no_row) queue.emplace_back(kv.first, kv.second.deleted_at);
        }
        std::stable_sort(queue.begin(), queue.end(),
                         [](const auto& a, const auto& b) { return a.second < b.second; });
      }
    }
    binding.claim(target, kind, e.stage_.name, /*exclusive=*/true);  // the last fallible step
    // Swap in (nothing below can fail).
    e.reset_state();
    e.state_.index = std::move(img.index);
    if constexpr (!scd2) {
      e.state_.floor = std::move(img.floor);
      std::size_t tombs = 0;
      for (const auto& kv : e.state_.index) tombs += kv.second.row == no_row ? 1 : 0;
      e.state_.tombstones = tombs;
      e.state_.gc_queue = std::move(queue);
      e.state_.gc_head = 0;
    }
    binding.restore_once(img.once_done);
    e.stage_.changes.restart(0);
  }

  static index_type fresh_index(const Engine& e) {
    return e.stage_.template empty_index<index_type>();
  }

  static void decode(const Engine& e, image& img, std::string_view blob, checkpoint_scope expect) {
    byte_reader r{blob, 0, e.stage_.name, "; the flow's state was left as it was",
                  errc::checkpoint_corrupt};
    r.need(4);
    if (std::memcmp(blob.data(), tag, 4) != 0) {
      r.fail(std::string("this is not an AUTO CDC ") + (scd2 ? "SCD2" : "SCD1") +
             " checkpoint (wrong tag)");
    }
    r.pos = 4;
    const auto version = r.integer<std::uint16_t>();
    if (version != cdc_checkpoint_version) {
      r.fail("unknown checkpoint format version " + std::to_string(version));
    }
    if (blob.size() < r.pos + 3 + 8) {
      r.fail("the data is truncated");
    }
    const std::size_t body_end = blob.size() - 8;
    {
      byte_reader c{blob, body_end, e.stage_.name, r.suffix, r.code};
      if (c.integer<std::uint64_t>() != cdc_checksum(blob.substr(0, body_end))) {
        r.fail("the checksum does not match (the data is damaged)");
      }
    }
    r.in = blob.substr(0, body_end);
    const auto k = r.integer<std::uint8_t>();
    if (k != (expect == checkpoint_scope::snapshot ? 0 : 1)) {
      r.fail(expect == checkpoint_scope::snapshot ? "a delta where a snapshot was expected"
                                                  : "a snapshot where a delta was expected");
    }
    const bool reset = read_flag(r);
    if (expect == checkpoint_scope::snapshot && !reset) r.fail("a snapshot without its reset flag");
    img.once_done = read_flag(r);
    if (reset) {
      img.index = fresh_index(e);
      img.floor.reset();
    }
    std::optional<sequence_type> floor;
    if constexpr (!scd2) floor = byte_codec<std::optional<sequence_type>>::read(r);
    const auto n = r.integer<std::uint64_t>();
    for (std::uint64_t i = 0; i < n; ++i) {
      key_type key = byte_codec<key_type>::read(r);
      const bool present = read_flag(r);
      auto it = img.index.find(key);
      if (!present) {
        if (it != img.index.end()) img.index.erase(it);
        continue;
      }
      entry en = read_entry(r);
      if (it != img.index.end()) {
        it->second = std::move(en);
      } else {
        img.index.emplace(std::move(key), std::move(en));
      }
    }
    if (r.pos != r.in.size()) r.fail("unexpected bytes after the state");
    if constexpr (!scd2) {
      if (img.floor && (!floor || *floor < *img.floor)) r.fail("the truncate floor went down");
      if (floor && (!img.floor || *img.floor < *floor)) apply_floor(img, *floor);
      img.floor = std::move(floor);
    }
  }

  static bool read_flag(byte_reader& r) {
    const auto b = r.integer<std::uint8_t>();
    if (b > 1) r.fail("a flag is neither 0 nor 1");
    return b == 1;
  }

  static entry read_entry(byte_reader& r) {
    entry en{};
    if constexpr (!scd2) {
      en.seq = byte_codec<sequence_type>::read(r);
      en.row = r.integer<std::uint32_t>();
      if (en.row == no_row) {
        en.deleted_at = flowlib::cdc_clock::time_point(flowlib::cdc_clock::duration(
            static_cast<flowlib::cdc_clock::rep>(r.integer<std::int64_t>())));
      }
      if constexpr (state_type::ignore_active) {
        en.ign.since = byte_codec<std::optional<sequence_type>>::read(r);
        for (auto& cs : en.ign.colseq) cs = byte_codec<std::optional<sequence_type>>::read(r);
      }
    } else {
      const auto nv = r.integer<std::uint32_t>();
      for (std::uint32_t v = 0; v < nv; ++v) {
        r.need(4);
        en.versions.push_back(r.integer<std::uint32_t>());
      }
      const auto ne = r.integer<std::uint32_t>();
      for (std::uint32_t x = 0; x < ne; ++x) {
        sequence_type s = byte_codec<sequence_type>::read(r);
        if constexpr (state_type::compact_history) {
          const bool remove = read_flag(r);
          const auto version = r.integer<std::uint32_t>();
          if (!remove && version >= nv) r.fail("a kept change refers to a version the key lacks");
          en.history.push_back({std::move(s), remove ? 0 : version, remove});
        } else {
          const auto kind = r.integer<std::uint8_t>();
          if (kind > 2) r.fail("a kept change is neither an upsert nor a delete");
          const bool remove = kind == 1;
          const bool after_delete = kind == 2;
          change_type row{};
          schema_of<change_type>::for_each([&](auto cc) {
            using CC = decltype(cc);
            if constexpr (cdc_rules<opts>::selected(CC::name)) {
              using V = std::remove_cvref_t<decltype(CC::get(row))>;
              static_assert(cdc_column_encodable<V>(),
                            "flowlib::AutoCdc checkpoints (SCD2 keeping its changes): a selected "
                            "change column has a type without a byte encoding; use numbers, "
                            "bool, enums, std::string, integer std::chrono types, or "
                            "std::optional of those.");
              CC::get(row) = cdc_column_codec<V>::read(r);
            }
          });
          en.history.push_back({std::move(s), remove, after_delete, std::move(row)});
        }
      }
      for (std::size_t x = 1; x < en.history.size(); ++x) {
        if (en.history[x].seq < en.history[x - 1].seq) r.fail("a key's changes are out of order");
      }
    }
    return en;
  }

  /// SCD1: what a truncate at `f` did to the entries a delta does not list
  /// (R-CDC-3; with ignore_null_updates, scd1_planned::plan_truncate_ignored):
  /// entries below it go; the others lose the values columns ignoring nulls
  /// kept from below it. (The listed entries are already as it left them.)
  static void apply_floor(image& img, const sequence_type& f) {
    for (auto it = img.index.begin(); it != img.index.end();) {
      if (it->second.seq < f) {
        img.index.erase(it++);
        continue;
      }
      if constexpr (state_type::ignore_active) {
        entry& en = it->second;
        if (en.row != no_row && state_type::kept_below(en, f)) state_type::clear_below(en, f);
      }
      ++it;
    }
  }

  /// The state must refer to the rows the target holds (see the header).
  template <class Store>
  static void check_rows(const Engine& e, const image& img, const Store& store,
                         std::string_view table) {
    std::size_t rows = 0;
    bool in_range = true;
    for (const auto& kv : img.index) {
      if constexpr (!scd2) {
        if (kv.second.row != no_row) {
          ++rows;
          in_range = in_range && kv.second.row < store.id_bound();
        }
      } else {
        rows += kv.second.versions.size();
        for (const row_id id : kv.second.versions) in_range = in_range && id < store.id_bound();
      }
    }
    if (!in_range || rows != store.size()) {
      throw error(errc::checkpoint_mismatch, e.stage_.name, "", "",
                  "cannot restore the state: it refers to " + std::to_string(rows) +
                      " rows, and table '" + std::string(table) + "' holds " +
                      std::to_string(store.size()) +
                      (in_range ? "" : " (some not among its row ids)") +
                      "; restore the flow over the table it wrote, with its rows; the flow's "
                      "state was left as it was");
    }
  }
};

}  // namespace flowlib::detail
