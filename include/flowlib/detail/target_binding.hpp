// flowlib/detail/target_binding.hpp
//
// target_binding: what ties a flow to the table it writes, the same way for
// every flow. One binding per (flow, target); a flow that writes one table
// holds one. It owns:
//
//   - the flow's claim identity: the address of a small heap object the
//     binding allocates at its first claim. It moves with the binding (and so
//     with the flow), so a moved flow keeps writing its table, and a
//     moved-from flow, which lost its state about the table, gets a new
//     identity that an exclusive target refuses (R-USING-9). Flows never
//     claim with `this` (which changes on a move) nor with a scratch pointer
//     (which a flow may free);
//   - the table it is bound to, once a claim succeeded: a flow writes exactly
//     one table, and an apply to another one fails with errc::invalid_target
//     before anything is read;
//   - the table's generation() at the flow's last claim: StreamingTable and
//     ManagedTable advance it in full_refresh(). A different generation at
//     the next apply means the table was emptied behind the flow: every piece
//     of state the flow keeps about the table (key index, sequences, row
//     chains, snapshot version, tombstones, history, the ONCE marker) is
//     void, and the flow resets it before it reads the batch, so that the
//     apply gives exactly the result of applying to an empty table with a
//     fresh flow (R-EXACT-5). A refused refresh (reset_allowed false) does
//     not advance the generation and resets nothing;
//   - the ONCE marker (R-TABLE-2): set by a successful apply of a ONCE flow,
//     cleared by a new generation, by reset(), or restored from a checkpoint.
//   - the claim's lifetime: a binding that is destroyed (with its flow)
//     releases its claim on the table, if the table still exists, so that
//     a new flow object (a restarted pipeline's) can claim the table; an
//     exclusive target still refuses a second live flow (R-USING-9).
//
// Contract, in the order a flow's apply() calls it:
//
//   if (binding.begin_apply(target, name, reason)) reset_state();
//       // throws errc::invalid_target (changing nothing) when the binding
//       // is bound to another table; returns true once per new generation
//       // of the bound table, after clearing the ONCE marker and recording
//       // the generation. The caller then clears its own state about the
//       // table. Resetting is not undone if the apply fails later: the
//       // state it drops described rows the table no longer holds, and the
//       // fresh state describes the table as it is.
//   if (Flow::once && binding.done()) return skipped;
//   ... stage (may throw), reserve (may throw) ...
//   binding.claim(target, kind, name, exclusive);
//       // the last fallible step (it may allocate the identity, and the
//       // table may refuse the claim); on success the binding is bound to
//       // `target` and remembers its generation.
//   ... commit (cannot fail) ...
//   if (Flow::once) binding.mark_done();
//
// AUTO CDC adopts it by replacing its `target_` pointer and its claim with
// `this` by a target_binding member, calling begin_apply() where it checks
// its target today (resetting its index, tombstones, history, floor and ONCE
// marker when it returns true) and claim() where it claims today.
// Internal.
#pragma once

#include <flowlib/error.hpp>

#include <concepts>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace flowlib::detail {

/// What a table offers a binding: a name, a generation() that its full
/// refresh advances, and claim() (both flowlib table kinds).
template <class T>
concept bindable_table = requires(T& t, const T& ct, const void* id, std::string_view s, bool b) {
  { ct.name() } -> std::convertible_to<std::string_view>;
  { ct.generation() } -> std::convertible_to<std::uint64_t>;
  t.claim(id, s, s, b);
};

/// A table whose claims are released when the flow is destroyed: it has
/// release(identity) and lifetime() (both flowlib table kinds).
template <class T>
concept releasable_table = requires(T& t, const void* id) {
  t.release(id);
  { t.lifetime() } -> std::convertible_to<std::weak_ptr<const void>>;
};

/// @brief A flow's binding to the table it writes. See the header comment.
class target_binding {
 public:
  target_binding() = default;
  target_binding(const target_binding&) = delete;
  target_binding& operator=(const target_binding&) = delete;
  /// The moved-to binding takes the identity, the table and the marker; the
  /// moved-from one is unbound, with no identity.
  target_binding(target_binding&& o) noexcept
      : token_(std::move(o.token_)),
        table_(std::exchange(o.table_, nullptr)),
        table_name_(std::move(o.table_name_)),
        generation_(std::exchange(o.generation_, 0)),
        done_(std::exchange(o.done_, false)),
        alive_(std::move(o.alive_)),
        release_(std::exchange(o.release_, nullptr)) {}
  target_binding& operator=(target_binding&& o) noexcept {
    if (this != &o) {
      release();
      token_ = std::move(o.token_);
      table_ = std::exchange(o.table_, nullptr);
      table_name_ = std::move(o.table_name_);
      generation_ = std::exchange(o.generation_, 0);
      done_ = std::exchange(o.done_, false);
      alive_ = std::move(o.alive_);
      release_ = std::exchange(o.release_, nullptr);
    }
    return *this;
  }
  /// Releases the claim on the bound table, if the table still exists.
  ~target_binding() { release(); }

