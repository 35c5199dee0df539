// Implementation of serve/http_server.h.
#include "serve/http_server.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <random>

#include "kimi/error.h"
#include "serve/api_error.h"
#include "serve/chat_output.h"
#include "serve/json_body.h"
#include "serve/output.h"
#include "serve/request.h"

namespace kimi::serve {

using nlohmann::json;

namespace {

constexpr auto kPoll = std::chrono::milliseconds(50);  // how often a waiting worker checks its client's socket

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(dump(e.to_json()), "application/json");
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// SplitMix64's finalizer: the seeds of unseeded requests from one random start.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// One request on its way through the engine to its client. Destroyed with cpp-httplib's response (also when the
// client went away): a request that has not ended is cancelled then.
struct Session {
  std::shared_ptr<RequestHandle> handle;
  std::unique_ptr<Output> out;
  std::string id, object, model;
  int64_t created = 0, prompt_tokens = 0, completion_tokens = 0;
  bool stream = false, include_usage = false, continuous_usage = false, chat = false;
  Finish finish = Finish::none;
  std::string error;
  ~Session() {
    if (handle && finish == Finish::none) handle->cancel();
  }

  std::string finish_reason() const {
    return finish == Finish::length ? "length" : finish == Finish::stop ? out->stop_reason() : "stop";
  }
  json usage() const {
    return {{"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens},
            {"total_tokens", prompt_tokens + completion_tokens}};
  }
  json chunk(json choices) const {
    json c = {{"id", id}, {"object", object + (chat ? ".chunk" : "")}, {"created", created}, {"model", model},
              {"choices", std::move(choices)}};
    if (continuous_usage) c["usage"] = usage();  // the counts so far, this chunk's tokens included
    else if (include_usage) c["usage"] = nullptr;
    return c;
  }
  static std::string event(const json& j) { return "data: " + dump(j) + "\n\n"; }

  // Takes what the engine has (waiting at most kPoll) and returns the SSE events it makes (streaming) or, at the
  // end, the whole body (not streaming); "" when there is nothing to write yet.
  std::string advance() {
    RequestHandle::Update u = handle->wait(kPoll);
    completion_tokens += int64_t(u.tokens.size());
    std::vector<json> choices;
    out->push(u.tokens, choices);
    if (u.finish != Finish::none) {
      finish = u.finish, error = u.error;
      out->finish(choices);
    }
    std::string w;
    if (stream) {
      for (json& c : choices) w += event(chunk(json::array({std::move(c)})));
      if (finish == Finish::none) return w;
      if (finish == Finish::error || finish == Finish::cancelled) {
        const ApiError e(500, "generation failed: " + (error.empty() ? std::string("cancelled") : error), "",
                         "generation_failed");
        return w + event(e.to_json()) + "data: [DONE]\n\n";
      }
      json last = chat ? json{{"index", 0}, {"delta", json::object()}, {"logprobs", nullptr}}
                       : json{{"index", 0}, {"text", ""}, {"logprobs", nullptr}};
      last["finish_reason"] = finish_reason();
      w += event(chunk(json::array({last})));
      if (include_usage) {
        json u2 = chunk(json::array());
        u2["usage"] = usage();
        w += event(u2);
      }
      return w + "data: [DONE]\n\n";
    }
    if (finish == Finish::none) return w;
    if (finish == Finish::error || finish == Finish::cancelled)
      return dump(ApiError(500, "generation failed: " + (error.empty() ? std::string("cancelled") : error), "",
                           "generation_failed")
                      .to_json());
    json choice = out->whole();
    choice["finish_reason"] = finish_reason();
    return dump({{"id", id}, {"object", object}, {"created", created}, {"model", model},
                 {"choices", json::array({choice})}, {"usage", usage()}});
  }
};

}  // namespace

struct HttpServer::Impl {
  Engine& engine;
  const text::Tokenizer& tok;
  HttpOptions opt;
  httplib::Server svr;
  std::atomic<uint64_t> requests{0};
  uint64_t seed_base = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
  std::vector<int32_t> plain_stops = default_stop_tokens(tok);
  bool bound = false;

  Impl(Engine& e, const text::Tokenizer& t, HttpOptions o) : engine(e), tok(t), opt(std::move(o)) {}

