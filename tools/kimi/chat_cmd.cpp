// `kimi chat`: checks every flag, loads the tokenizer (its chat format, text/chat.h) and the model, and runs one
// serve::Engine of one cache slot (serve/engine.h). Each turn:
//   1. the line read from stdin becomes a user message; the whole conversation (system message, every earlier turn,
//      this one) is rendered and encoded again (render_chat + encode_chat) and prefilled from an empty slot: simple
//      and always the template's exact prompt, at the cost of a prefill of the whole history per turn;
//   2. the request's tokens stream through a ChatOutputParser: content printed as it comes, reasoning dimmed on a
//      terminal (ANSI faint) or opened by "[thinking] " and closed by a newline on a pipe, tool calls printed whole
//      at the end of the reply as one JSON object per line ({"tool_call": {"id", "name", "arguments"}});
//   3. the reply (content, reasoning, tool calls) joins the history, a stopped one with what it had so far.
// Signals: SIGINT sets a flag (the handler does nothing else). The engine's step thread, and the OpenMP workers it
// starts, block SIGINT, so the main thread takes it: while a reply is generated the main thread polls the flag
// between waits on the request and cancels the request (the reply stops, the program goes on); at the prompt the
// signal interrupts the read (the handler is installed without SA_RESTART) and the program ends.
#include "kimi/chat_cmd.h"

#include <fmt/core.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kimi/error.h"
#include "kimi/model/generate.h"
#include "kimi/model/model.h"
#include "kimi/model_cmds.h"
#include "serve/engine.h"
#include "text/chat.h"
#include "text/terminal_filter.h"
#include "text/tokenizer.h"

namespace kimi::cli {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void on_sigint(int) { g_interrupted = 1; }

// One line of stdin without its line end; nullopt at the end of input, on a read error or when SIGINT interrupted
// the read.
std::optional<std::string> read_line() {
  char* buf = nullptr;
  size_t cap = 0;
  errno = 0;
  const ssize_t n = ::getline(&buf, &cap, stdin);
  std::optional<std::string> line;
  if (n >= 0) {
    line.emplace(buf, size_t(n));
    while (!line->empty() && (line->back() == '\n' || line->back() == '\r')) line->pop_back();
  }
  std::free(buf);
  return line;
}

std::string join_ids(const std::vector<int32_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? " " : "") + std::to_string(v[i]);
  return s;
}

struct Checked {
  Device device;
  uint64_t seed = 0;
  text::ChatFormat format;
  bool thinking = false;  // the generation prompt opens a thinking block (K3 with thinking on)
};

Checked check_flags(const ChatOptions& opt, const model::Config& c, const text::Tokenizer& tok) {
  auto fail = [](const std::string& flag, const std::string& expected, const std::string& got) {
    throw Error("chat: " + flag + ": expected " + expected + ", got " + got);
  };
  Checked k;
  k.device = parse_device(opt.device, "chat: --device");
  if (!(opt.temperature >= 0.f) || !std::isfinite(opt.temperature))
    fail("--temperature", "a finite value >= 0 (0 = greedy)", fmt::format("{}", opt.temperature));
  if (opt.top_k < 0) fail("--top-k", ">= 0 (0 = all tokens)", std::to_string(opt.top_k));
  if (!(opt.top_p > 0.f && opt.top_p <= 1.f)) fail("--top-p", "a value in (0, 1]", fmt::format("{}", opt.top_p));
  k.seed = parse_seed(opt.seed, "chat: --seed");
  if (opt.threads < 0 || opt.threads > max_cpu_threads())
    fail("--threads", "a value in [0, " + std::to_string(max_cpu_threads()) + "] (0 = OpenMP's default)",
         std::to_string(opt.threads));
  const int64_t limit = model::context_limit(c);
  if (opt.ctx_size < 2 || opt.ctx_size > limit)
    fail("--ctx-size", "a value in [2, " + std::to_string(limit) + "] (the model's context limit)",
         std::to_string(opt.ctx_size));
  if (opt.max_tokens < 1 || (opt.max_tokens_given && opt.max_tokens >= opt.ctx_size))
    fail("--max-tokens", "a value in [1, " + std::to_string(opt.ctx_size - 1) + "] (--ctx-size " +
                             std::to_string(opt.ctx_size) + " less one prompt token)",
         std::to_string(opt.max_tokens));
  if (int64_t(tok.vocab_size()) > c.vocab_size)
    throw Error("chat: " + opt.dir + ": expected a tokenizer of at most " + std::to_string(c.vocab_size) +
                " ids (config.json's vocab_size), got " + std::to_string(tok.vocab_size()));
  try {
    k.format = text::detect_chat_format(tok);
  } catch (const Error& e) {
    throw Error("chat: " + opt.dir + ": the tokenizer has no chat format: " + e.what());
  }
  if (k.format == text::ChatFormat::kimi_k2 && opt.thinking_given)
    throw Error(std::string("chat: ") + (opt.thinking ? "--thinking" : "--no-thinking") +
                ": expected a checkpoint of the kimi_k3 chat format (its generation prompt opens a thinking block "
                "or not), got one of the kimi_k2 format, whose prompt has no such switch");
  k.thinking = k.format == text::ChatFormat::kimi_k3 && opt.thinking;
  return k;
}

