// flowlib/event_log.hpp: forwards to flowlib/runtime/event_log.hpp (the runtime lives in runtime/).
#pragma once

#include <flowlib/runtime/event_log.hpp>
