// tests/serve_testutil.h: helpers shared by the serve engine tests (test_serve_engine.cpp,
// test_serve_prefix_cache.cpp): a step's packing as text, greedy requests, and a request's tokens collected until it
// finishes.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "serve/engine.h"
#include "serve/scheduler.h"

namespace kimi::serve::testutil {

// A step's pieces in order, space-separated: "<seq>d" for a decode, "<seq>:<begin>+<count>" for a prefill piece,
// with "*" where the piece samples a token.
inline std::string show_pieces(const StepPacking& p) {
  std::string s;
  for (const Piece& q : p.pieces)
    s += (s.empty() ? "" : " ") + std::to_string(q.seq) + (q.decode ? "d" : ":" + std::to_string(q.begin) + "+" +
                                                                               std::to_string(q.count)) +
         (q.sample ? "*" : "");
  return s;
}

// show_pieces, then " | <tokens> tokens, <sampled> sampled".
inline std::string show(const StepPacking& p) {
  return show_pieces(p) + " | " + std::to_string(p.tokens) + " tokens, " + std::to_string(p.sampled) + " sampled";
}

// A greedy request (the default sampling) of `max_tokens` new tokens after `prompt`.
inline GenerationRequest greedy(std::vector<int32_t> prompt, int64_t max_tokens) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  return r;
}

// The tokens of a request until it finishes (its finish reason in *finish when given); a test failure if it has not
// finished within 120 s.
inline std::vector<int32_t> collect(RequestHandle& h, Finish* finish = nullptr) {
  using namespace std::chrono_literals;
  std::vector<int32_t> out;
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (std::chrono::steady_clock::now() < deadline) {
    RequestHandle::Update u = h.wait(100ms);
    out.insert(out.end(), u.tokens.begin(), u.tokens.end());
    if (u.finish != Finish::none) {
      if (finish) *finish = u.finish;
      return out;
    }
  }
  ADD_FAILURE() << "request did not finish";
  return out;
}

}  // namespace kimi::serve::testutil
