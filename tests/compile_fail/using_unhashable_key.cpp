// R-USING-6: key types must be hashable (AbslHashValue); ordering alone is not enough.
// expect-error: a key column's type is not hashable
#include <flowlib/flows/replace_using.hpp>

#include <cstdint>
#include <compare>
#include <utility>

struct Sku {
  std::int64_t vendor;
  std::int64_t code;
  friend auto operator<=>(const Sku&, const Sku&) = default;
#ifdef FLOWLIB_CONTROL
  template <class H>
  friend H AbslHashValue(H h, const Sku& s) {
    return H::combine(std::move(h), s.vendor, s.code);
  }
#endif
};
struct Row {
  Sku sku;
  std::int64_t seq;
};

int main() {
  [[maybe_unused]] flowlib::ReplaceUsing<flowlib::Key<&Row::sku>, flowlib::Seq<&Row::seq>> flow{"f"};
}
