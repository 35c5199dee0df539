# run_install_test.cmake (cmake -P; tests/install/CMakeLists.txt passes the variables): the install test's steps.
# Each step that fails stops the test with its command's output.
#   1. cmake --install KIMI_BUILD_DIR --prefix WORK_DIR/prefix (the work dir is removed first)
#   2. the installed headers are exactly include/kimi/**.h of the source tree (no src/ header leaks out)
#   3. the README's C++ snippet (the ```cpp block of "## Using the operators") is written out as it stands
#   4. consumer/ is configured with the prefix first on CMAKE_PREFIX_PATH (then only where the build found its
#      own dependencies), built, and its programs run; it checks that kimi was found in the prefix
#   5. with KIMI_CLI: the installed bin/kimi writes a random k3-tiny checkpoint and inspects it
foreach(v KIMI_BUILD_DIR KIMI_SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "run_install_test.cmake: -D${v}=... is required")
  endif()
endforeach()

# Runs a command; on failure stops with its output. The output is left in STEP_OUTPUT.
function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install test: ${what} failed (exit ${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "install test: ${what}: ok")
  set(STEP_OUTPUT "${out}${err}" PARENT_SCOPE)
endfunction()

set(prefix "${WORK_DIR}/prefix")
file(REMOVE_RECURSE "${WORK_DIR}")
run_step("cmake --install" "${CMAKE_COMMAND}" --install "${KIMI_BUILD_DIR}" --prefix "${prefix}")

# 2. the public headers, and only those
file(GLOB_RECURSE installed RELATIVE "${prefix}/include" "${prefix}/include/*")
file(GLOB_RECURSE expected RELATIVE "${KIMI_SOURCE_DIR}/include" "${KIMI_SOURCE_DIR}/include/kimi/*.h")
list(SORT installed)
list(SORT expected)
if(NOT installed STREQUAL expected OR expected STREQUAL "")
  message(FATAL_ERROR "install test: installed headers differ from include/kimi/**.h\n"
                      "installed: ${installed}\nexpected: ${expected}")
endif()
foreach(f "lib/libkimi.a" "lib/cmake/kimi/kimiConfig.cmake" "lib/cmake/kimi/kimiConfigVersion.cmake")
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "install test: ${prefix}/${f} was not installed")
  endif()
endforeach()

# 3. the README's snippet, byte for byte
file(READ "${KIMI_SOURCE_DIR}/README.md" readme)
string(FIND "${readme}" "## Using the operators" at)
if(at EQUAL -1)
  message(FATAL_ERROR "install test: README.md has no '## Using the operators' section")
endif()
string(SUBSTRING "${readme}" ${at} -1 section)
if(NOT section MATCHES "```cpp\n(.*)\n```")
  message(FATAL_ERROR "install test: README.md's '## Using the operators' has no ```cpp block")
endif()
# the first closing fence ends the block (the regex above is greedy)
string(FIND "${CMAKE_MATCH_1}" "\n```" end)
string(SUBSTRING "${CMAKE_MATCH_1}" 0 ${end} snippet)
file(WRITE "${WORK_DIR}/readme_snippet.cpp" "${snippet}\n")

# 4. a project of its own that knows only the prefix (and where the build found its own dependencies). The search
# path goes through the environment (':'-separated): a ';' list would be split on its way through run_step.
string(REPLACE "|" ":" search "${prefix}|${DEP_PREFIXES}")
set(ENV{CMAKE_PREFIX_PATH} "${search}")
set(cuda_root "")
if(CUDA_ROOT)
  set(cuda_root "-DCUDAToolkit_ROOT=${CUDA_ROOT}")
endif()
run_step("configure the consumer"
         "${CMAKE_COMMAND}" -S "${CMAKE_CURRENT_LIST_DIR}/consumer" -B "${WORK_DIR}/build" -G "${GENERATOR}"
         "-DKIMI_EXPECTED_PREFIX=${prefix}" ${cuda_root}
         "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}"
         "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${LINKER_FLAGS}"
         "-DKIMI_README_SNIPPET=${WORK_DIR}/readme_snippet.cpp")
run_step("build the consumer" "${CMAKE_COMMAND}" --build "${WORK_DIR}/build")
run_step("run the consumer" "${WORK_DIR}/build/kimi_consumer")
message(STATUS "install test: the consumer printed:\n${STEP_OUTPUT}")
run_step("run the README snippet" "${WORK_DIR}/build/readme_snippet")
# the message the README quotes next to the snippet
set(readme_error "rms_norm: argument 'w': expected shape [2304], got [2048]")
string(FIND "${readme}" "`${readme_error}`" quoted)
if(NOT STEP_OUTPUT STREQUAL "${readme_error}\n" OR quoted EQUAL -1)
  message(FATAL_ERROR "install test: the README snippet printed '${STEP_OUTPUT}', expected '${readme_error}' "
                      "(quoted in README.md: ${quoted})")
endif()

# 5. the installed command line
if(KIMI_CLI)
  run_step("bin/kimi random-model" "${prefix}/bin/kimi" random-model k3-tiny --out "${WORK_DIR}/k3-tiny")
  run_step("bin/kimi inspect" "${prefix}/bin/kimi" inspect "${WORK_DIR}/k3-tiny")
endif()
