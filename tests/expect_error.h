// tests/expect_error.h: asserts that a statement throws kimi::Error whose message contains
// every given fragment (the operator, the argument, the expected and the actual value); error_message_of gives the
// whole message, for tests that compare it exactly.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "kimi/error.h"

#define EXPECT_KIMI_ERROR(stmt, ...)                                                   \
  do {                                                                                 \
    try {                                                                              \
      stmt;                                                                            \
      ADD_FAILURE() << "expected kimi::Error from: " #stmt;                            \
    } catch (const kimi::Error& e) {                                                   \
      const std::string msg = e.what();                                                \
      for (const char* frag : std::initializer_list<const char*>{__VA_ARGS__})         \
        EXPECT_NE(msg.find(frag), std::string::npos) << "message: " << msg << "\nmissing: " << frag; \
    }                                                                                  \
  } while (0)

namespace kimi::testutil {

// The message of the kimi::Error that f() throws ("" and a test failure when it throws none).
template <class F>
std::string error_message_of(F&& f) {
  try {
    f();
  } catch (const kimi::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no kimi::Error thrown";
  return "";
}

}  // namespace kimi::testutil
