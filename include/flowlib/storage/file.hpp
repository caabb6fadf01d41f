// flowlib/storage/file.hpp
//
// FileStorage: the durable storage policy whose rows live in the pipeline's
// checkpoint (FileCheckpoint, as its name says, or any durable checkpoint),
// as a log of records: a table's working set is the memory store, and each
// micro-batch writes what it changed in the table as one record, in the
// batch, before the batch's commit record; now and then the record is a
// whole image of the table instead. No database: a durable batch costs the
// encoding of the rows it changed and the checkpoint's atomic writes.
//
//   flowlib::FileCheckpoint checkpoint{"/var/lib/app/ckpt"};
//   flowlib::StreamingTable<Booking, flowlib::FileStorage> current{"bookings_current"};
//   flowlib::Pipeline pipeline{"bookings", checkpoint};   // attaches `current` at open
//
// Records, under "tables/<hex of the table's name>/<seq>" (seq: 20 decimal
// digits, rising by one per record):
//   - a delta: the ids the batch erased, the (id, row) pairs it inserted or
//     changed, the new id bound, and the rows appended to the table's append
//     log (which a TableSource reading the table follows), with the log's
//     new start;
//   - a snapshot: every (id, row), the id bound, the whole append log.
// Each record names its writer: batch N of flow F, or nobody (a direct
// insert, a full refresh), which counts as soon as it is written. Rows are
// encoded column by column through FLOWLIB_SCHEMA (detail/row_codec.hpp).
//
// When a record is written: a table's first record is a snapshot, and so is
// the first after a clear(); otherwise a snapshot is written once
// PipelineOptions::snapshot_interval batches wrote deltas since the last one
// AND those deltas add up to at least the last snapshot's size (the
// schedule of the flows' state, so a table that changes little is not
// rewritten whole). A batch that changed nothing in the table writes no
// record. Once a snapshot is committed, the records before it are removed
// (at the table's next write).
//
// Attaching (the pipeline does it when it opens, before anything is written
// and before the flows restore their state): refuses a checkpoint that is
// not durable (errc::checkpoint_mismatch); reads the table's records; loads
// the last snapshot whose writer committed and applies the deltas after it,
// in order, while their writers committed; removes the records after those
// (a batch that failed or was cut short by a crash, never committed) and
// those before the snapshot. The rows come back under their saved ids, with
// the saved id bound, so every flow's restored state, which refers to rows
// by id, stays valid; the append log comes back at its saved offsets. The
// checkpoint is the truth: rows the memory store held before are replaced.
// A record that fails to decode is errc::checkpoint_corrupt naming it, and
// nothing is loaded.
//
// Why a record counts only with its writer's commit: on a store that
// commits a batch at once (FileCheckpoint's journal entry, SqliteCheckpoint's
// transaction) a failed batch leaves nothing, but on a durable store that
// writes records one by one the commit record written last decides, for
// the table as for the flow's state. There, a failed batch's record is
// overwritten by the table's next write (which then writes even when it
// changed nothing), so a later commit of the same batch id can never make
// a stale record count. A full refresh writes the emptied table's image
// (written by nobody) before it resets its flows' records.
//
// Unattached (before a pipeline opens, or without one) the store is the
// memory store and writes nothing. Changes made to an attached store
// outside a pipeline batch are written only after a clear() (the next write
// is a snapshot), except direct inserts (flowlib::dml_insert), which are
// written at once as a record of their own. Reading a table from a
// checkpoint without running its pipeline: flowlib::read_table and
// flowlib::export_table_csv (runtime/export.hpp).
#pragma once