// Prints a reply's deltas: content as it comes, reasoning faint (a terminal) or after "[thinking] " (a pipe).
class ReplyPrinter {
 public:
  explicit ReplyPrinter(bool tty) : tty_(tty) {}
  void print(const text::ChatDelta& d) {
    if (!d.reasoning.empty()) {
      if (!in_reasoning_) std::fputs(tty_ ? "\x1b[2m" : "[thinking] ", stdout);
      in_reasoning_ = true;
      write(d.reasoning);
    }
    if (!d.content.empty()) {
      close_reasoning();
      write(d.content);
    }
    std::fflush(stdout);
  }
  void end(const text::ChatMessage& m) {
    write_raw(filter_.finish());
    close_reasoning();
    std::fputc('\n', stdout);
    for (const text::ToolCall& c : m.tool_calls) {
      nlohmann::json args = nlohmann::json::parse(c.arguments, nullptr, false);
      if (args.is_discarded()) args = c.arguments;  // not JSON (a model's slip): shown as the string it is
      const nlohmann::json j = {{"tool_call", {{"id", c.id}, {"name", c.name}, {"arguments", args}}}};
      write(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
      write_raw(filter_.finish());
    }
    std::fflush(stdout);
  }

 private:
  // Model text: on a terminal through the filter (control characters shown, never sent: text/terminal_filter.h);
  // on a pipe as it is.
  void write(const std::string& t) { write_raw(tty_ ? filter_.feed(t) : t); }
  void write_raw(const std::string& t) { std::fwrite(t.data(), 1, t.size(), stdout); }
  text::TerminalFilter filter_;
  void close_reasoning() {
    if (in_reasoning_) std::fputs(tty_ ? "\x1b[0m\n" : "\n", stdout);
    in_reasoning_ = false;
  }
  bool tty_;
  bool in_reasoning_ = false;
};

const char* finish_name(serve::Finish f) {
  switch (f) {
    case serve::Finish::stop: return "stop";
    case serve::Finish::length: return "length";
    case serve::Finish::cancelled: return "stopped";
    case serve::Finish::error: return "error";
    case serve::Finish::none: break;
  }
  return "none";
}

}  // namespace

