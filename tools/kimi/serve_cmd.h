// tools/kimi/serve_cmd.h: `kimi serve DIR --port P`: the OpenAI-compatible HTTP server (src/serve, docs/serve.md).
#pragma once

#include <cstdint>
#include <string>

namespace kimi::cli {

struct ServeOptions {
  std::string dir;
  std::string device = "cpu";      // cpu, cuda or cuda:i
  std::string host = "127.0.0.1";
  int port = 8080;                 // 0: a free port, printed
  int64_t slots = 8;               // requests generating at once
  int64_t ctx_size = 4096;         // tokens per request (prompt + new tokens)
  int64_t max_batch_tokens = 512;  // tokens per step (>= --slots)
  int64_t max_queue = 256;         // requests waiting beyond which new ones get 503
  std::string model_name;          // default: the directory's name
  int threads = 0;                 // CPU threads of the steps, in [0, max_cpu_threads()]
  int64_t prefix_cache_mb = 1024;  // MiB of prefix snapshots (0: prefix caching off); on the cache's devices
  int64_t prefix_grid = 256;       // prefix lengths snapshotted: multiples of this (a multiple of 64)
};
// Serves until SIGINT or SIGTERM; 0 then.
int run_serve(const ServeOptions& opt);

}  // namespace kimi::cli
