// flowlib/runtime/impl/checkpoint_log.ipp
//
// The definitions runtime/checkpoint_log.hpp declares: inline in header-only
// mode, compiled once by src/flowlib.cpp under FLOWLIB_SEPARATE_COMPILATION
// (detail/config.hpp).
#pragma once

#include <flowlib/runtime/checkpoint_log.hpp>

namespace flowlib::detail {

FLOWLIB_DECL std::optional<std::uint64_t> checkpoint_log::parse_batch(std::string_view s) {
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || s.size() != 20) return std::nullopt;
  return v;
}

FLOWLIB_DECL std::string checkpoint_log::flow_dir(std::string_view flow) {
  std::string d;
  append_flow_dir(d, flow, 0);
  return d;
}

FLOWLIB_DECL void checkpoint_log::append_flow_dir(std::string& out, std::string_view flow,
                                                  std::size_t more) {
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

FLOWLIB_DECL std::string checkpoint_log::batch_path(std::string_view flow, std::string_view sub,
                                                    std::uint64_t n) {
  std::string p;
  append_flow_dir(p, flow, 2 + sub.size() + 20);
  p += '/';
  p += sub;
  p += '/';
  append_batch_name(p, n);
  return p;
}

FLOWLIB_DECL void checkpoint_log::open_pipeline(std::string_view name) {
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

FLOWLIB_DECL void checkpoint_log::open_flow(std::string_view flow, std::string_view definition,
                                            std::string_view layout) {
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

FLOWLIB_DECL std::optional<std::string> checkpoint_log::layout_of(
    const checkpoint_store& store, std::string_view flow) {
  auto rec = store.read(flow_dir(flow) + "/definition");
  if (!rec) return std::nullopt;
  byte_reader r{*rec, 0, flow, "; the checkpoint was left as it was", errc::checkpoint_corrupt};
  r.bytes();
  return std::string(r.bytes());
}

FLOWLIB_DECL void checkpoint_log::write_pending() {
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

FLOWLIB_DECL std::optional<checkpoint_log::commit_record> checkpoint_log::last_commit(
    std::string_view flow) const {
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

FLOWLIB_DECL std::optional<planned_batch> checkpoint_log::planned(
    std::string_view flow, std::uint64_t n) const {
  auto rec = store_->read(batch_path(flow, "offsets", n));
  if (!rec) return std::nullopt;
  byte_reader r = reader(*rec, flow);
  planned_batch p;
  p.from = source_position::read(r);
  p.to = source_position::read(r);
  return p;
}

FLOWLIB_DECL void checkpoint_log::write_planned(std::string_view flow, std::uint64_t n,
                                                const planned_batch& p) {
  std::string b;
  byte_writer w{b};
  p.from.write(w);
  p.to.write(w);
  store_->write(batch_path(flow, "offsets", n), b);
}

FLOWLIB_DECL void checkpoint_log::write_commit(std::string_view flow, std::uint64_t n,
                                               const source_position& end,
                                               std::uint64_t update_id) {
  std::string b;
  byte_writer w{b};
  end.write(w);
  w.integer<std::uint64_t>(update_id);
  store_->write(batch_path(flow, "commits", n), b);
}

FLOWLIB_DECL component_records checkpoint_log::load_state(
    std::string_view flow, std::uint64_t last, std::size_t c) const {
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

FLOWLIB_DECL void checkpoint_log::purge_before(std::string_view flow, std::uint64_t snapshot_batch,
                                               std::uint64_t retain) {
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

FLOWLIB_DECL void checkpoint_log::reset_flow(std::string_view flow) {
  const std::string dir = flow_dir(flow);
  for (const char* sub : {"/offsets", "/commits", "/state"}) store_->remove(dir + sub);
}

FLOWLIB_DECL bool checkpoint_log::imported(std::string_view flow) const {
  return store_->read("imports/" + hex(flow)).has_value();
}

FLOWLIB_DECL void checkpoint_log::mark_imported(std::string_view flow, std::string_view from) {
  std::string b;
  byte_writer w{b};
  w.bytes(from);
  store_->write("imports/" + hex(flow), b);
}

FLOWLIB_DECL void checkpoint_log::copy_flow(const checkpoint_store& from,
                                            std::string_view from_flow, std::string_view flow,
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

FLOWLIB_DECL std::string checkpoint_log::state_path(std::string_view flow, std::uint64_t n,
                                                    std::size_t c, checkpoint_scope scope) {
  std::string p;
  append_flow_dir(p, flow, 7 + 20 + 1 + 20 + 9);
  p += "/state/";
  append_batch_name(p, n);
  p += '.';
  p += std::to_string(c);
  p += scope == checkpoint_scope::snapshot ? ".snapshot" : ".delta";
  return p;
}

}  // namespace flowlib::detail