  void check_model(const std::string& name) const {
    if (name != opt.model_name)
      throw ApiError(404, "model: expected \"" + opt.model_name + "\" (the model this server serves), got \"" + name + "\"",
                     "model", "model_not_found");
  }

  // The sampling fields, the context check and the engine's draw counter.
  GenerationRequest generation(const SamplingRequest& r, std::vector<int32_t> prompt, const char* prompt_field,
                               uint64_t n) const {
    const int64_t L = engine.options().ctx_size, P = int64_t(prompt.size());
    if (P < 1) throw ApiError(400, std::string(prompt_field) + ": expected at least 1 token, got 0", prompt_field);
    if (P >= L)
      throw ApiError(400,
                     std::string(prompt_field) + ": expected fewer than " + std::to_string(L) +
                         " tokens (the context, --ctx-size, less one new token), got " + std::to_string(P),
                     prompt_field, "context_length_exceeded");
    if (r.max_tokens && *r.max_tokens > L - P)
      throw ApiError(400,
                     r.max_tokens_field + ": expected at most " + std::to_string(L - P) + " (the context of " +
                         std::to_string(L) + " tokens less the prompt's " + std::to_string(P) + "), got " +
                         std::to_string(*r.max_tokens),
                     r.max_tokens_field, "context_length_exceeded");
    GenerationRequest g;
    g.prompt = std::move(prompt);
    g.max_tokens = r.max_tokens.value_or(L - P);
    g.temperature = r.temperature, g.top_k = r.top_k, g.top_p = r.top_p;
    // A seeded request draws from (seed, 0, k): the same seed gives the same tokens whenever it runs. Unseeded ones
    // draw from a fresh seed of their own.
    if (r.seed) g.seed = *r.seed, g.sequence = 0;
    else g.seed = mix64(seed_base + n * 0x9E3779B97F4A7C15ull), g.sequence = n;
    return g;
  }

  void completions(const httplib::Request& req, httplib::Response& res) {
    const CompletionRequest r = parse_completion_request(parse_json_body(req.body));
    check_model(r.model);
    std::vector<int32_t> prompt;
    if (r.prompt_is_ids) {
      for (size_t i = 0; i < r.prompt_ids.size(); ++i) {
        if (r.prompt_ids[i] >= int64_t(tok.vocab_size()))
          throw ApiError(400, "prompt[" + std::to_string(i) + "]: expected a token id below " +
                                  std::to_string(tok.vocab_size()) + " (the vocabulary), got " +
                                  std::to_string(r.prompt_ids[i]),
                         "prompt[" + std::to_string(i) + "]");
        prompt.push_back(int32_t(r.prompt_ids[i]));
      }
    } else {
      for (uint32_t id : tok.encode(r.prompt_text, text::AllowedSpecials::none())) prompt.push_back(int32_t(id));
    }
    const uint64_t n = requests++;
    GenerationRequest g = generation(r, std::move(prompt), "prompt", n);
    // ignore_eos: no stop tokens, for the engine and for the text (an [EOS] sampled midway is decoded as text)
    const std::vector<int32_t> stops = r.ignore_eos ? std::vector<int32_t>{} : plain_stops;
    g.stop_tokens = stops;
    if (!r.stop.empty()) {
      auto watch = std::make_shared<CompletionText>(tok, r.stop, stops);
      g.ends_after = [watch](int32_t t) {
        watch->push(t);
        return watch->stopped();
      };
    }
    auto s = std::make_shared<Session>();
    s->out = std::make_unique<CompletionOutput>(tok, r.stop, stops);
    start(std::move(s), std::move(g), r, "cmpl-", "text_completion", false, n, res);
  }

  void chat(const httplib::Request& req, httplib::Response& res) {
    const ChatCompletionRequest r = parse_chat_request(parse_json_body(req.body));
    check_model(r.model);
    ChatJob job = make_chat_job(tok, r);
    const uint64_t n = requests++;
    GenerationRequest g = generation(r, std::move(job.prompt), "messages", n);
    g.stop_tokens = std::move(job.stop_tokens);
    g.ends_after = std::move(job.ends_after);
    auto s = std::make_shared<Session>();
    s->out = std::move(job.output);
    start(std::move(s), std::move(g), r, "chatcmpl-", "chat.completion", true, n, res);
  }

