# kimi_openblas.cmake: the imported target kimi::openblas (libopenblas and the directory of its cblas.h).
#
# Used twice: by the build (the library links it privately) and by the installed kimiConfig.cmake (a static
# libkimi.a needs it on the consumer's link line). Sets kimi_openblas_FOUND; fails neither way, so each caller
# reports a missing OpenBLAS its own way (FATAL_ERROR in the build, kimi_FOUND FALSE in the package config).
# Debian's libopenblas-dev puts the pthread build in an openblas-pthread/ subfolder, hence the suffixes.
if(TARGET kimi::openblas)
  set(kimi_openblas_FOUND TRUE)
  return()
endif()
find_library(KIMI_OPENBLAS_LIBRARY NAMES openblas
             PATH_SUFFIXES openblas-pthread x86_64-linux-gnu/openblas-pthread)
find_path(KIMI_CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas x86_64-linux-gnu/openblas-pthread openblas-pthread)
if(KIMI_OPENBLAS_LIBRARY AND KIMI_CBLAS_INCLUDE_DIR)
  add_library(kimi::openblas UNKNOWN IMPORTED)
  set_target_properties(kimi::openblas PROPERTIES IMPORTED_LOCATION "${KIMI_OPENBLAS_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${KIMI_CBLAS_INCLUDE_DIR}")
  set(kimi_openblas_FOUND TRUE)
else()
  set(kimi_openblas_FOUND FALSE)
endif()
