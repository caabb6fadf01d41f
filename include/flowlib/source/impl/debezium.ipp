// flowlib/source/impl/debezium.ipp
//
// The definitions source/debezium.hpp declares: inline in header-only mode,
// compiled once by src/kafka.cpp under FLOWLIB_KAFKA_SEPARATE_COMPILATION
// (detail/config.hpp).
#pragma once

#include <flowlib/source/debezium.hpp>

#include <cstring>

namespace flowlib::detail {

FLOWLIB_KAFKA_DECL void debezium_fail(const record_origin& origin, std::string_view column,
                                      std::string_view reason) {
  std::string d(origin.where);
  if (!d.empty()) d += ": ";
  d += reason;
  throw error(errc::malformed_record, std::string(origin.source), std::string(column), "", std::move(d));
}

FLOWLIB_KAFKA_DECL bool debezium_field(simdjson::ondemand::object& obj, std::string_view key,
                                       simdjson::ondemand::value& out,
                                       const record_origin& origin) {
  const auto e = obj.find_field_unordered(key).get(out);
  if (e == simdjson::NO_SUCH_FIELD) return false;
  if (e) debezium_fail(origin, "", json_syntax_reason(e));
  return true;
}

FLOWLIB_KAFKA_DECL bool debezium_is_null(simdjson::ondemand::value& v) {
  simdjson::ondemand::json_type t{};
  return !v.type().get(t) && t == simdjson::ondemand::json_type::null;
}

FLOWLIB_KAFKA_DECL simdjson::ondemand::object debezium_object_of(simdjson::ondemand::value& v,
                                                                 const record_origin& origin,
                                                                 std::string_view what) {
  simdjson::ondemand::object o;
  simdjson::ondemand::json_type t{};
  if (v.type().get(t) || t != simdjson::ondemand::json_type::object || v.get_object().get(o)) {
    std::string reason(what);
    reason += " is not a JSON object, value ";
    reason += json_cut(json_raw_value(v));
    debezium_fail(origin, "", reason);
  }
  return o;
}

FLOWLIB_KAFKA_DECL bool debezium_open(simdjson::ondemand::parser& parser, std::string& buffer,
                                      std::string_view value, const record_origin& origin,
                                      debezium_truncate truncate, debezium_envelope& e) {
  const std::size_t need = value.size() + simdjson::SIMDJSON_PADDING;
  if (buffer.size() < need) buffer.resize(need);
  std::memcpy(buffer.data(), value.data(), value.size());
  std::memset(buffer.data() + value.size(), ' ', simdjson::SIMDJSON_PADDING);
  if (auto err = parser.iterate(buffer.data(), value.size(), buffer.size()).get(e.doc)) {
    debezium_fail(origin, "", json_syntax_reason(err));
  }
  simdjson::ondemand::json_type t{};
  if (auto err = e.doc.type().get(t)) debezium_fail(origin, "", json_syntax_reason(err));
  if (t == simdjson::ondemand::json_type::null) {
    bool null = false;
    if (e.doc.is_null().get(null) || !null) debezium_fail(origin, "", "not valid JSON");
    return false;  // the text null: a tombstone
  }
  if (t != simdjson::ondemand::json_type::object) {
    std::string reason = "not a JSON object, value ";
    reason += json_cut(value);
    debezium_fail(origin, "", reason);
  }
  if (auto err = e.doc.get_object().get(e.top)) debezium_fail(origin, "", json_syntax_reason(err));

  // The envelope: the payload of a wrapped record, else the record.
  e.env = &e.top;
  simdjson::ondemand::value payload;
  if (debezium_field(e.top, "payload", payload, origin)) {
    if (debezium_is_null(payload)) return false;  // a tombstone with schemas.enable=true
    e.wrapped = debezium_object_of(payload, origin, "\"payload\"");
    e.env = &e.wrapped;
  }

  // The op.
  simdjson::ondemand::value v;
  if (!debezium_field(*e.env, "op", v, origin)) debezium_fail(origin, "", "the envelope has no \"op\"");
  std::string_view op_text;
  if (v.get_string().get(op_text)) {
    std::string reason = "\"op\" is not a string, value ";
    reason += json_cut(json_raw_value(v));
    debezium_fail(origin, "", reason);
  }
  const char op = op_text.size() == 1 ? op_text[0] : '\0';
  if (op != 'c' && op != 'r' && op != 'u' && op != 'd' && op != 't') {
    std::string reason = "unknown op \"";
    reason += json_cut(op_text);
    reason += "\" (a Debezium change has op c, r, u, d or t)";
    debezium_fail(origin, "", reason);
  }
  if (op == 't' && truncate == debezium_truncate::fail) {
    debezium_fail(origin, "",
                  "op \"t\" (a truncate) maps to no row; set truncate = debezium_truncate::emit to "
                  "pass truncates to apply_as_truncates");
  }
  e.op = op;
  return true;
}

}  // namespace flowlib::detail
