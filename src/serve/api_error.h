// serve/api_error.h: an OpenAI-style API error: what a refused request gets back.
//
// Body: {"error": {"message": ..., "type": ..., "param": FIELD or null, "code": CODE or null}} with HTTP `status`.
// 4xx errors have type "invalid_request_error" (the request is at fault, param names the field as the client wrote
// it, e.g. "messages[1].role"); 5xx ones "server_error". ApiError is thrown by the request parsers and caught by
// the HTTP layer; nothing else in the server throws it.
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace kimi::serve {

struct ApiError : std::runtime_error {
  ApiError(int status, std::string message, std::string param = {}, std::string code = "invalid_value")
      : std::runtime_error(message), status(status), param(std::move(param)), code(std::move(code)) {}
  int status;         // HTTP status
  std::string param;  // the field at fault ("" = none: the body as a whole)
  std::string code;   // a short machine-readable reason ("" = null)

  std::string type() const { return status >= 500 ? "server_error" : "invalid_request_error"; }
  nlohmann::json to_json() const {
    nlohmann::json e = {{"message", what()}, {"type", type()}, {"param", nullptr}, {"code", nullptr}};
    if (!param.empty()) e["param"] = param;
    if (!code.empty()) e["code"] = code;
    return {{"error", e}};
  }
};

}  // namespace kimi::serve
