// flowlib/catalog.hpp: forwards to flowlib/runtime/catalog.hpp (the runtime lives in runtime/).
#pragma once

#include <flowlib/runtime/catalog.hpp>
