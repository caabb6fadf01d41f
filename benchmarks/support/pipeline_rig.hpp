// benchmarks/support/pipeline_rig.hpp
//
// Pieces for benchmarking the pipeline runtime (benchmarks/pipeline.cpp).
//
// gated_source<S>: a source that shows a pipeline only the rows before a
// gate. Pipeline::update() runs a flow over everything its source holds
// when the flow starts, so to time one micro-batch per update() without
// appending rows inside the timed loop, a benchmark appends a long run of
// rows to the underlying source up front (timer stopped) and moves the gate
// forward by one batch before each update: setting an integer, nothing
// copied. Everything else (planning, reading the rows out) is the wrapped
// source's own code.
//
// counting_checkpoint: a checkpoint_store that forwards every call to
// another one (a MemoryCheckpoint or a FileCheckpoint) and counts what the
// runtime writes per micro-batch, from one commit_batch() to the next (the
// batch's offset record comes before its begin_batch()): records, payload
// bytes, and whether one of them was a state snapshot.
// The bytes a store keeps per record are the payload plus
// detail::checkpoint_record_overhead (the frame: header and CRC), which is
// also the size of a file checkpoint's file.
#pragma once

#include <flowlib/checkpoint/store.hpp>
#include <flowlib/detail/checkpoint_record.hpp>
#include <flowlib/source/position.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flowlib_bench {

/// A flowlib::source showing only the rows of `S` before a gate (see the
/// header comment). Holds `S` by reference; single-threaded use.
template <class S>
class gated_source {
 public:
  using row_type = typename S::row_type;

  explicit gated_source(S& inner) : inner_(&inner), gate_(inner.start()) {}

  /// Lets the pipeline see `n` more rows of partition 0 (at most up to what
  /// the wrapped source holds).
  void open(std::uint64_t n) {
    const std::uint64_t held = inner_->latest().offset(0);
    gate_.set(0, std::min(gate_.offset(0) + n, held));
  }
  /// Rows beyond the gate, not yet shown.
  std::uint64_t hidden() const { return inner_->latest().offset(0) - gate_.offset(0); }
  /// The gate (what latest() returns).
  const flowlib::source_position& gate() const noexcept { return gate_; }

  flowlib::source_position start() const { return inner_->start(); }
  flowlib::source_position latest() const { return gate_; }
  flowlib::source_position plan(const flowlib::source_position& from, std::size_t limit) const {
    flowlib::source_position to = inner_->plan(from, limit);
    for (const auto& [part, off] : to.partitions())
      if (off > gate_.offset(part)) to.set(part, gate_.offset(part));
    return to;
  }
  void read(const flowlib::source_position& from, const flowlib::source_position& to,
            std::vector<row_type>& out) const {
    inner_->read(from, to, out);
  }
  flowlib::delivery delivery() const noexcept { return inner_->delivery(); }
  std::string_view name() const noexcept { return inner_->name(); }

 private:
  S* inner_;
  flowlib::source_position gate_;
};

/// What the runtime wrote for one micro-batch.
struct batch_writes {
  std::uint64_t records = 0;
  std::uint64_t payload_bytes = 0;
  bool snapshot = false;  ///< a ".snapshot" state record was among them
  /// Bytes stored: payloads plus the frame of each record.
  std::uint64_t stored_bytes() const noexcept {
    return payload_bytes + records * flowlib::detail::checkpoint_record_overhead;
  }
};

/// A checkpoint_store forwarding to another and counting each batch's
/// writes (see the header comment).
class counting_checkpoint final : public flowlib::checkpoint_store {
 public:
  explicit counting_checkpoint(flowlib::checkpoint_store& inner) : inner_(&inner) {}

  bool durable() const noexcept override { return inner_->durable(); }
  std::string describe() const override { return inner_->describe(); }
  std::optional<std::string> read(std::string_view path) const override { return inner_->read(path); }
  void write(std::string_view path, std::string_view bytes) override {
    inner_->write(path, bytes);
    current_.records += 1;
    current_.payload_bytes += bytes.size();
    if (path.ends_with(".snapshot")) current_.snapshot = true;
  }
  std::vector<std::string> list(std::string_view path) const override { return inner_->list(path); }
  void remove(std::string_view path) override { inner_->remove(path); }

  void begin_batch() override { inner_->begin_batch(); }
  void commit_batch() override {
    inner_->commit_batch();
    last_ = current_;
    current_ = batch_writes{};
  }
  void abort_batch() noexcept override {
    inner_->abort_batch();
    current_ = batch_writes{};
  }

  /// The writes of the last committed batch: everything written since the
  /// commit before it (the offset record is written before begin_batch()).
  const batch_writes& last_batch() const noexcept { return last_; }

 private:
  flowlib::checkpoint_store* inner_;
  batch_writes current_;
  batch_writes last_;
};

}  // namespace flowlib_bench
