// flowlib/runtime/stream.hpp
//
// Stream: a standalone stream, outside any pipeline: one source, its
// operators, and one sink (a ForeachBatch, or an append into a table), with
// a checkpoint of its own. A pipeline's append flow can later adopt that
// checkpoint with IMPORT CHECKPOINT (R-TABLE-4) and carry on from where the
// stream stopped, with its operators' state (dedup identities, watermark).
//
//   flowlib::FileCheckpoint checkpoint{"/var/lib/app/ingest"};
//   flowlib::Stream ingest{"ingest", checkpoint};
//   ingest.from(feed)
//       .through(flowlib::DedupWithinWatermark<Id, When>{std::chrono::minutes(10), "dedup"})
//       .into(flowlib::ForeachBatch<Event>{[&](std::uint64_t id, std::span<const Event> rows) {
//         sink.write(id, rows);   // idempotent by batch id (R-EXACT-4)
//       }});
//   ingest.run();   // all data available now, in micro-batches, exactly-once checkpoints
//
// A Stream is a one-flow Pipeline (pipeline.hpp) named after the stream,
// whose flow also carries the stream's name; everything said there about
// micro-batches, checkpoints and failures holds. A durable checkpoint
// (FileCheckpoint) takes a ForeachBatch sink or durable tables; an append
// into a MemoryStorage table goes with a MemoryCheckpoint.
#pragma once

#include <flowlib/runtime/pipeline.hpp>

#include <string>
#include <utility>

namespace flowlib {

/// @brief A standalone stream with its own checkpoint. See the header.
class Stream {
 public:
  Stream(std::string name, checkpoint_store& checkpoint, PipelineOptions options = {})
      : name_(std::move(name)), checkpoint_(&checkpoint),
        pipeline_("stream:" + name_, checkpoint, std::move(options)) {}

  const std::string& name() const noexcept { return name_; }
  /// The stream's checkpoint (what a pipeline's import_checkpoint() names,
  /// with the stream's name).
  checkpoint_store& checkpoint() const noexcept { return *checkpoint_; }

  /// Declares the stream's one flow: `.from(source).through(...).into(sink)`.
  template <class S>
  auto from(S&& source) {
    if (declared_) {
      throw error(errc::invalid_argument, name_, "", "", "a stream has exactly one source and sink");
    }
    declared_ = true;
    return pipeline_.flow(name_).from(std::forward<S>(source));
  }

  /// Writes the stream's events to `log`.
  void event_log(EventLog& log) noexcept { pipeline_.event_log(log); }

  /// Processes the data available now, in micro-batches.
  UpdateSummary run(UpdateOptions options = {}) { return pipeline_.update(std::move(options)); }

 private:
  std::string name_;
  checkpoint_store* checkpoint_;
  Pipeline pipeline_;
  bool declared_ = false;
};

}  // namespace flowlib
