// FileSource: reading JSON lines and CSV files into rows, against simdjson
// and libcsv used by hand on the same file.
//
// What is measured (docs/file-source.md#performance has the results): rows
// per second (`items_per_second`) over one file of 1e6 rows of six columns
// (int64, string, double, bool, date, nullable int32; about 100 bytes a
// row as JSON, 50 as CSV), in the page cache:
//   json/simdjson        the baseline: read the file into a padded buffer,
//                        iterate_many over it, sum one field of each
//                        record;
//   json/simdjson_rows   simdjson by hand: each line parsed in place, its six
//                        fields decoded into a row pushed to a vector (what
//                        a program would write without flowlib);
//   json/read            FileSource::read() of the whole file into a
//                        std::vector<Row> (the file listed beforehand):
//                        load, checksum check, decode by schema;
//   json/list            FileSource::latest() on a new source: the listing
//                        and the counting pass (records and checksum);
//   json/pipeline        a whole Pipeline::update() of an Append flow into a
//                        new memory table, over a new checkpoint (listing,
//                        checkpoint records, reading, appending); the
//                        source is one for every run (listed once);
//   csv/libcsv           the baseline: read the file, csv_parse with field
//                        callbacks summing one field;
//   csv/read, csv/list, csv/pipeline   as for JSON.
//
// Every reader keeps its read buffer between runs, and simdjson runs
// single-threaded in all. Rates are per CPU second (no UseRealTime): the
// benchmark is single-threaded and CPU time is the steadier clock on a
// shared machine.
//
// FLOWLIB_BENCH_SMOKE=1: 1000 rows; before the benchmarks run, the
// baselines and FileSource must agree on the rows (sum of ids, row count,
// the rows decoded by hand equal to FileSource's); the program exits 1
// otherwise.
#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/file.hpp>

#include "support/smoke.hpp"

#include <benchmark/benchmark.h>
#include <csv.h>
#include <fcntl.h>
#include <simdjson.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace fl = flowlib;
namespace fb = flowlib_bench;

