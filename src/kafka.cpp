// src/kafka.cpp: the library flowlib::kafka_compiled.
//
// Compiles, once, the Kafka wing's row-type-independent definitions: the
// librdkafka layer, KafkaSink's engine, KafkaSource's consumer. A program
// that defines FLOWLIB_KAFKA_SEPARATE_COMPILATION declares them only and
// links this library (detail/config.hpp).
#if !defined(FLOWLIB_KAFKA_SEPARATE_COMPILATION)
#error "src/kafka.cpp is compiled with FLOWLIB_KAFKA_SEPARATE_COMPILATION (the CMake target flowlib::kafka_compiled defines it)"
#endif

#include <flowlib/detail/impl/kafka.ipp>
#include <flowlib/sink/detail/impl/kafka_engine.ipp>
#include <flowlib/source/impl/debezium.ipp>
#include <flowlib/source/impl/kafka.ipp>