  /// Whether the flow's state about `t` is void: the binding is bound to
  /// `t` and `t` was fully refreshed since the flow last claimed it.
  template <bindable_table Table>
  bool stale(const Table& t) const noexcept {
    return table_ == static_cast<const void*>(&t) && generation_ != t.generation();
  }

  /// The first step of an apply (see the header). Throws flowlib::error
  /// (errc::invalid_target) when bound to another table, naming it; `reason`
  /// completes the message. Returns true when `t` began a new generation
  /// since the last claim: the ONCE marker is then cleared and the
  /// generation recorded, and the caller must reset its state about `t`.
  template <bindable_table Table>
  bool begin_apply(const Table& t, std::string_view flow, std::string_view reason) {
    if (table_ != nullptr && table_ != static_cast<const void*>(&t)) {
      throw error(errc::invalid_target, std::string(flow), "", "",
                  "this flow already writes table '" + table_name_ + "'; " + std::string(reason));
    }
    if (!stale(t)) return false;
    generation_ = t.generation();
    done_ = false;
    return true;
  }

  /// Claims `t` for the flow (the last fallible step before a commit): may
  /// allocate the identity, and throws what t.claim() throws (another flow
  /// writes an exclusive target, a managed table refuses the kind). On
  /// success the binding is bound to `t` at its current generation.
  template <bindable_table Table>
  void claim(Table& t, std::string_view kind, std::string_view flow, bool exclusive) {
    t.claim(identity(), kind, flow, exclusive);
    if (table_ != static_cast<const void*>(&t)) {
      try {
        table_name_ = std::string(t.name());  // may throw: bound only once it did not
      } catch (...) {
        if constexpr (releasable_table<Table>) t.release(token_.get());
        throw;
      }
      table_ = &t;
      if constexpr (releasable_table<Table>) {
        alive_ = t.lifetime();
        release_ = [](const void* table, const void* id) noexcept {
          static_cast<Table*>(const_cast<void*>(table))->release(id);
        };
      }
    }
    generation_ = t.generation();
  }

  /// Binds the flow to `t` after its state was restored from a checkpoint
  /// (read_checkpoint): claims `t` as claim() does, records its current
  /// generation, and sets the ONCE marker to `done`. Throws
  /// errc::invalid_target, changing nothing, when bound to another table
  /// (`reason` completes the message), and what t.claim() throws.
  template <bindable_table Table>
  void restore(Table& t, std::string_view kind, std::string_view flow, bool exclusive, bool done,
               std::string_view reason) {
    if (table_ != nullptr && table_ != static_cast<const void*>(&t)) {
      throw error(errc::invalid_target, std::string(flow), "", "",
                  "this flow already writes table '" + table_name_ + "'; " + std::string(reason));
    }
    claim(t, kind, flow, exclusive);
    done_ = done;
  }

  /// The identity the flow claims tables with (allocated at the first call).
  const void* identity() {
    if (!token_) token_ = std::make_unique<token>();
    return token_.get();
  }

  /// The bound table (nullptr before the first successful claim).
  const void* table() const noexcept { return table_; }
  /// The bound table's name (empty before the first successful claim).
  const std::string& table_name() const noexcept { return table_name_; }
  /// The bound table's generation at the last claim.
  std::uint64_t generation() const noexcept { return generation_; }

  /// ONCE marker: true after a successful apply of a ONCE flow, until a new
  /// generation of the table, reset_once() or restore_once(false).
  bool done() const noexcept { return done_; }
  void mark_done() noexcept { done_ = true; }
  void reset_once() noexcept { done_ = false; }
  /// Restores the ONCE marker from a checkpoint.
  void restore_once(bool done) noexcept { done_ = done; }

 private:
  void release() noexcept {
    if (release_ != nullptr && token_ && !alive_.expired()) release_(table_, token_.get());
    release_ = nullptr;
  }

  struct token {
    unsigned char unused = 0;
  };
  std::unique_ptr<token> token_;
  const void* table_ = nullptr;
  std::string table_name_;
  std::uint64_t generation_ = 0;
  bool done_ = false;
  std::weak_ptr<const void> alive_;  // expires with the bound table
  void (*release_)(const void* table, const void* id) noexcept = nullptr;
};

}  // namespace flowlib::detail