namespace bench {

struct Sale {
  std::int64_t id = 0;
  std::string customer;
  double amount = 0;
  bool paid = false;
  std::chrono::sys_days day{};
  std::optional<std::int32_t> qty;
  friend bool operator==(const Sale&, const Sale&) = default;
};
FLOWLIB_SCHEMA(Sale, id, customer, amount, paid, day, qty);

std::size_t rows() { return fb::smoke_mode() ? 1000 : 1'000'000; }

std::filesystem::path& data_dir() {
  static std::filesystem::path dir;
  return dir;
}
std::filesystem::path json_dir() { return data_dir() / "json"; }
std::filesystem::path csv_dir() { return data_dir() / "csv"; }
std::filesystem::path json_file() { return json_dir() / "sales.jsonl"; }
std::filesystem::path csv_file() { return csv_dir() / "sales.csv"; }

std::string iso_day(std::chrono::sys_days d) {
  const std::chrono::year_month_day ymd{d};
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02u", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()));
  return buf;
}

// Writes the JSON lines and CSV files of the same rows.
void make_files() {
  std::error_code ec;
  data_dir() = std::filesystem::temp_directory_path() / ("flowlib_bench_file_source_" + std::to_string(::getpid()));
  std::filesystem::remove_all(data_dir(), ec);
  std::filesystem::create_directories(json_dir());
  std::filesystem::create_directories(csv_dir());
  std::ofstream json(json_file(), std::ios::binary);
  std::ofstream csv(csv_file(), std::ios::binary);
  csv << "id,customer,amount,paid,day,qty\n";
  std::mt19937_64 rng(42);
  char amount[32];
  for (std::size_t i = 0; i < rows(); ++i) {
    const auto id = static_cast<std::int64_t>(1'000'000'000 + i);
    const std::string customer = "customer_" + std::to_string(rng() % 100000);
    const auto cents = static_cast<double>(rng() % 1'000'000) / 100.0;
    *std::to_chars(amount, amount + sizeof amount - 1, cents).ptr = '\0';
    const bool paid = rng() % 2 == 0;
    const std::string day = iso_day(std::chrono::sys_days{std::chrono::days{19000 + static_cast<int>(rng() % 1000)}});
    const bool has_qty = rng() % 4 != 0;
    const auto qty = static_cast<std::int32_t>(rng() % 1000);
    json << "{\"id\":" << id << ",\"customer\":\"" << customer << "\",\"amount\":" << amount
         << ",\"paid\":" << (paid ? "true" : "false") << ",\"day\":\"" << day << "\",\"qty\":";
    if (has_qty) json << qty; else json << "null";
    json << "}\n";
    csv << id << ',' << customer << ',' << amount << ',' << (paid ? "true" : "false") << ',' << day << ',';
    if (has_qty) csv << qty;
    csv << '\n';
  }
}

// --- Baselines --------------------------------------------------------------------

// Reads `path` into `buf`, followed by SIMDJSON_PADDING spare bytes; the
// buffer is kept from call to call, as FileSource keeps its own (fresh
// pages cost a fault each). Returns the file's size.
std::size_t load(const std::filesystem::path& path, std::string& buf) {
  const auto size = static_cast<std::size_t>(std::filesystem::file_size(path));
  if (buf.size() < size + simdjson::SIMDJSON_PADDING) buf.resize(size + simdjson::SIMDJSON_PADDING);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  std::size_t done = 0;
  while (fd >= 0 && done < size) {
    const ::ssize_t n = ::read(fd, buf.data() + done, size - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  if (fd >= 0) ::close(fd);
  return done;
}

// simdjson alone: the sum of the "id" fields.
std::int64_t simdjson_sum() {
  static std::string buf;
  const std::size_t size = load(json_file(), buf);
  static simdjson::ondemand::parser parser;
#ifdef SIMDJSON_THREADS_ENABLED
  parser.threaded = false;  // one thread, as FileSource
#endif
  simdjson::ondemand::document_stream docs;
  if (parser.iterate_many(static_cast<const char*>(buf.data()), size, simdjson::ondemand::DEFAULT_BATCH_SIZE).get(docs))
    return -1;
  std::int64_t sum = 0;
  for (auto doc : docs) {
    std::int64_t id = 0;
    if (doc["id"].get_int64().get(id)) return -1;
    sum += id;
  }
  return sum;
}

// simdjson by hand: each line's six fields into a Sale.
bool day_of(std::string_view s, std::chrono::sys_days& out) {
  int y = 0;
  unsigned m = 0, d = 0;
  if (s.size() != 10 || std::from_chars(s.data(), s.data() + 4, y).ec != std::errc{} ||
      std::from_chars(s.data() + 5, s.data() + 7, m).ec != std::errc{} ||
      std::from_chars(s.data() + 8, s.data() + 10, d).ec != std::errc{})
    return false;
  const std::chrono::year_month_day ymd{std::chrono::year{y}, std::chrono::month{m}, std::chrono::day{d}};
  if (!ymd.ok()) return false;
  out = std::chrono::sys_days{ymd};
  return true;
}

bool simdjson_rows(std::vector<Sale>& out) {
  static std::string buf;
  const std::size_t size = load(json_file(), buf);
  static simdjson::ondemand::parser parser;
  out.reserve(out.size() + rows());
  const char* p = buf.data();
  const char* const end = p + size;
  while (p < end) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
    const std::size_t len = nl != nullptr ? static_cast<std::size_t>(nl - p) : static_cast<std::size_t>(end - p);
    simdjson::ondemand::document doc;
    if (parser.iterate(simdjson::padded_string_view(p, len, static_cast<std::size_t>(end - p) + simdjson::SIMDJSON_PADDING)).get(doc))
      return false;
    simdjson::ondemand::object o;
    if (doc.get_object().get(o)) return false;
    Sale& s = out.emplace_back();
    for (auto field : o) {
      std::string_view key;
      if (field.unescaped_key().get(key)) return false;
      auto v = field.value();
      if (key == "id") {
        if (v.get_int64().get(s.id)) return false;
      } else if (key == "customer") {
        std::string_view str;
        if (v.get_string().get(str)) return false;
        s.customer.assign(str);
      } else if (key == "amount") {
        if (v.get_double().get(s.amount)) return false;
      } else if (key == "paid") {
        if (v.get_bool().get(s.paid)) return false;
      } else if (key == "day") {
        std::string_view str;
        if (v.get_string().get(str) || !day_of(str, s.day)) return false;
      } else if (key == "qty") {
        bool null = false;
        if (v.is_null().get(null)) return false;
        if (!null) {
          std::int64_t q = 0;
          if (v.get_int64().get(q)) return false;
          s.qty = static_cast<std::int32_t>(q);
        }
      }
    }
    p = nl != nullptr ? nl + 1 : end;
  }
  return true;
}

// libcsv alone: the sum of the "id" fields (the header skipped).
struct csv_sum_state {
  std::size_t field = 0;
  std::size_t row = 0;
  std::int64_t sum = 0;
};

std::int64_t libcsv_sum() {
  static std::string buf;
  const std::string_view text(buf.data(), load(csv_file(), buf));
  csv_parser p;
  if (csv_init(&p, 0) != 0) return -1;
  csv_sum_state st;
  const auto on_field = [](void* data, std::size_t len, void* state) {
    auto& s = *static_cast<csv_sum_state*>(state);
    if (s.field++ == 0 && s.row > 0) {
      std::int64_t v = 0;
      const char* b = static_cast<const char*>(data);
      std::from_chars(b, b + len, v);
      s.sum += v;
    }
  };
  const auto on_row = [](int, void* state) {
    auto& s = *static_cast<csv_sum_state*>(state);
    s.field = 0;
    ++s.row;
  };
  csv_parse(&p, text.data(), text.size(), on_field, on_row, &st);
  csv_fini(&p, on_field, on_row, &st);
  csv_free(&p);
  return st.sum;
}

// --- FileSource -------------------------------------------------------------------

fl::FileSourceOptions options_for(fl::file_format f) {
  return {.directory = f == fl::file_format::csv ? csv_dir() : json_dir(), .format = f};
}

template <fl::file_format F>
void bm_read(benchmark::State& state) {
  fl::FileSource<Sale> source{"sales", options_for(F)};
  const auto latest = source.latest();
  std::vector<Sale> out;
  source.read(source.start(), latest, out);  // warm: the buffers have their pages
  for (auto _ : state) {
    out.clear();
    source.read(source.start(), latest, out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * rows()));
}

template <fl::file_format F>
void bm_list(benchmark::State& state) {
  for (auto _ : state) {
    fl::FileSource<Sale> source{"sales", options_for(F)};
    benchmark::DoNotOptimize(source.latest());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * rows()));
}

// One source for every iteration (warm, as in bm_read; its list goes to
// each new checkpoint at the update's first listing); a new checkpoint,
// table and pipeline each time.
template <fl::file_format F>
void bm_pipeline(benchmark::State& state) {
  fl::FileSource<Sale> source{"sales", options_for(F)};
  std::vector<Sale> warm;
  source.read(source.start(), source.latest(), warm);
  warm = {};
  for (auto _ : state) {
    auto checkpoint = std::make_unique<fl::MemoryCheckpoint>();
    auto table = std::make_unique<fl::StreamingTable<Sale>>("sales");
    auto pipeline = std::make_unique<fl::Pipeline>("bench", *checkpoint);
    pipeline->flow("sales").from(source).into(*table, fl::Append{"sales"});
    benchmark::DoNotOptimize(pipeline->update().input_rows());
    state.PauseTiming();
    pipeline.reset();
    table.reset();
    checkpoint.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * rows()));
}

void bm_simdjson(benchmark::State& state) {
  simdjson_sum();  // warm, as FileSource's benchmarks are
  for (auto _ : state) benchmark::DoNotOptimize(simdjson_sum());
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * rows()));
}