int run_chat(const ChatOptions& opt) {
  model::Config c;
  try {
    c = model::load_model_config(opt.dir);
  } catch (const Error& e) {  // "model directory DIR: no such directory", ...
    throw Error(std::string("chat: ") + e.what());
  }
  std::optional<text::Tokenizer> tok;
  try {
    tok.emplace(text::Tokenizer::load(opt.dir));
  } catch (const Error& e) {  // "tokenizer: DIR/tiktoken.model: cannot open: no such file", ...
    throw Error(std::string("chat: ") + e.what() +
                " (a chat needs the checkpoint's tiktoken.model and tokenizer_config.json)");
  }
  const Checked k = check_flags(opt, c, *tok);
  std::vector<int32_t> stops;
  if (!opt.ignore_eos)
    for (uint32_t id : text::stop_token_ids(k.format, *tok)) stops.push_back(int32_t(id));

  // SIGINT blocked while the engine's threads start (they inherit the mask), then taken by this thread alone.
  sigset_t sigint;
  sigemptyset(&sigint);
  sigaddset(&sigint, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigint, nullptr);
  const model::Model m(opt.dir, k.device);
  serve::EngineOptions eo;
  eo.slots = 1, eo.ctx_size = opt.ctx_size, eo.max_batch_tokens = std::min<int64_t>(opt.ctx_size, 512);
  eo.max_queue = 1;  // a reply's slot may still be held for a step after its last token came
  eo.ctx.cpu_threads = opt.threads;
  serve::Engine engine(m, eo);
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: Ctrl-C at the prompt interrupts the read
  sigaction(SIGINT, &sa, nullptr);
  pthread_sigmask(SIG_UNBLOCK, &sigint, nullptr);  // a Ctrl-C typed while the model loaded arrives here
  if (g_interrupted) return 0;

  const bool tty_in = ::isatty(0) != 0, tty_out = ::isatty(1) != 0;
  std::fprintf(stderr, "kimi chat: %s (%s format, %s), context %lld tokens; /reset clears the history, /exit ends%s\n",
               opt.dir.c_str(), std::string(text::to_string(k.format)).c_str(), to_string(k.device).c_str(),
               static_cast<long long>(opt.ctx_size), tty_in ? "; Ctrl-C stops a reply" : "");
  std::vector<text::ChatMessage> history;
  int64_t turn = 0;
  for (;;) {
    if (tty_in) {
      std::fputs(tty_out ? "\x1b[1m> \x1b[0m" : "> ", stdout);
      std::fflush(stdout);
    }
    g_interrupted = 0;
    const std::optional<std::string> line = read_line();
    if (!line || g_interrupted) break;  // Ctrl-D, end of the pipe, Ctrl-C
    if (*line == "/exit" || *line == "/quit") break;
    if (*line == "/reset") {
      history.clear();
      std::fputs("kimi chat: history cleared\n", stderr);
      continue;
    }
    if (line->empty()) continue;

    text::ChatRequest req;
    if (!opt.system.empty()) req.messages.push_back({"system", opt.system, {}, {}, {}, {}});
    req.messages.insert(req.messages.end(), history.begin(), history.end());
    req.messages.push_back({"user", *line, {}, {}, {}, {}});
    req.thinking = k.thinking;
    std::vector<int32_t> prompt;
    try {
      for (uint32_t id : text::encode_chat(*tok, text::render_chat(k.format, req))) prompt.push_back(int32_t(id));
    } catch (const Error& e) {  // invalid UTF-8 in the line, with its byte offset
      std::fprintf(stderr, "kimi chat: %s (the line is dropped)\n", e.what());
      continue;
    }
    const int64_t P = int64_t(prompt.size());
    if (P >= opt.ctx_size) {
      std::fprintf(stderr,
                   "kimi chat: the conversation is %lld tokens, expected fewer than --ctx-size %lld: /reset clears "
                   "the history, or start again with a larger --ctx-size (the line is dropped)\n",
                   static_cast<long long>(P), static_cast<long long>(opt.ctx_size));
      continue;
    }
    if (opt.print_ids) std::fprintf(stderr, "kimi chat: turn %lld prompt ids %s\n", static_cast<long long>(turn),
                                    join_ids(prompt).c_str());
    serve::GenerationRequest g;
    g.prompt = prompt;
    g.max_tokens = std::min(opt.max_tokens, opt.ctx_size - P);  // the default 1024 may exceed a small --ctx-size
    g.stop_tokens = stops;
    g.temperature = opt.temperature, g.top_k = opt.top_k, g.top_p = opt.top_p;
    g.seed = k.seed, g.sequence = uint64_t(turn);
    std::shared_ptr<serve::RequestHandle> h = engine.submit(std::move(g));

    text::ChatOutputParser parser(k.format, *tok, k.thinking);
    ReplyPrinter out(tty_out);
    std::vector<int32_t> generated;
    serve::Finish finish = serve::Finish::none;
    std::string error;
    while (finish == serve::Finish::none) {
      if (g_interrupted && !h->cancelled()) h->cancel();
      serve::RequestHandle::Update u = h->wait(std::chrono::milliseconds(50));
      for (int32_t t : u.tokens) {
        generated.push_back(t);
        out.print(parser.push(uint32_t(t)));
      }
      finish = u.finish, error = u.error;
    }
    out.print(parser.finish());
    out.end(parser.message());
    if (opt.print_ids)
      std::fprintf(stderr, "kimi chat: turn %lld generated ids %s (%s)\n", static_cast<long long>(turn),
                   join_ids(generated).c_str(), finish_name(finish));
    if (finish == serve::Finish::cancelled) std::fputs("kimi chat: reply stopped (Ctrl-C)\n", stderr);
    if (finish == serve::Finish::error) throw Error("chat: generation failed: " + error);
    history.push_back({"user", *line, {}, {}, {}, {}});
    text::ChatMessage reply = parser.message();
    reply.role = "assistant";
    history.push_back(std::move(reply));
    ++turn;
  }
  if (tty_in) std::fputc('\n', stdout);
  engine.stop();
  return 0;
}

}  // namespace kimi::cli
