// flowlib/detail/flow_checkpoint.hpp
//
// What every flow's and operator's write_checkpoint() / read_checkpoint()
// share (checkpoint/store.hpp has the contract with the pipeline runtime).
// Internal.
//
// Blob header. Every blob begins with
//   4 bytes  tag, one per flow kind ("FLRU" REPLACE USING, "FLAP" append,
//            "FLCS" AUTO CDC FROM SNAPSHOT, "FLDD" dedup within watermark)
//   u16      the format version of that kind
//   u8       scope: 0 snapshot, 1 delta
// and decoding goes through a byte_reader whose code is
// errc::checkpoint_corrupt and whose owner is the flow's name, so that a
// truncated or garbled blob, a wrong tag, an unknown version or a snapshot
// where a delta belongs throws flowlib::error (errc::checkpoint_corrupt)
// naming the flow and what was wrong. Readers decode into fresh state and
// swap it in only once everything was read: a failed read changes nothing.
//
// Rows and ids. The row_store contract gives a flow its rows (rows()) but
// not their ids, and a keyed flow's index refers to rows by id. A flow that
// rebuilds its index from its target's rows therefore re-inserts them
// (rows_by_position / ids_of): with the memory store's for_each_row hook the
// rows stay where they are and their ids are read; a store without it has
// its rows re-inserted (reload_rows), the table holding the same rows
// afterwards, under ids the flow knows.
#pragma once

#include <flowlib/state.hpp>
#include <flowlib/detail/byte_codec.hpp>
#include <flowlib/error.hpp>
#include <flowlib/storage/row_store.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flowlib::detail {

/// The suffix of every checkpoint read error: what a failed read leaves.
inline constexpr std::string_view checkpoint_unchanged = "; the flow's state is unchanged";

/// Whether T has a byte encoding for a checkpoint (a key, a sequence, a
/// version): byte_codec's list.
template <class T>
inline constexpr bool checkpointable_v = serialisable_key<T>();

/// Writes a blob's header (see the header comment).
inline void write_checkpoint_header(byte_writer& w, const char (&tag)[5], std::uint16_t version,
                                    checkpoint_scope scope) {
  w.out.append(tag, 4);
  w.integer<std::uint16_t>(version);
  w.integer<std::uint8_t>(scope == checkpoint_scope::snapshot ? 0 : 1);
}

/// A reader over one blob of `owner`'s state, throwing errc::checkpoint_corrupt.
inline byte_reader checkpoint_reader(std::string_view blob, std::string_view owner) {
  return byte_reader{blob, 0, owner, checkpoint_unchanged, errc::checkpoint_corrupt};
}

/// Checks a blob's header: the tag of `kind`, the format version, and that
/// the blob is of `expected` scope (a snapshot in the snapshot's place, a
/// delta among the deltas).
inline void read_checkpoint_header(byte_reader& r, const char (&tag)[5], std::uint16_t version,
                                   std::string_view kind, checkpoint_scope expected) {
  r.need(4);
  if (r.in.substr(0, 4) != std::string_view(tag, 4)) {
    r.fail("the blob does not start with \"" + std::string(tag, 4) + "\" (not a " +
           std::string(kind) + " checkpoint)");
  }
  r.pos = 4;
  const auto v = r.integer<std::uint16_t>();
  if (v != version) {
    r.fail("unknown format version " + std::to_string(v) + " (this build reads version " +
           std::to_string(version) + ")");
  }
  const auto s = r.integer<std::uint8_t>();
  if (s > 1) r.fail("unknown blob scope " + std::to_string(s));
  const checkpoint_scope got = s == 0 ? checkpoint_scope::snapshot : checkpoint_scope::delta;
  if (got != expected) {
    r.fail(expected == checkpoint_scope::snapshot ? "a delta where the snapshot belongs"
                                                  : "a snapshot among the deltas");
  }
}

/// What tells a flow's blobs apart: their tag, their format version, and
/// the flow's kind (named in errors).
struct blob_format {
  char tag[5];
  std::uint16_t version;
  std::string_view kind;
};

