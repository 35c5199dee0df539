// The `kimi` command line.
//   kimi check [--filter OP] [--small]   every operator vs the fp64 oracle, one table
#include <CLI/CLI.hpp>

#include "kimi/check.h"

int main(int argc, char** argv) {
  CLI::App app{"kimi.cpp: Kimi K3 / Kimi-Linear operators and runtime"};
  app.require_subcommand(1);

  kimi::cli::CheckOptions check_opt;
  auto* check = app.add_subcommand("check", "Run every operator on every backend against the fp64 oracle");
  check->add_option("--filter", check_opt.filter, "Only operators whose name contains this");
  check->add_flag("--small", check_opt.small, "Use the small test sizes instead of model shapes");

  CLI11_PARSE(app, argc, argv);
  if (check->parsed()) return kimi::cli::run_check(check_opt) == 0 ? 0 : 1;
  return 0;
}
