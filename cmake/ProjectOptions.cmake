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

# Every project target links this one; it carries warnings and sanitizers and
# the include root for public headers (<leaseproof/layer/x.hpp>).
add_library(leaseproof_project INTERFACE)
target_link_libraries(leaseproof_project INTERFACE leaseproof_warnings leaseproof_sanitizers)
target_include_directories(leaseproof_project INTERFACE ${PROJECT_SOURCE_DIR}/include)

# leaseproof_library(NAME SOURCES... DEPENDS ...) declares leaseproof_NAME with
# the alias leaseproof::NAME.
function(leaseproof_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPENDS" ${ARGN})
  add_library(leaseproof_${name} STATIC ${ARG_SOURCES})
  add_library(leaseproof::${name} ALIAS leaseproof_${name})
  target_link_libraries(leaseproof_${name} PUBLIC leaseproof_project ${ARG_DEPENDS})
endfunction()
