// tests/dist/mpi_world.h: the MPI transport of a test process run under mpirun (tests/dist/mpi_main.cpp).
#pragma once

#include <cstdio>

#include "dist/comm.h"

namespace kimi::testutil {
dist::Comm& world();
}  // namespace kimi::testutil