void bm_simdjson_rows(benchmark::State& state) {
  std::vector<Sale> out;
  simdjson_rows(out);
  for (auto _ : state) {
    out.clear();
    benchmark::DoNotOptimize(simdjson_rows(out));
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * rows()));
}

void bm_libcsv(benchmark::State& state) {
  libcsv_sum();
  for (auto _ : state) benchmark::DoNotOptimize(libcsv_sum());
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * rows()));
}

// Smoke check: the baselines and FileSource agree.
void check() {
  std::int64_t want = 0;
  for (std::size_t i = 0; i < rows(); ++i) want += static_cast<std::int64_t>(1'000'000'000 + i);
  fb::require(simdjson_sum() == want, "simdjson sums the ids");
  fb::require(libcsv_sum() == want, "libcsv sums the ids");
  std::vector<Sale> by_hand;
  fb::require(simdjson_rows(by_hand), "simdjson by hand decodes every line");
  for (const auto f : {fl::file_format::json_lines, fl::file_format::csv}) {
    fl::FileSource<Sale> source{"sales", options_for(f)};
    std::vector<Sale> got;
    source.read(source.start(), source.latest(), got);
    std::int64_t sum = 0;
    for (const auto& s : got) sum += s.id;
    fb::require(got.size() == rows() && sum == want, "FileSource reads every row");
    fb::require(got == by_hand, "FileSource and simdjson by hand decode the same rows");
    fl::MemoryCheckpoint checkpoint;
    fl::StreamingTable<Sale> table{"sales"};
    fl::FileSource<Sale> again{"sales", options_for(f)};
    fl::Pipeline pipeline{"bench", checkpoint};
    pipeline.flow("sales").from(again).into(table, fl::Append{"sales"});
    pipeline.update();
    fb::require(table.size() == rows(), "the pipeline appends every row");
  }
}

}  // namespace bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  bench::make_files();
  if (fb::smoke_mode()) {
    bench::check();
    std::printf("smoke checks passed: the baselines and FileSource agree\n");
  }
  const auto reg = [](const char* name, auto fn) {
    benchmark::RegisterBenchmark(name, fn)->Unit(benchmark::kMillisecond);
  };
  reg("file_source/json/simdjson", bench::bm_simdjson);
  reg("file_source/json/simdjson_rows", bench::bm_simdjson_rows);
  reg("file_source/json/read", bench::bm_read<fl::file_format::json_lines>);
  reg("file_source/json/list", bench::bm_list<fl::file_format::json_lines>);
  reg("file_source/json/pipeline", bench::bm_pipeline<fl::file_format::json_lines>);
  reg("file_source/csv/libcsv", bench::bm_libcsv);
  reg("file_source/csv/read", bench::bm_read<fl::file_format::csv>);
  reg("file_source/csv/list", bench::bm_list<fl::file_format::csv>);
  reg("file_source/csv/pipeline", bench::bm_pipeline<fl::file_format::csv>);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::error_code ec;
  std::filesystem::remove_all(bench::data_dir(), ec);
  return 0;
}