/// Writes the header of a blob whose flow forgets its state on a full
/// refresh of its table (Append, AUTO CDC FROM SNAPSHOT), then its flags
/// byte: bit 0, in a delta only, says that a reset came since the blob
/// before.
inline void write_flagged_header(byte_writer& w, const blob_format& f, checkpoint_scope scope,
                                 bool reset) {
  write_checkpoint_header(w, f.tag, f.version, scope);
  w.integer<std::uint8_t>(scope == checkpoint_scope::delta && reset ? 1 : 0);
}

/// A reader over such a blob (see write_flagged_header), past its checked
/// header and flags.
inline byte_reader read_flagged_header(std::string_view blob, std::string_view owner,
                                       const blob_format& f, checkpoint_scope scope) {
  byte_reader r = checkpoint_reader(blob, owner);
  read_checkpoint_header(r, f.tag, f.version, f.kind, scope);
  const auto flags = r.integer<std::uint8_t>();
  if (flags > (scope == checkpoint_scope::delta ? 1 : 0)) r.fail("unknown flags");
  return r;
}

/// Fails unless the whole blob was read.
inline void expect_checkpoint_end(const byte_reader& r) {
  if (r.pos != r.in.size()) r.fail("unexpected bytes after the end of the state");
}

/// A flag byte: 0 or 1.
inline bool read_flag(byte_reader& r, std::string_view what) {
  const auto b = r.integer<std::uint8_t>();
  if (b > 1) r.fail(std::string(what) + " is neither 0 nor 1");
  return b == 1;
}

/// The rows of `store`, copied in rows() order (may throw; `store` is
/// unchanged).
template <class Store>
std::vector<typename Store::row_type> copy_rows(const Store& store) {
  std::vector<typename Store::row_type> rows;
  rows.reserve(store.size());
  for (const auto& r : store.rows()) rows.push_back(r);
  return rows;
}

/// Replaces the rows of `store` by `rows` (a copy of them: copy_rows()), in
/// order, and returns the id each got, so that a flow that rebuilds its
/// index from the rows learns their ids. Room for the rows is reserved
/// before the store is cleared; a store that keeps its memory across
/// clear() (the memory store does) then cannot fail after the clear. A store
/// that gives its memory back in clear() reserves again, and if that
/// allocation fails the table is left empty and the error propagates.
template <class Store>
std::vector<row_id> reload_rows(Store& store, std::vector<typename Store::row_type>& rows) {
  std::vector<row_id> ids(rows.size());
  store.reserve(rows.size());  // may throw: the store is unchanged
  store.clear();
  store.reserve(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) ids[i] = store.insert(std::move(rows[i]));
  return ids;
}

/// Whether `Store` has the optional hook for_each_row(f), which calls
/// f(id, row) for every row in id order (the memory store has it).
template <class Store>
concept row_store_with_ids = requires(const Store& s) {
  s.for_each_row([](row_id, const typename Store::row_type&) {});
};

/// A store's rows by position, and their ids once known. With the hook
/// for_each_row the rows are read where they are and their ids are known at
/// once; without it the rows are copied, and ids_of() learns their ids by
/// re-inserting them (reload_rows).
template <class Store>
struct positioned_rows {
  using row_type = typename Store::row_type;
  std::vector<const row_type*> rows;
  std::vector<row_id> ids;
  std::vector<row_type> copies;
  std::size_t size() const noexcept { return rows.size(); }
  const row_type& operator[](std::size_t i) const noexcept { return *rows[i]; }
};

/// The rows of `store` by position (may throw; `store` is unchanged).
template <class Store>
positioned_rows<Store> rows_by_position(const Store& store) {
  positioned_rows<Store> out;
  out.rows.reserve(store.size());
  if constexpr (row_store_with_ids<Store>) {
    out.ids.reserve(store.size());
    store.for_each_row([&](row_id id, const typename Store::row_type& r) {
      out.ids.push_back(id);
      out.rows.push_back(&r);
    });
  } else {
    out.copies = copy_rows(store);
    for (const auto& r : out.copies) out.rows.push_back(&r);
  }
  return out;
}

/// The id of each row of `rows`, by position: known already with the hook;
/// otherwise the rows are re-inserted (reload_rows, with its guarantees).
template <class Store>
const std::vector<row_id>& ids_of(Store& store, positioned_rows<Store>& rows) {
  if constexpr (!row_store_with_ids<Store>) rows.ids = reload_rows(store, rows.copies);
  return rows.ids;
}

}  // namespace flowlib::detail
