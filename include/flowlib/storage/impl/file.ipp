// flowlib/storage/impl/file.ipp
//
// The definitions storage/file.hpp declares: inline in header-only mode,
// compiled once by src/flowlib.cpp under FLOWLIB_SEPARATE_COMPILATION
// (detail/config.hpp).
#pragma once

#include <flowlib/storage/file.hpp>

namespace flowlib::detail {

FLOWLIB_DECL std::string file_table_layout::dir(std::string_view table) {
  return "tables/" + checkpoint_name_hex(table);
}

FLOWLIB_DECL std::string file_table_layout::record(const std::string& dir, std::uint64_t seq) {
  std::string s = std::to_string(seq);
  return dir + "/" + std::string(20 - s.size(), '0') + s;
}

FLOWLIB_DECL std::optional<std::uint64_t> file_table_layout::parse_seq(std::string_view name) {
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(name.data(), name.data() + name.size(), v);
  if (ec != std::errc{} || p != name.data() + name.size() || name.size() != 20) return std::nullopt;
  return v;
}

FLOWLIB_DECL void file_table_layout::write_header(std::string& out, const header& h) {
  out.push_back(static_cast<char>(version));
  out.push_back(static_cast<char>(h.what));
  row_value<std::string>::write(out, h.flow);
  row_put(out, h.batch);
  row_put(out, h.id_bound);
  row_put(out, h.log_begin);
  row_put(out, h.log_end);
}

FLOWLIB_DECL file_table_layout::header file_table_layout::read_header(byte_reader& r) {
  header h;
  const auto v = row_get<std::uint8_t>(r);
  if (v != version) {
    r.fail("the record has format version " + std::to_string(v) + "; this build reads version " +
           std::to_string(version));
  }
  const auto k = row_get<std::uint8_t>(r);
  if (k > 1) r.fail("the record is neither a delta nor a snapshot");
  h.what = static_cast<kind>(k);
  row_value<std::string>::read(r, h.flow);
  h.batch = row_get<std::uint64_t>(r);
  h.id_bound = row_get<std::uint64_t>(r);
  h.log_begin = row_get<std::uint64_t>(r);
  h.log_end = row_get<std::uint64_t>(r);
  if (h.id_bound > std::uint64_t{0xffffffff}) r.fail("the id bound is above 2^32-1");
  if (h.log_begin > h.log_end) r.fail("the append log starts after its end");
  return h;
}

FLOWLIB_DECL file_table_layout::listing file_table_layout::read(
    const checkpoint_store& store, std::string_view table,
    const std::function<bool(std::string_view, std::uint64_t)>& committed) {
  const std::string d = dir(table);
  std::vector<listing::rec> all;
  for (const auto& name : store.list(d)) {
    const auto seq = parse_seq(name);
    if (!seq) continue;
    listing::rec r;
    r.seq = *seq;
    r.path = d + "/" + name;
    auto bytes = store.read(r.path);
    if (!bytes) continue;
    r.bytes = std::move(*bytes);
    const std::string where = suffix(r.path, store);  // outlives the reader, which keeps a view
    byte_reader in{r.bytes, 0, table, where, errc::checkpoint_corrupt};
    r.head = read_header(in);
    r.body = in.pos;
    all.push_back(std::move(r));
  }
  listing out;
  const auto counts = [&](const header& h) { return h.flow.empty() || committed(h.flow, h.batch); };
  // The last snapshot that counts; records after a stale one are stale too
  // (a batch commits only after the one before it committed).
  std::size_t snap = all.size();
  for (std::size_t i = all.size(); i-- > 0;) {
    if (all[i].head.what == kind::snapshot && counts(all[i].head)) {
      snap = i;
      break;
    }
  }
  if (snap == all.size()) {
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (counts(all[i].head)) {
        throw error(errc::checkpoint_corrupt, std::string(table), "", "",
                    "record '" + all[i].path + "' in " + store.describe() +
                        " is a committed delta without a committed snapshot before it; "
                        "nothing was loaded");
      }
      out.stale.push_back(all[i].path);
    }
    out.next_seq = all.empty() ? 0 : all.front().seq;
    return out;
  }
  for (std::size_t i = 0; i < snap; ++i) out.old.push_back(all[i].path);
  std::size_t end = snap + 1;
  while (end < all.size() && all[end].head.what == kind::delta && counts(all[end].head) &&
         all[end].seq == all[end - 1].seq + 1) {
    ++end;
  }
  out.next_seq = all[end - 1].seq + 1;
  for (std::size_t i = end; i < all.size(); ++i) out.stale.push_back(all[i].path);
  for (std::size_t i = snap; i < end; ++i) out.live.push_back(std::move(all[i]));
  return out;
}

FLOWLIB_DECL std::string file_table_layout::suffix(const std::string& path,
                                                   const checkpoint_store& store) {
  return " in record '" + path + "' of " + store.describe() + "; nothing was loaded";
}

}  // namespace flowlib::detail
