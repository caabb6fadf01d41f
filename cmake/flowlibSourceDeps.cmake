# The libraries of flowlib's optional source targets, as imported targets:
#   flowlib_deps::csv      libcsv (Debian libcsv-dev): CSV records for FileSource
#   flowlib_deps::xxhash   xxhash.h (Debian libxxhash-dev), used inlined: FileSource's checksums
#   flowlib_deps::rdkafka  librdkafka (Debian librdkafka-dev): KafkaSource, KafkaSink
# simdjson has a CMake package of its own (simdjson::simdjson). Included by
# flowlib's CMakeLists.txt and again by its installed package config, so a
# consumer's project defines the same targets. A target already defined (by
# a parent project, or an earlier inclusion) is kept; a library not found
# leaves its target undefined, and the flowlib targets that need it are then
# not defined either.
if(NOT TARGET flowlib_deps::csv)
  find_path(FLOWLIB_CSV_INCLUDE_DIR csv.h)
  find_library(FLOWLIB_CSV_LIBRARY csv)
  if(FLOWLIB_CSV_INCLUDE_DIR AND FLOWLIB_CSV_LIBRARY)
    add_library(flowlib_deps::csv UNKNOWN IMPORTED)
    set_target_properties(flowlib_deps::csv PROPERTIES
      IMPORTED_LOCATION "${FLOWLIB_CSV_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${FLOWLIB_CSV_INCLUDE_DIR}")
  endif()
endif()
if(NOT TARGET flowlib_deps::xxhash)
  find_path(FLOWLIB_XXHASH_INCLUDE_DIR xxhash.h)
  if(FLOWLIB_XXHASH_INCLUDE_DIR)
    add_library(flowlib_deps::xxhash INTERFACE IMPORTED)
    set_target_properties(flowlib_deps::xxhash PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${FLOWLIB_XXHASH_INCLUDE_DIR}")
  endif()
endif()
if(NOT TARGET flowlib_deps::rdkafka)
  find_path(FLOWLIB_RDKAFKA_INCLUDE_DIR librdkafka/rdkafka.h)
  find_library(FLOWLIB_RDKAFKA_LIBRARY rdkafka)
  if(FLOWLIB_RDKAFKA_INCLUDE_DIR AND FLOWLIB_RDKAFKA_LIBRARY)
    add_library(flowlib_deps::rdkafka UNKNOWN IMPORTED)
    set_target_properties(flowlib_deps::rdkafka PROPERTIES
      IMPORTED_LOCATION "${FLOWLIB_RDKAFKA_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${FLOWLIB_RDKAFKA_INCLUDE_DIR}")
  endif()
endif()
if(NOT TARGET simdjson::simdjson)
  find_package(simdjson CONFIG QUIET)
endif()
