# Warnings and sanitizers as INTERFACE targets, linked by the project's own
# targets only (never by third-party code), so no flag leaks globally.

add_library(leaseproof_warnings INTERFACE)
add_library(leaseproof::warnings ALIAS leaseproof_warnings)
target_compile_options(leaseproof_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Woverloaded-virtual
  -Wimplicit-fallthrough -Wcast-align -Wformat=2 -Wmissing-declarations
  -Werror
  # GCC 12 reports -Wrestrict inside libstdc++'s std::string at -O3 for code
  # that is correct (GCC bug 105329); silence that one false positive.
  $<$<CXX_COMPILER_ID:GNU>:-Wno-restrict>
  # GCC 12 at -O3 reports std::optional members inside std::variant as "may be
  # used uninitialized" after inlining (GCC bugs 80635, 105562): another false
  # positive; real uninitialized reads are ASan/UBSan's and Debug's to find.
  $<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized>)

add_library(leaseproof_sanitizers INTERFACE)
add_library(leaseproof::sanitizers ALIAS leaseproof_sanitizers)
if(LEASEPROOF_SANITIZE)
  target_compile_options(leaseproof_sanitizers INTERFACE
    -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  target_link_options(leaseproof_sanitizers INTERFACE -fsanitize=address,undefined)
endif()
if(LEASEPROOF_SANITIZE_THREAD)
  # -Wno-tsan: GCC warns that ThreadSanitizer does not model the
  # atomic_thread_fence inside Boost.Asio's handler-memory recycling; a race
  # that fence would order shows up as a report, never as silence.
  target_compile_options(leaseproof_sanitizers INTERFACE -fsanitize=thread -fno-omit-frame-pointer -Wno-tsan)
  target_link_options(leaseproof_sanitizers INTERFACE -fsanitize=thread)
endif()

# Profile-guided optimization, in two builds of one directory (their object
# files must have the same paths for the profiles to be found):
# scripts/build-pgo.sh configures `generate`, runs a training set, then
# configures `use` and builds again. Off by default: the plain Release build
# is the reference, and a PGO build must give every trace hash it gives.
set(LEASEPROOF_PGO "OFF" CACHE STRING "Profile-guided optimization: OFF, generate or use (see scripts/build-pgo.sh)")
set_property(CACHE LEASEPROOF_PGO PROPERTY STRINGS OFF generate use)
set(LEASEPROOF_PGO_DIR "${CMAKE_BINARY_DIR}/pgo-profile" CACHE PATH "Where the training run writes its profiles")
add_library(leaseproof_pgo INTERFACE)
if(LEASEPROOF_PGO STREQUAL "generate")
  # Atomic counters: `run` checks on a second thread, and counters two
  # threads bump at once (the allocator's) would make the profile
  # inconsistent, which the `use` build rejects.
  target_compile_options(leaseproof_pgo INTERFACE -fprofile-generate=${LEASEPROOF_PGO_DIR} -fprofile-update=atomic)
  target_link_options(leaseproof_pgo INTERFACE -fprofile-generate=${LEASEPROOF_PGO_DIR} -fprofile-update=atomic)
elseif(LEASEPROOF_PGO STREQUAL "use")
  if(NOT IS_DIRECTORY "${LEASEPROOF_PGO_DIR}")
    message(FATAL_ERROR "LEASEPROOF_PGO=use: no profiles in ${LEASEPROOF_PGO_DIR} "
                        "(scripts/build-pgo.sh builds with LEASEPROOF_PGO=generate and trains first)")
  endif()
  # Code the training never ran keeps its normal optimization instead of
  # being treated as cold; files without a profile are expected (tests).
  target_compile_options(leaseproof_pgo INTERFACE -fprofile-use=${LEASEPROOF_PGO_DIR}
                         -fprofile-partial-training -Wno-missing-profile)
  target_link_options(leaseproof_pgo INTERFACE -fprofile-use=${LEASEPROOF_PGO_DIR})
elseif(NOT LEASEPROOF_PGO STREQUAL "OFF")
  message(FATAL_ERROR "LEASEPROOF_PGO is '${LEASEPROOF_PGO}': allowed are OFF, generate and use")
endif()

# Every project target links this one; it carries warnings, sanitizers and
# PGO, and the include root: headers are included by their path from the
# repository root ("core/lease/manager.hpp"). Only inside this build: an
# installed library carries none of it (cmake/Install.cmake).
add_library(leaseproof_project INTERFACE)
target_link_libraries(leaseproof_project INTERFACE leaseproof_warnings leaseproof_sanitizers leaseproof_pgo)
target_include_directories(leaseproof_project INTERFACE ${PROJECT_SOURCE_DIR})

# leaseproof_library(NAME SOURCES... [HEADERS...] DEPENDS ...) declares
# leaseproof_NAME with the alias leaseproof::NAME. HEADERS are the layer's
# public headers (paths relative to the calling folder), kept in the target's
# LEASEPROOF_HEADERS property as paths from the repository root; the layers
# cmake/Install.cmake exports install them under include/leaseproof/.
function(leaseproof_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;HEADERS;DEPENDS" ${ARGN})
  add_library(leaseproof_${name} STATIC ${ARG_SOURCES})
  add_library(leaseproof::${name} ALIAS leaseproof_${name})
  set_target_properties(leaseproof_${name} PROPERTIES EXPORT_NAME ${name})
  target_link_libraries(leaseproof_${name} PUBLIC $<BUILD_INTERFACE:leaseproof_project> ${ARG_DEPENDS})
  set(headers "")
  foreach(header IN LISTS ARG_HEADERS)
    file(RELATIVE_PATH from_root ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/${header})
    list(APPEND headers ${from_root})
  endforeach()
  set_target_properties(leaseproof_${name} PROPERTIES LEASEPROOF_HEADERS "${headers}")
endfunction()