#include <flowlib/checkpoint/store.hpp>
#include <flowlib/detail/checkpoint_record.hpp>
#include <flowlib/detail/config.hpp>
#include <flowlib/detail/row_codec.hpp>
#include <flowlib/error.hpp>
#include <flowlib/state.hpp>
#include <flowlib/storage/durable.hpp>
#include <flowlib/storage/memory.hpp>
#include <flowlib/storage/row_log.hpp>

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flowlib {
namespace detail {

/// The record layout of a FileStorage table that does not depend on its row
/// type: names, headers, which records count. See the header comment.
struct file_table_layout {
  enum class kind : std::uint8_t { delta = 0, snapshot = 1 };
  static constexpr std::uint8_t version = 1;

  /// The folder of table `table`'s records.
  FLOWLIB_DECL static std::string dir(std::string_view table);
  FLOWLIB_DECL static std::string record(const std::string& dir, std::uint64_t seq);
  FLOWLIB_DECL static std::optional<std::uint64_t> parse_seq(std::string_view name);

  /// A record's header: what it is, who wrote it, the table's marks after it.
  struct header {
    kind what = kind::delta;
    std::string flow;  // empty: written outside a batch
    std::uint64_t batch = 0;
    std::uint64_t id_bound = 0, log_begin = 0, log_end = 0;
  };
  FLOWLIB_DECL static void write_header(std::string& out, const header& h);
  FLOWLIB_DECL static header read_header(byte_reader& r);

  /// The records of a table, in order, read and sorted into the ones that
  /// count (from the last committed snapshot on), the stale ones after them
  /// and the old ones before.
  struct listing {
    struct rec {
      std::uint64_t seq = 0;
      std::string path;
      std::string bytes;
      header head;
      std::size_t body = 0;  // where the rows start
    };
    std::vector<rec> live;           // the snapshot, then its committed deltas
    std::vector<std::string> stale;  // after them: never committed
    std::vector<std::string> old;    // before the snapshot: no longer needed
    std::uint64_t next_seq = 0;      // the seq the next record gets
  };

  /// Reads table `table`'s records from `store` (see listing). `committed`
  /// says whether a writer's batch committed. Throws errc::checkpoint_corrupt
  /// for a record that cannot be read.
  FLOWLIB_DECL static listing read(const checkpoint_store& store, std::string_view table,
                                   const std::function<bool(std::string_view, std::uint64_t)>& committed);

  FLOWLIB_DECL static std::string suffix(const std::string& path, const checkpoint_store& store);
};

/// A table as its records describe it: rows by id, id bound, append log.
template <class Row>
struct file_table_image {
  std::vector<std::pair<row_id, Row>> rows;  // by id
  std::uint64_t id_bound = 0;
  row_log<Row> log;
  std::uint64_t snapshot_bytes = 0, delta_bytes = 0, deltas = 0;

  /// Applies the live records of `l` (a snapshot, then deltas).
  void load(const file_table_layout::listing& l, std::string_view table,
            const checkpoint_store& store) {
    using layout = file_table_layout;
    std::vector<std::optional<Row>> slots;
    for (const auto& rec : l.live) {
      const std::string where = layout::suffix(rec.path, store);  // outlives the reader
      byte_reader in{rec.bytes, rec.body, table, where, errc::checkpoint_corrupt};
      const auto& h = rec.head;
      if (h.id_bound < slots.size() && h.what == layout::kind::delta) in.fail("the id bound went down");
      if (h.what == layout::kind::snapshot) {
        slots.assign(static_cast<std::size_t>(h.id_bound), std::nullopt);
        snapshot_bytes = rec.bytes.size();
      } else {
        slots.resize(static_cast<std::size_t>(h.id_bound));
        delta_bytes += rec.bytes.size();
        deltas += 1;
        const auto erased = row_get<std::uint64_t>(in);
        for (std::uint64_t i = 0; i < erased; ++i) {
          const auto id = row_get<std::uint32_t>(in);
          if (id >= slots.size()) in.fail("an erased row id is not below the id bound");
          slots[id].reset();
        }
      }
      const auto n = row_get<std::uint64_t>(in);
      for (std::uint64_t i = 0; i < n; ++i) {
        const auto id = row_get<std::uint32_t>(in);
        if (id >= slots.size()) in.fail("a row id is not below the id bound");
        if (!slots[id]) slots[id].emplace();
        row_codec<Row>::read(in, *slots[id]);
      }
      // The append log: a snapshot holds it whole, a delta its new rows.
      const auto from = row_get<std::uint64_t>(in);
      const auto count = row_get<std::uint64_t>(in);
      if (h.what == layout::kind::snapshot) {
        log.restart_at(h.log_begin);
        if (from != h.log_begin) in.fail("the append log's rows do not start at its start");
      } else {
        if (h.log_begin > log.begin_offset()) log.discard_before(h.log_begin);
        if (from != log.end_offset()) in.fail("the append log's new rows do not follow its end");
      }
      if (from + count != h.log_end) in.fail("the append log's rows do not end at its end");
      Row r{};
      for (std::uint64_t i = 0; i < count; ++i) {
        row_codec<Row>::read(in, r);
        log.append(r);
      }
      if (in.remaining() != 0) in.fail("trailing bytes");
      id_bound = h.id_bound;
    }
    rows.clear();
    for (std::size_t id = 0; id < slots.size(); ++id) {
      if (slots[id]) rows.emplace_back(static_cast<row_id>(id), std::move(*slots[id]));
    }
  }
};

/// The FileStorage row store: a memory_row_store whose changes an attached
/// table writes as records of its pipeline's checkpoint. See the header
/// comment.
template <class Row>
class file_row_store : public memory_row_store<Row> {
  using base = memory_row_store<Row>;
  using layout = file_table_layout;
  using codec = row_codec<Row>;

 public:
  using row_type = Row;
  /// Rows survive the process once attached (the pipeline requires a
  /// durable checkpoint).
  static constexpr bool durable = true;

  file_row_store() = default;

  /// Removes every row; an attached store writes a snapshot next.
  void clear() noexcept {
    base::clear();
    cleared_ = true;
  }
  /// As the memory store's; an attached store also takes the record it
  /// wrote since as committed (call it once the batch committed).
  void commit_journal() noexcept {
    base::commit_journal();
    if (!written_) return;
    written_ = false;
    stale_ = false;
    committed_ = pending_.marks_after;
    if (pending_.snapshot) {
      cleared_ = false;
      snapshot_seq_ = next_seq_;
      schedule_ = {pending_.bytes, 0, 0, true};
    } else {
      schedule_.delta_bytes += pending_.bytes;
      schedule_.deltas += 1;
    }
    ++next_seq_;
  }
  /// As the memory store's; the record written since does not count, and
  /// the next write overwrites it.
  void rollback_journal() noexcept {
    base::rollback_journal();
    if (!written_) return;
    written_ = false;
    stale_ = true;
  }

  /// Whether the store is attached to a checkpoint.
  bool attached() const noexcept { return store_ != nullptr; }

  /// Attaches the store of table `table` (its append log `log`) to
  /// `checkpoint`: loads the committed rows and log, removes the records
  /// that do not count (see the header comment). Not while a journal is
  /// open. Throws errc::checkpoint_mismatch (a volatile checkpoint),
  /// errc::checkpoint_corrupt or errc::checkpoint_io; nothing in memory has
  /// changed then.
  void attach(checkpoint_store& checkpoint, const std::string& table, row_log<Row>& log,
              const durable_context& context) {
    assert(!this->journaling() && "flowlib::FileStorage: attach() while a journal is open");
    if (!checkpoint.durable()) {
      throw error(errc::checkpoint_mismatch, table, "", "",
                  "the table uses flowlib::FileStorage, whose rows live in the pipeline's "
                  "checkpoint, but the " + checkpoint.describe() +
                      " does not survive the process: use a flowlib::FileCheckpoint");
    }
    layout::listing l = layout::read(checkpoint, table, context.committed);
    file_table_image<Row> image{{}, 0, row_log<Row>(log.owner()), 0, 0, 0};
    image.load(l, table, checkpoint);
    // Records that do not count go before anything is written after them.
    std::vector<std::string> drop = std::move(l.stale);
    drop.insert(drop.end(), l.old.begin(), l.old.end());
    if (!drop.empty()) checkpoint.remove_many(drop);
    // Everything was read: only now is anything in memory replaced.
    base::restore_rows(image.rows, static_cast<std::size_t>(image.id_bound));
    log = std::move(image.log);
    log_ = &log;
    store_ = &checkpoint;
    dir_ = layout::dir(table);
    table_ = table;
    interval_ = context.snapshot_interval;
    next_seq_ = l.next_seq;
    snapshot_seq_ = first_kept_ = l.live.empty() ? next_seq_ : l.live.front().seq;
    schedule_ = {image.snapshot_bytes, image.delta_bytes, image.deltas, !l.live.empty()};
    committed_ = {image.id_bound, log.begin_offset(), log.end_offset()};
    cleared_ = written_ = stale_ = false;
  }

  /// Inserts `rows` outside any pipeline batch (flowlib::dml_insert) and
  /// writes them as a record of their own: all or nothing, in memory and in
  /// the checkpoint. `table` names the table in errors. The store must be
  /// attached, and no batch writing it open (errc::invalid_argument);
  /// errc::checkpoint_io when the write fails, nothing changed then.
  void insert_durably(std::vector<Row>& rows, std::string_view table) {
    if (store_ == nullptr) {
      throw error(errc::invalid_argument, std::string(table), "", "",
                  "a direct insert into a FileStorage table not attached to its checkpoint yet: "
                  "its pipeline attaches it when it opens (at the first update), and loads the "
                  "checkpoint's rows in place of what the table held; insert after that");
    }
    if (this->journaling()) {
      throw error(errc::invalid_argument, std::string(table), "", "",
                  "a direct insert while a batch writing this table is open; insert between updates");
    }
    base::begin_journal();
    try {
      base::reserve(rows.size());
      for (Row& r : rows) base::insert(std::move(r));
      store_->begin_batch();
      write_changes(durable_writer{});
      store_->commit_batch();
    } catch (...) {
      store_->abort_batch();
      rollback_journal();
      throw;
    }
    commit_journal();
  }

  /// Detaches the store: it keeps its rows in memory and writes nothing.
  void detach() noexcept {
    store_ = nullptr;
    log_ = nullptr;
  }

  /// Writes the changes since the last commit as a record written by `by`
  /// (see the header comment); nothing when unattached or when nothing
  /// changed. Call with the journal still open (or after a clear()), before
  /// the batch's commit record. Throws errc::checkpoint_io.
  void write_changes(const durable_writer& by) {
    if (store_ == nullptr) return;
    const bool snapshot = cleared_ || !schedule_.any ||
                          (schedule_.deltas >= interval_ && schedule_.delta_bytes >= schedule_.snapshot_bytes);
    ids_.clear();
    erased_.clear();
    if (!snapshot) {
      base::journal_erased(erased_);
      base::journal_changed(ids_);
    }
    const marks now{static_cast<std::uint64_t>(base::id_bound()), log_->begin_offset(),
                    log_->end_offset()};
    if (!snapshot && !stale_ && ids_.empty() && erased_.empty() && now == committed_) {
      return;  // nothing changed: no record
    }
    // The records before the last committed snapshot are no longer needed.
    if (first_kept_ < snapshot_seq_) {
      std::vector<std::string> old;
      for (std::uint64_t s = first_kept_; s < snapshot_seq_; ++s) old.push_back(layout::record(dir_, s));
      store_->remove_many(old);
      first_kept_ = snapshot_seq_;
    }
    buf_.clear();
    layout::header h;
    h.what = snapshot ? layout::kind::snapshot : layout::kind::delta;
    h.flow = std::string(by.flow);
    h.batch = by.batch;
    h.id_bound = now.bound;
    h.log_begin = now.log_begin;
    h.log_end = now.log_end;
    layout::write_header(buf_, h);
    const base& self = *this;
    const std::uint64_t log_end = now.log_end;
    std::uint64_t from = now.log_begin;
    if (snapshot) {
      row_put(buf_, static_cast<std::uint64_t>(self.size()));
      base::for_each_row([&](row_id id, const Row& r) {
        row_put(buf_, static_cast<std::uint32_t>(id));
        codec::write(buf_, r);
      });
    } else {
      row_put(buf_, static_cast<std::uint64_t>(erased_.size()));
      for (const row_id id : erased_) row_put(buf_, static_cast<std::uint32_t>(id));
      row_put(buf_, static_cast<std::uint64_t>(ids_.size()));
      for (const row_id id : ids_) {
        row_put(buf_, static_cast<std::uint32_t>(id));
        codec::write(buf_, self.get(id));
      }
      from = std::max(now.log_begin, committed_.log_end);
    }
    row_put(buf_, from);
    row_put(buf_, log_end - from);
    if (log_end > from) {
      log_rows_.clear();
      log_->read(from, log_end, log_rows_);
      for (const Row& r : log_rows_) codec::write(buf_, r);
      log_rows_.clear();
    }
    store_->write(layout::record(dir_, next_seq_), buf_);
    written_ = true;
    pending_ = {snapshot, buf_.size(), now};
  }

 private:
  // The id bound and the append log's offsets a record leaves behind.
  struct marks {
    std::uint64_t bound = 0, log_begin = 0, log_end = 0;
    bool operator==(const marks&) const = default;
  };
  struct schedule {
    std::uint64_t snapshot_bytes = 0, delta_bytes = 0, deltas = 0;
    bool any = false;  // a snapshot counts
  };
  struct pending {
    bool snapshot = false;
    std::uint64_t bytes = 0;
    marks marks_after;
  };

  checkpoint_store* store_ = nullptr;
  row_log<Row>* log_ = nullptr;
  std::string dir_, table_;
  std::uint64_t interval_ = 10;
  std::uint64_t next_seq_ = 0;      // the seq of the next record
  std::uint64_t snapshot_seq_ = 0;  // the last committed snapshot's seq
  std::uint64_t first_kept_ = 0;    // the lowest seq that may still be on record
  marks committed_;                 // as the last committed record left them
  schedule schedule_;
  pending pending_;
  bool cleared_ = false;  // a clear() not yet followed by a committed snapshot
  bool written_ = false;  // a record was written since the last commit or rollback
  bool stale_ = false;    // a record at next_seq_ did not count: the next write replaces it
  std::string buf_;
  std::vector<row_id> ids_, erased_;
  std::vector<Row> log_rows_;
};

}  // namespace detail

/// @brief The durable storage policy whose rows live in the pipeline's
/// checkpoint as records (a FileCheckpoint directory), with a memory store
/// as the working set. See the header comment.
struct FileStorage {
  template <class Row>
  using store = detail::file_row_store<Row>;
};

}  // namespace flowlib

#if !defined(FLOWLIB_SEPARATE_COMPILATION)
#include <flowlib/storage/impl/file.ipp>
#endif
