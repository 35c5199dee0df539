// tests/expect_error.h: asserts that a statement throws kimi::Error whose message contains
// every given fragment (the operator, the argument, the expected and the actual value).
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
