// flowlib/runtime/checkpoint_log.hpp
//
// The pipeline's records in a checkpoint_store (checkpoint/store.hpp): the
// layout, the exactly-once protocol's records, and the restore of state by
// snapshot + deltas. Internal; the layout is documented for operators in
// docs/pipelines.md.
//
//   pipeline                              name and layout version of the pipeline
//   flows/<F>/definition                  what the flow is (kind, source, target, stages)
//                                         and its components' kinds (for an import)
//   flows/<F>/offsets/<N>                 batch N's planned positions (from, to)
//   flows/<F>/commits/<N>                 batch N committed: its end position, its update
//   flows/<F>/state/<N>.<c>.delta         component c's delta after batch N
//   flows/<F>/state/<N>.<c>.snapshot      component c's whole state after batch N
//   imports/<F>                           the flow's IMPORT CHECKPOINT was taken
//
// <F> is the flow's name in lowercase hex (any name is a safe path), <N> a
// batch id of 20 decimal digits (names sort as numbers). Component 0 is the
// flow policy, 1.. its operators in declaration order.
//
// Protocol for batch N of flow F (R-EXACT-1): offsets/N is written before
// the batch reads its source; then the state records of N; then commits/N,
// which alone makes batch N count. A restore reads the last commit, and for
// each component the last snapshot at or before it and the deltas after the
// snapshot up to it. Records of a batch after the last commit (a batch that
// failed or was cut short) are ignored and overwritten when the batch is
// replayed from the same positions. Old records are removed once a newer
// snapshot is committed, so a restore reads a bounded number of records.
#pragma once

