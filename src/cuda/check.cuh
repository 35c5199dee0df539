// src/cuda/check.cuh: CUDA error checking for launchers.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "kimi/error.h"

#define KIMI_CUDA_CHECK(expr)                                                                      \
  do {                                                                                             \
    const cudaError_t err_ = (expr);                                                               \
    if (err_ != cudaSuccess)                                                                       \
      throw ::kimi::Error(std::string("CUDA error: ") + cudaGetErrorString(err_) + " in " #expr " at " \
                          __FILE__ ":" + std::to_string(__LINE__));                                \
  } while (0)
