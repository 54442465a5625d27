# Run by `cmake --install` (cmake/Install.cmake): copies a layer's public
# headers under PREFIX/include/leaseproof/ with their path from the
# repository root, and rewrites every in-tree include of another leaseproof
# header ("base/time.hpp") to its installed path ("leaseproof/base/time.hpp").
# The package's include path is PREFIX/include alone, so an installed header
# can only ever reach another installed header, never one of the including
# project's own (a project with its own base/time.hpp first on its include
# path: tests/consumer/colliding).
#
# Expects LEASEPROOF_SOURCE_DIR, LEASEPROOF_HEADERS (paths from the source
# root) and LEASEPROOF_INCLUDE_DESTINATION (relative to the prefix).
set(prefix "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}")
foreach(header IN LISTS LEASEPROOF_HEADERS)
  file(READ "${LEASEPROOF_SOURCE_DIR}/${header}" text)
  string(REGEX REPLACE "(#[ \t]*include[ \t]*\")(base|core|runtime)/" "\\1leaseproof/\\2/" text "${text}")
  if(text MATCHES "#[ \t]*include[ \t]*[\"<](sim|models|properties|scenarios|reports|cli)/")
    message(FATAL_ERROR "${header}: an installed header includes a layer that is not installed (${CMAKE_MATCH_0})")
  endif()
  set(destination "${prefix}/${LEASEPROOF_INCLUDE_DESTINATION}/leaseproof/${header}")
  message(STATUS "Installing: ${destination}")
  file(WRITE "${destination}.tmp" "${text}")
  file(RENAME "${destination}.tmp" "${destination}")
endforeach()