  void start(std::shared_ptr<Session> s, GenerationRequest g, const SamplingRequest& r, const char* prefix,
             const char* object, bool chat, uint64_t n, httplib::Response& res) {
    s->prompt_tokens = int64_t(g.prompt.size());
    try {
      s->handle = engine.submit(std::move(g));
    } catch (const QueueFull& e) {
      throw ApiError(503, e.what(), "", "queue_full");
    }
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(mix64(seed_base ^ (n + 1))));
    s->id = std::string(prefix) + hex;
    s->object = object, s->model = opt.model_name, s->created = unix_seconds();
    s->stream = r.stream, s->include_usage = r.include_usage, s->continuous_usage = r.continuous_usage;
    s->chat = chat;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(r.stream ? "text/event-stream" : "application/json",
                                     [s](size_t, httplib::DataSink& sink) {
                                       const std::string w = s->advance();
                                       if (!sink.is_writable()) return false;  // the client is gone: cancel
                                       if (!w.empty() && !sink.write(w.data(), w.size())) return false;
                                       if (s->finish != Finish::none) sink.done();
                                       return true;
                                     });
  }

  void routes() {
    auto guarded = [](auto fn) {
      return [fn](const httplib::Request& req, httplib::Response& res) {
        try {
          fn(req, res);
        } catch (const ApiError& e) {
          send_error(res, e);
        } catch (const Error& e) {  // a tokenizer or engine refusal the checks above did not foresee
          send_error(res, ApiError(400, e.what(), "", "invalid_value"));
        }
      };
    };
    svr.Post("/v1/completions", guarded([this](const auto& q, auto& s) { completions(q, s); }));
    svr.Post("/v1/chat/completions", guarded([this](const auto& q, auto& s) { chat(q, s); }));
    svr.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      const json m = {{"id", opt.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "kimi.cpp"},
                      {"max_model_len", engine.options().ctx_size}};
      res.set_content(dump({{"object", "list"}, {"data", json::array({m})}}), "application/json");
    });
    svr.Get("/health", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("{\"status\":\"ok\"}", "application/json");
    });
    svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(engine.metrics().prometheus(), "text/plain; version=0.0.4");
    });
    // cpp-httplib's own refusals (no route, a body over the limit) and anything unforeseen, as OpenAI errors.
    svr.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      if (res.status == 413)
        send_error(res, ApiError(413, "request body: expected at most " + std::to_string(opt.max_body_bytes) +
                                          " bytes", "", "request_too_large"));
      else if (res.status == 404)
        send_error(res, ApiError(404, "no route " + req.method + " " + req.path +
                                          " (POST /v1/completions, /v1/chat/completions; GET /v1/models, /health, "
                                          "/metrics)", "", "not_found"));
      else
        send_error(res, ApiError(res.status, "HTTP " + std::to_string(res.status), "", ""));
    });
    svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "unknown error";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      send_error(res, ApiError(500, "internal error: " + what, "", "internal_error"));
    });
  }
};

HttpServer::HttpServer(Engine& engine, const text::Tokenizer& tok, HttpOptions opt)
    : impl_(std::make_unique<Impl>(engine, tok, std::move(opt))) {
  Impl& m = *impl_;
  const auto& mo = m.engine.options();
  const size_t threads = m.opt.threads > 0 ? size_t(m.opt.threads) : size_t(mo.slots + mo.max_queue + 8);
  m.svr.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  m.svr.set_payload_max_length(m.opt.max_body_bytes);
  m.svr.set_tcp_nodelay(true);
  // SO_REUSEADDR only (a restart binds while old connections sit in TIME_WAIT). cpp-httplib's default also sets
  // SO_REUSEPORT, with which a second server binds a port already served and the kernel splits the connections.
  m.svr.set_socket_options([](socket_t sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  m.routes();
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::bind() {
  Impl& m = *impl_;
  int port = m.opt.port;
  if (port == 0) {
    port = m.svr.bind_to_any_port(m.opt.host);
    if (port < 0) port = 0;
  } else if (!m.svr.bind_to_port(m.opt.host, port)) {
    port = 0;
  }
  if (port <= 0)
    throw Error("serve: --host/--port: cannot listen on " + m.opt.host + ":" + std::to_string(m.opt.port) +
                " (address in use, not an address of this machine, or a privileged port)");
  m.bound = true;
  return port;
}

void HttpServer::run() { impl_->svr.listen_after_bind(); }

void HttpServer::stop() {
  if (impl_) impl_->svr.stop();
}

}  // namespace kimi::serve
