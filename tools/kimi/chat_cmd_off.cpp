// tools/kimi/chat_cmd_off.cpp: `kimi chat` in a build configured with -DKIMI_SERVE=OFF: the chat runs on the serve
// engine (src/serve), which that build leaves out; the command parses its flags as always and refuses to run.
#include "kimi/chat_cmd.h"
#include "kimi/error.h"

namespace kimi::cli {

int run_chat(const ChatOptions&) {
  throw Error("chat: this kimi was built without src/serve (configured with -DKIMI_SERVE=OFF), whose engine the chat "
              "runs on; configure with -DKIMI_SERVE=ON, which needs cpp-httplib (Debian: libcpp-httplib-dev) and "
              "pkg-config");
}

}  // namespace kimi::cli