#include <flowlib/checkpoint/store.hpp>
#include <flowlib/detail/byte_codec.hpp>
#include <flowlib/detail/checkpoint_record.hpp>
#include <flowlib/error.hpp>
#include <flowlib/source/position.hpp>

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flowlib::detail {

inline constexpr std::uint16_t pipeline_layout_version = 1;

/// A flow's planned batch: the positions it reads between.
struct planned_batch {
  source_position from;
  source_position to;
};

/// The records of one component for a restore, owning their bytes.
struct component_records {
  std::optional<std::string> snapshot;
  std::vector<std::string> deltas;
  checkpoint_blobs view() const {
    checkpoint_blobs b;
    if (snapshot) b.snapshot = std::string_view(*snapshot);
    for (const auto& d : deltas) b.deltas.emplace_back(d);
    return b;
  }
};

/// The pipeline's view of its checkpoint store. See the header comment.
class checkpoint_log {
 public:
  explicit checkpoint_log(checkpoint_store& store) : store_(&store) {}

  checkpoint_store& store() const noexcept { return *store_; }

  static std::string hex(std::string_view name) { return checkpoint_name_hex(name); }
  static std::string batch_name(std::uint64_t n) {
    std::string s;
    append_batch_name(s, n);
    return s;
  }
  /// Appends batch_name(n) to `out`.
  static void append_batch_name(std::string& out, std::uint64_t n) {
    char digits[20];
    for (std::size_t i = 20; i-- > 0; n /= 10) digits[i] = static_cast<char>('0' + n % 10);
    out.append(digits, 20);
  }
  static std::optional<std::uint64_t> parse_batch(std::string_view s) {
    std::uint64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || p != s.data() + s.size() || s.size() != 20) return std::nullopt;
    return v;
  }
  static std::string flow_dir(std::string_view flow) {
    std::string d;
    append_flow_dir(d, flow, 0);
    return d;
  }
  /// Appends flow_dir(flow) to `out`, reserving `more` bytes beyond it.
  static void append_flow_dir(std::string& out, std::string_view flow, std::size_t more) {
    out.reserve(out.size() + 6 + 2 * flow.size() + more);
    out += "flows/";
    if (flow.empty()) {
      out += '_';
      return;
    }
    constexpr char digits[] = "0123456789abcdef";
    for (unsigned char c : flow) {
      out += digits[c >> 4];
      out += digits[c & 15];
    }
  }
  /// flows/<F>/<sub>/<N>: a batch's record in folder `sub`.
  static std::string batch_path(std::string_view flow, std::string_view sub, std::uint64_t n) {
    std::string p;
    append_flow_dir(p, flow, 2 + sub.size() + 20);
    p += '/';
    p += sub;
    p += '/';
    append_batch_name(p, n);
    return p;
  }

  // --- The pipeline record ---------------------------------------------------------

  /// Forgets the records an earlier, refused open remembered to write.
  void clear_pending() noexcept {
    pending_pipeline_.reset();
    pending_flows_.clear();
  }

  /// Checks the pipeline record against `name`, or writes it when absent.
  /// Throws checkpoint_mismatch naming both pipelines.
  void open_pipeline(std::string_view name) {
    if (auto rec = store_->read("pipeline")) {
      byte_reader r = reader(*rec, name);
      const auto version = r.integer<std::uint16_t>();
      if (version != pipeline_layout_version) {
        throw error(errc::checkpoint_corrupt, std::string(name), "", "",
                    "the " + store_->describe() + " has pipeline layout version " +
                        std::to_string(version) + "; this build reads version " +
                        std::to_string(pipeline_layout_version) + "; it was left as it was");
      }
      const std::string other(r.bytes());
      if (other != name) {
        throw error(errc::checkpoint_mismatch, std::string(name), "", "",
                    "the " + store_->describe() + " belongs to pipeline '" + other +
                        "', not to this one; it was left as it was (give each pipeline a "
                        "checkpoint of its own)");
      }
      return;
    }
    pending_pipeline_ = std::string(name);
  }

  /// Checks flow `flow`'s definition record against `definition`; when
  /// absent, remembers it (with the flow's component `layout`, what an
  /// import maps state by) for write_pending(). Throws checkpoint_mismatch.
  void open_flow(std::string_view flow, std::string_view definition, std::string_view layout) {
    if (auto rec = store_->read(flow_dir(flow) + "/definition")) {
      byte_reader r = reader(*rec, flow);
      const std::string stored(r.bytes());
      if (stored != definition) {
        throw error(errc::checkpoint_mismatch, std::string(flow), "", "",
                    "the " + store_->describe() + " was made by another definition of this flow (" +
                        stored + "), not by this one (" + std::string(definition) +
                        "); it was left as it was: give the changed flow a new name or a new "
                        "checkpoint, or fully refresh its table");
      }
      return;
    }
    pending_flows_.push_back({std::string(flow), std::string(definition), std::string(layout)});
  }

  /// The component layout recorded for `flow` in `store` ("APPEND|DEDUP"),
  /// if the flow has a definition record there.
  static std::optional<std::string> layout_of(const checkpoint_store& store, std::string_view flow) {
    auto rec = store.read(flow_dir(flow) + "/definition");
    if (!rec) return std::nullopt;
    byte_reader r{*rec, 0, flow, "; the checkpoint was left as it was", errc::checkpoint_corrupt};
    r.bytes();
    return std::string(r.bytes());
  }

  /// Writes the pipeline and definition records found missing by the open_*
  /// calls (after every check passed, so a refused open writes nothing).
  void write_pending() {
    if (pending_pipeline_) {
      std::string b;
      byte_writer w{b};
      w.integer<std::uint16_t>(pipeline_layout_version);
      w.bytes(*pending_pipeline_);
      store_->write("pipeline", b);
      pending_pipeline_.reset();
    }
    for (const auto& f : pending_flows_) {
      std::string b;
      byte_writer w{b};
      w.bytes(f.definition);
      w.bytes(f.layout);
      store_->write(flow_dir(f.flow) + "/definition", b);
    }
    pending_flows_.clear();
  }

  // --- Batches -----------------------------------------------------------------------

  /// The last committed batch of `flow`: its id, its end position, and the
  /// update that committed it.
  struct commit_record {
    std::uint64_t batch = 0;
    source_position end;
    std::uint64_t update_id = 0;
  };
  std::optional<commit_record> last_commit(std::string_view flow) const {
    const auto names = store_->list(flow_dir(flow) + "/commits");
    for (auto it = names.rbegin(); it != names.rend(); ++it) {
      auto n = parse_batch(*it);
      if (!n) continue;
      auto rec = store_->read(flow_dir(flow) + "/commits/" + *it);
      if (!rec) continue;
      byte_reader r = reader(*rec, flow);
      commit_record c;
      c.batch = *n;
      c.end = source_position::read(r);
      c.update_id = r.integer<std::uint64_t>();
      return c;
    }
    return std::nullopt;
  }

  /// Batch `n`'s planned positions, if recorded.
  std::optional<planned_batch> planned(std::string_view flow, std::uint64_t n) const {
    auto rec = store_->read(batch_path(flow, "offsets", n));
    if (!rec) return std::nullopt;
    byte_reader r = reader(*rec, flow);
    planned_batch p;
    p.from = source_position::read(r);
    p.to = source_position::read(r);
    return p;
  }

  void write_planned(std::string_view flow, std::uint64_t n, const planned_batch& p) {
    std::string b;
    byte_writer w{b};
    p.from.write(w);
    p.to.write(w);
    store_->write(batch_path(flow, "offsets", n), b);
  }

  void write_state(std::string_view flow, std::uint64_t n, std::size_t component,
                   checkpoint_scope scope, std::string_view bytes) {
    store_->write(state_path(flow, n, component, scope), bytes);
  }

  void write_commit(std::string_view flow, std::uint64_t n, const source_position& end,
                    std::uint64_t update_id) {
    std::string b;
    byte_writer w{b};
    end.write(w);
    w.integer<std::uint64_t>(update_id);
    store_->write(batch_path(flow, "commits", n), b);
  }

  /// The records component `c` of `flow` restores from, as of batch `last`
  /// (committed). Throws checkpoint_corrupt when a delta is missing.
  component_records load_state(std::string_view flow, std::uint64_t last, std::size_t c) const {
    component_records out;
    std::vector<std::uint64_t> batches;
    for (const auto& name : store_->list(flow_dir(flow) + "/state")) {
      auto n = parse_batch(std::string_view(name).substr(0, 20));
      if (n && *n <= last && (batches.empty() || batches.back() != *n)) batches.push_back(*n);
    }
    // The newest snapshot at or before `last`.
    std::size_t from = 0;
    for (std::size_t i = batches.size(); i-- > 0;) {
      if (auto s = store_->read(state_path(flow, batches[i], c, checkpoint_scope::snapshot))) {
        out.snapshot = std::move(*s);
        from = i + 1;
        break;
      }
    }
    for (std::size_t i = from; i < batches.size(); ++i) {
      auto d = store_->read(state_path(flow, batches[i], c, checkpoint_scope::delta));
      if (!d) {
        throw error(errc::checkpoint_corrupt, std::string(flow), "", "",
                    "the " + store_->describe() + " has no state record of component " +
                        std::to_string(c) + " for committed batch " + std::to_string(batches[i]) +
                        "; it was left as it was");
      }
      out.deltas.push_back(std::move(*d));
    }
    return out;
  }

  /// Removes the records a restore no longer reads: state of batches before
  /// `snapshot_batch` (a committed batch that wrote snapshots), and offsets
  /// and commits more than `retain` batches older than it.
  void purge_before(std::string_view flow, std::uint64_t snapshot_batch, std::uint64_t retain) {
    const std::string dir = flow_dir(flow);
    std::vector<std::string> doomed;
    for (const auto& name : store_->list(dir + "/state")) {
      auto n = parse_batch(std::string_view(name).substr(0, 20));
      if (n && *n < snapshot_batch) doomed.push_back(dir + "/state/" + name);
    }
    if (snapshot_batch > retain) {
      const std::uint64_t keep_from = snapshot_batch - retain;
      for (const char* sub : {"/offsets", "/commits"}) {
        for (const auto& name : store_->list(dir + sub)) {
          auto n = parse_batch(name);
          if (n && *n < keep_from) doomed.push_back(dir + sub + "/" + name);
        }
      }
    }
    if (!doomed.empty()) store_->remove_many(doomed);
  }

  /// Removes every record of `flow` but its definition (a full refresh).
  void reset_flow(std::string_view flow) {
    const std::string dir = flow_dir(flow);
    for (const char* sub : {"/offsets", "/commits", "/state"}) store_->remove(dir + sub);
  }

  // --- IMPORT CHECKPOINT (R-TABLE-4) ------------------------------------------------------

  bool imported(std::string_view flow) const {
    return store_->read("imports/" + hex(flow)).has_value();
  }
  void mark_imported(std::string_view flow, std::string_view from) {
    std::string b;
    byte_writer w{b};
    w.bytes(from);
    store_->write("imports/" + hex(flow), b);
  }

  /// Copies flow `from_flow`'s offsets, commits and state from `from` into
  /// this store under `flow`; state records of component `m.first` become
  /// records of component `m.second` for each pair of `mapping`, others are
  /// left out. `from` is only read.
  void copy_flow(const checkpoint_store& from, std::string_view from_flow, std::string_view flow,
                 const std::vector<std::pair<std::size_t, std::size_t>>& mapping) {
    const std::string src = flow_dir(from_flow);
    const std::string dst = flow_dir(flow);
    for (const char* sub : {"/offsets", "/commits"}) {
      for (const auto& name : from.list(src + sub)) {
        if (auto rec = from.read(src + sub + "/" + name)) store_->write(dst + sub + "/" + name, *rec);
      }
    }
    for (const auto& name : from.list(src + "/state")) {
      // <N>.<c>.<scope>
      const auto dot = name.find('.');
      const auto dot2 = dot == std::string::npos ? dot : name.find('.', dot + 1);
      if (dot2 == std::string::npos) continue;
      const std::string comp = name.substr(dot + 1, dot2 - dot - 1);
      for (const auto& [a, b] : mapping) {
        if (comp != std::to_string(a)) continue;
        if (auto rec = from.read(src + "/state/" + name)) {
          store_->write(dst + "/state/" + name.substr(0, dot + 1) + std::to_string(b) + name.substr(dot2), *rec);
        }
      }
    }
  }

 private:
  static std::string state_path(std::string_view flow, std::uint64_t n, std::size_t c,
                                checkpoint_scope scope) {
    std::string p;
    append_flow_dir(p, flow, 7 + 20 + 1 + 20 + 9);
    p += "/state/";
    append_batch_name(p, n);
    p += '.';
    p += std::to_string(c);
    p += scope == checkpoint_scope::snapshot ? ".snapshot" : ".delta";
    return p;
  }

  byte_reader reader(std::string_view rec, std::string_view owner) const {
    byte_reader r{rec, 0, owner, suffix_, errc::checkpoint_corrupt};
    return r;
  }

  checkpoint_store* store_;
  std::optional<std::string> pending_pipeline_;
  struct pending_flow {
    std::string flow, definition, layout;
  };
  std::vector<pending_flow> pending_flows_;
  std::string suffix_ = "; the checkpoint was left as it was";
};

}  // namespace flowlib::detail
