// flowlib/pipeline.hpp: forwards to flowlib/runtime/pipeline.hpp (the runtime lives in runtime/).
#pragma once

#include <flowlib/runtime/pipeline.hpp>
