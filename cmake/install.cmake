# install.cmake: what `cmake --install <build> --prefix P` puts under P, and the package config that lets another
# CMake project link kimi with find_package(kimi) + target_link_libraries(app PRIVATE kimi::kimi).
#
#   P/include/kimi/...                 the public headers (include/kimi; nothing from src/)
#   P/lib/libkimi.a                    the library (static; its dependencies are found by kimiConfig.cmake)
#   P/lib/cmake/kimi/                  kimiConfig.cmake, kimiConfigVersion.cmake, kimiTargets*.cmake,
#                                      kimi_openblas.cmake
#   P/bin/kimi                         the command line (when KIMI_CLI)
#
# tests/install checks all of it: it installs into a prefix under the build tree and builds and runs a program
# against that prefix alone.
include(CMakePackageConfigHelpers)
set(KIMI_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/kimi")

install(TARGETS kimi EXPORT kimiTargets ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}")
install(DIRECTORY include/kimi DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}" FILES_MATCHING PATTERN "*.h")
install(EXPORT kimiTargets NAMESPACE kimi:: DESTINATION "${KIMI_INSTALL_CMAKEDIR}")

if(KIMI_CUDA)
  set(KIMI_CUDA_BOOL TRUE)
else()
  set(KIMI_CUDA_BOOL FALSE)
endif()
configure_package_config_file(cmake/kimiConfig.cmake.in "${PROJECT_BINARY_DIR}/kimiConfig.cmake"
                              INSTALL_DESTINATION "${KIMI_INSTALL_CMAKEDIR}")
# 0.x: a minor version may change the API, so only the same major.minor is compatible.
write_basic_package_version_file("${PROJECT_BINARY_DIR}/kimiConfigVersion.cmake" VERSION "${PROJECT_VERSION}"
                                 COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/kimiConfig.cmake" "${PROJECT_BINARY_DIR}/kimiConfigVersion.cmake"
              cmake/kimi_openblas.cmake
        DESTINATION "${KIMI_INSTALL_CMAKEDIR}")

if(KIMI_CLI)
  install(TARGETS kimi_cli RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}")
endif()
