// tools/kimi/tokenize_cmd.h: `kimi tokenize DIR`: a checkpoint's tokenizer (tiktoken.model + tokenizer_config.json)
// on text or ids, so that users can check it (docs/text/tokenizer.md).
//   kimi tokenize DIR --text "..." [--specials none|all|NAME,...] [--json]   ids, comma-separated (as --prompt takes)
//   kimi tokenize DIR --text-file F ...                                      the same for a file's bytes
//   kimi tokenize DIR --ids 1,2,3 [--json]                                   the text of the ids
#pragma once

#include <string>

namespace kimi::cli {

struct TokenizeOptions {
  std::string dir;
  std::string text;
  std::string text_file;
  std::string ids;
  std::string specials = "none";  // none, all, or comma-separated special token names the text may contain
  bool json = false;
  // Which of --text / --text-file / --ids were given (main.cpp sets these from CLI11's counts).
  bool text_given = false, text_file_given = false, ids_given = false;
};
int run_tokenize(const TokenizeOptions& opt);

}  // namespace kimi::cli
