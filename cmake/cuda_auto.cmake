# pip install . (scikit-build-core defines SKBUILD): build the CUDA backend when nvcc is found and the caller
# did not choose (pip install . -Ccmake.define.KIMI_CUDA=OFF forces it off, =ON requires it).
# Plain CMake builds are unaffected: KIMI_CUDA stays an explicit option there (the `cuda` preset).
if(SKBUILD AND NOT DEFINED CACHE{KIMI_CUDA} AND NOT DEFINED KIMI_CUDA)
  find_program(KIMI_NVCC nvcc HINTS "$ENV{CUDA_HOME}/bin" "$ENV{CUDA_PATH}/bin" /usr/local/cuda/bin)
  if(KIMI_NVCC)
    message(STATUS "kimi: nvcc found (${KIMI_NVCC}): building the CUDA backend")
    set(KIMI_CUDA ON CACHE BOOL "Build the CUDA backend (sm_90a)")
    if(NOT CMAKE_CUDA_COMPILER)
      set(CMAKE_CUDA_COMPILER "${KIMI_NVCC}" CACHE FILEPATH "CUDA compiler")
    endif()
  else()
    message(STATUS "kimi: no nvcc found: CPU backend only")
  endif()
endif()
