// `kimi serve`: checks every flag, loads the tokenizer and the model, starts the engine (its step thread) and the
// HTTP server, prints where it listens, and serves until SIGINT / SIGTERM, which stop the server, end the requests
// in flight and return 0.
#include "kimi/serve_cmd.h"

#include <fmt/core.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "kimi/error.h"
#include "kimi/model/generate.h"
#include "kimi/model/model.h"
#include "kimi/model_cmds.h"
#include "serve/engine.h"
#include "serve/http_server.h"
#include "text/tokenizer.h"

namespace kimi::cli {

int run_serve(const ServeOptions& opt) {
  using namespace kimi::serve;
  auto fail = [](const std::string& flag, const std::string& expected, const std::string& got) {
    throw Error("serve: " + flag + ": expected " + expected + ", got " + got);
  };
  const Device device = parse_device(opt.device, "serve: --device");
  if (opt.port < 0 || opt.port > 65535) fail("--port", "a value in [0, 65535] (0: any free port)", std::to_string(opt.port));
  if (opt.host.empty()) fail("--host", "an address to listen on (e.g. 127.0.0.1 or 0.0.0.0)", "''");
  if (opt.slots < 1 || opt.slots > 4096) fail("--slots", "a value in [1, 4096]", std::to_string(opt.slots));
  const model::Config c = model::load_model_config(opt.dir);
  const int64_t limit = model::context_limit(c);
  if (opt.ctx_size < 2 || opt.ctx_size > limit)
    fail("--ctx-size", "a value in [2, " + std::to_string(limit) + "] (the model's context limit)",
         std::to_string(opt.ctx_size));
  if (opt.max_batch_tokens < opt.slots || opt.max_batch_tokens > (int64_t(1) << 20))
    fail("--max-batch-tokens",
         "a value in [--slots = " + std::to_string(opt.slots) + ", 1048576] (every decoding request takes one token "
         "of each step)", std::to_string(opt.max_batch_tokens));
  if (opt.max_queue < 0) fail("--max-queue", "a value >= 0", std::to_string(opt.max_queue));
  if (opt.prefix_cache_mb < 0 || opt.prefix_cache_mb > (int64_t(1) << 30))
    fail("--prefix-cache-mb", "a value in [0, 1073741824] (MiB; 0: prefix caching off)",
         std::to_string(opt.prefix_cache_mb));
  if (opt.prefix_grid < 64 || opt.prefix_grid % 64 != 0)
    fail("--prefix-grid", "a positive multiple of 64 (the KDA chunk)", std::to_string(opt.prefix_grid));
  if (opt.threads < 0 || opt.threads > max_cpu_threads())
    fail("--threads", "a value in [0, " + std::to_string(max_cpu_threads()) + "]", std::to_string(opt.threads));
  std::string name = opt.model_name;
  if (name.empty()) name = std::filesystem::path(opt.dir).lexically_normal().filename().string();
  if (name.empty() || name == ".") name = std::filesystem::absolute(opt.dir).lexically_normal().parent_path().filename().string();

  const text::Tokenizer tok = text::Tokenizer::load(opt.dir);
  if (int64_t(tok.vocab_size()) > c.vocab_size)
    throw Error("serve: " + opt.dir + ": the tokenizer's " + std::to_string(tok.vocab_size()) +
                " token ids exceed the model's vocab_size " + std::to_string(c.vocab_size));

  // SIGINT / SIGTERM go to one watcher thread (blocked everywhere else: every thread made below inherits the mask).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error return, not a signal

  const model::Model m(opt.dir, device);
  EngineOptions eo;
  eo.slots = opt.slots, eo.ctx_size = opt.ctx_size, eo.max_batch_tokens = opt.max_batch_tokens;
  eo.max_queue = opt.max_queue;
  eo.prefix_cache_bytes = size_t(opt.prefix_cache_mb) << 20, eo.prefix_grid = opt.prefix_grid;
  eo.ctx.cpu_threads = opt.threads;
  Engine engine(m, eo);
  HttpOptions ho;
  ho.host = opt.host, ho.port = opt.port, ho.model_name = name;
  HttpServer server(engine, tok, ho);
  const int port = server.bind();
  fmt::print("kimi serve: model '{}' ({}, vocab {}), {} slots of {} tokens, {} tokens per step, on {}\n", name, opt.dir,
             tok.vocab_size(), opt.slots, opt.ctx_size, opt.max_batch_tokens, to_string(device));
  if (opt.prefix_cache_mb > 0)
    fmt::print("kimi serve: prefix cache of {} MiB, snapshots every {} prompt tokens\n", opt.prefix_cache_mb,
               opt.prefix_grid);
  else
    fmt::print("kimi serve: prefix cache off\n");
  fmt::print("kimi serve: listening on http://{}:{}\n", opt.host, port);
  std::fflush(stdout);

  std::atomic<bool> served{false};
  std::thread watcher([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (served) return;  // woken by the main thread: the server has stopped already
    fmt::print("kimi serve: {}: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    std::fflush(stdout);
    // A stop before run() has started listening is lost (cpp-httplib stops only a running server): repeat it
    // until run() has returned.
    while (!served) {
      server.stop();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  server.run();
  served = true;
  pthread_kill(watcher.native_handle(), SIGTERM);  // blocked, so it only wakes the watcher's sigwait
  watcher.join();
  engine.stop();
  fmt::print("kimi serve: stopped\n");
  return 0;
}

}  // namespace kimi::cli
