// zab/zab.hpp — umbrella header for the protocol core (no Boost.Asio).
#pragma once

#include "zab/core/assert.hpp"
#include "zab/core/bytes.hpp"
#include "zab/core/concepts.hpp"
#include "zab/core/error.hpp"
#include "zab/core/logging.hpp"
#include "zab/core/messages.hpp"
#include "zab/core/types.hpp"
#include "zab/core/version.hpp"
#include "zab/core/zxid.hpp"
