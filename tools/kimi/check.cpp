// Implementation of tools/kimi/check.h: the cases of src/verify/cases on every available backend, one table.
#include "kimi/check.h"

#include <fmt/core.h>

#include <string>

#include "kimi/device.h"
#include "kimi/error.h"
#include "verify/cases/case.h"

namespace kimi::cli {

namespace {
// A filter must name (part of) an operator: one that matches none would run no case and pass.
void check_filter(const std::string& filter) {
  if (filter.empty()) return;
  std::string known;
  for (const std::string& op : all_ops()) {
    if (op.find(filter) != std::string::npos) return;
    known += (known.empty() ? "" : ", ") + op;
  }
  throw Error("check: argument '--filter': expected a part of an operator name (one of " + known + "), got '" +
              filter + "'");
}
}  // namespace

int run_check(const CheckOptions& opt) {
  using namespace kimi::verify;
  check_filter(opt.filter);
  const CaseList cases = all_cases(opt.small ? Scale::test : Scale::check);
  fmt::print("{:<22} {:<8} {:<5} {:<42} {:>10} {:>9} {:>10}  {}\n", "operator", "backend", "dtype", "shape",
             "rel.err", "tol", "time(ms)", "status");
  int failed = 0, run = 0;
  for (Device dev : available_devices()) {
    for (const Case& c : cases) {
      if (!opt.filter.empty() && c.op.find(opt.filter) == std::string::npos) continue;
      if (!op_supported(c.op, dev)) continue;
      std::string status;
      Result r;
      try {
        r = c.run(dev);
        const bool ok = r.finite && r.guards_ok && r.err <= c.tol;
        status = ok ? "ok" : !r.finite ? "FAIL (NaN/Inf)" : !r.guards_ok ? "FAIL (guard bytes)" : "FAIL (error)";
      } catch (const Error& e) {
        status = std::string("FAIL (") + e.what() + ")";
      }
      if (status != "ok") ++failed;
      ++run;
      fmt::print("{:<22} {:<8} {:<5} {:<42} {:>10.2e} {:>9.1e} {:>10.3f}  {}\n", c.op, to_string(dev),
                 dtype_str(c.dtype), c.shape, r.err, c.tol, r.ms, status);
    }
  }
  fmt::print("\n{} cases, {} passed, {} failed\n", run, run - failed, failed);
  return failed;
}

}  // namespace kimi::cli
