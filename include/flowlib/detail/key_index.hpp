// flowlib/detail/key_index.hpp
//
// The index a keyed flow keeps of its target: key value -> Entry, an
// absl::flat_hash_map that can also be probed with a batch row and its
// precomputed key hash (a Probe: `const Row* row; std::size_t hash;`), so a
// lookup neither builds the key nor hashes it twice. (AUTO CDC keeps a
// detail::flat_index with the same hash and equality instead; see
// flat_index.hpp.) Internal.
#pragma once

#include <flowlib/columns.hpp>
#include <flowlib/detail/key_hash.hpp>

#include <absl/container/flat_hash_map.h>

#include <cstddef>

namespace flowlib::detail {

template <key_extractor K, class Probe>
struct key_index_hash {
  using is_transparent = void;
  using key_type = typename K::value_type;
  std::size_t operator()(const key_type& k) const { return key_hash<key_type>{}(k); }
  std::size_t operator()(const Probe& p) const noexcept { return p.hash; }
};

template <key_extractor K, class Probe>
struct key_index_eq {
  using is_transparent = void;
  using key_type = typename K::value_type;
  K key;
  bool operator()(const key_type& a, const key_type& b) const { return a == b; }
  bool operator()(const key_type& a, const Probe& p) const {
    return key_traits<K>::equal(key, *p.row, a);
  }
  bool operator()(const Probe& p, const key_type& a) const { return (*this)(a, p); }
};

template <key_extractor K, class Probe, class Entry>
using key_index = absl::flat_hash_map<typename K::value_type, Entry, key_index_hash<K, Probe>,
                                      key_index_eq<K, Probe>>;

}  // namespace flowlib::detail
