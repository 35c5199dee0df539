// tools/kimi/serve_cmd_off.cpp: `kimi serve` in a build configured with -DKIMI_SERVE=OFF (no cpp-httplib): the
// command parses its flags as always and refuses to run, saying how to get it.
#include "kimi/error.h"
#include "kimi/serve_cmd.h"

namespace kimi::cli {

int run_serve(const ServeOptions&) {
  throw Error("serve: this kimi was built without the server (configured with -DKIMI_SERVE=OFF); configure with "
              "-DKIMI_SERVE=ON, which needs cpp-httplib (Debian: libcpp-httplib-dev) and pkg-config");
}

}  // namespace kimi::cli
