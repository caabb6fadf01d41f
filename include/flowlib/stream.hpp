// flowlib/stream.hpp: forwards to flowlib/runtime/stream.hpp (the runtime lives in runtime/).
#pragma once

#include <flowlib/runtime/stream.hpp>
