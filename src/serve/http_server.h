// serve/http_server.h: the OpenAI-compatible HTTP API over an Engine (cpp-httplib; docs/serve.md).
//
//   POST /v1/completions        prompt (text or token ids) -> text          (serve/request.h: the fields)
//   POST /v1/chat/completions   messages -> the chat template -> assistant message (content, reasoning_content,
//                               tool_calls)
//   GET  /v1/models             the served model          GET /health   {"status": "ok"}
//   GET  /metrics               Prometheus text (serve/metrics.h)
// Requests are parsed and tokenized on the HTTP worker threads; the engine's step thread only runs the model.
// Responses stream through cpp-httplib's chunked content provider, both with "stream": true (SSE, OpenAI's chunk
// objects, then "data: [DONE]") and without (one JSON body at the end): either way the worker checks the socket
// while it waits, so a client that disconnects cancels its request and its slot is freed at the next step.
// Refusals are ApiError JSON (serve/api_error.h): 400 for invalid fields, 404 unknown model or route, 413 a body
// over max_body_bytes, 503 a full queue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "serve/engine.h"
#include "text/tokenizer.h"

namespace kimi::serve {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                       // 0: any free port (bind() returns it)
  std::string model_name;                // what /v1/models lists and requests must name
  size_t max_body_bytes = 10u << 20;     // larger bodies: 413
  int threads = 0;                       // HTTP worker threads (0: slots + max_queue + 8: every queued request
                                         // holds a worker while it waits)
};

class HttpServer {
 public:
  // tok: the checkpoint's tokenizer (its vocabulary must be the model's). Nothing is bound yet.
  HttpServer(Engine& engine, const text::Tokenizer& tok, HttpOptions opt);
  ~HttpServer();
  // Binds host:port; kimi::Error naming --host / --port when it cannot. Returns the port bound.
  int bind();
  // Serves until stop() (from any thread, e.g. a signal watcher).
  void run();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kimi::serve
