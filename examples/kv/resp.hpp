// examples/kv/resp.hpp — the Redis protocol (RESP2) for the kv server, I/O-free: the request
// parser (resp_parser.hpp, with inline commands from resp_inline.hpp) and the reply writers
// (resp_writer.hpp). The server owns the sockets; these only turn bytes into commands and
// replies into bytes.
#pragma once

#include "resp_inline.hpp"
#include "resp_parser.hpp"
#include "resp_writer.hpp"
