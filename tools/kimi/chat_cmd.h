// tools/kimi/chat_cmd.h: `kimi chat DIR`: an interactive terminal chat over a checkpoint (docs/chat.md).
//   kimi chat DIR [--system TEXT] [--max-tokens N] [--temperature T] [--top-p P] [--top-k K] [--seed S]
//                 [--ctx-size C] [--thinking | --no-thinking] [--device D] [--threads N] [--print-ids]
//                 [--ignore-eos]
// One user turn per line of stdin (a terminal or a pipe); /reset clears the history, /exit (or Ctrl-D, or Ctrl-C at
// the prompt) ends the program; Ctrl-C during a reply stops that reply only.
#pragma once

#include <cstdint>
#include <string>

namespace kimi::cli {

struct ChatOptions {
  std::string dir;
  std::string system;               // a system message opening every conversation ("": none)
  std::string device = "cpu";       // cpu, cuda or cuda:i
  int64_t max_tokens = 1024;        // new tokens per reply, in [1, --ctx-size - 1] (cut to what the context leaves)
  bool max_tokens_given = false;    // --max-tokens was typed: checked against --ctx-size (the default is only cut)
  float temperature = 0.f;          // 0 = greedy
  float top_p = 1.f;
  int top_k = 0;
  std::string seed = "0";           // parsed by parse_seed
  int64_t ctx_size = 4096;          // tokens of the conversation: rendered history + the reply
  bool thinking = true;             // K3: the generation prompt opens a thinking block
  bool thinking_given = false;      // --thinking / --no-thinking was typed (main.cpp sets it from CLI11's count)
  int threads = 0;                  // in [0, max_cpu_threads()]
  bool print_ids = false;           // each turn's prompt ids and generated ids on stderr (tests, debugging)
  bool ignore_eos = false;          // replies run to --max-tokens past the format's turn-end tokens (tests, timing)
};
// Runs the chat until /exit, end of input or Ctrl-C at the prompt; 0 then.
int run_chat(const ChatOptions& opt);

}  // namespace kimi::cli
