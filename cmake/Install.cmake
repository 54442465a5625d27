# The production core as a CMake package (DESIGN.md section 2), in two
# components:
#   core     base and the core layers (dynamo, lease, resume): needs fmt and
#            nlohmann-json, neither Boost nor OpenSSL.
#   runtime  the embeddable runtime, leaseproof::runtime (docs/embedding.md),
#            which hosts the lease core on an io_context: Boost.Asio/Beast/URL
#            and OpenSSL.
#   find_package(leaseproof COMPONENTS core)      # the core alone
#   find_package(leaseproof)                      # both
# Nothing of the simulator, the models or the servers (hub, relay) is installed.
#
#   cmake --install build/release --prefix /opt/leaseproof
#
# Headers land under include/leaseproof/ with their path from the repository
# root, and include each other by that path: #include
# <leaseproof/core/lease/manager.hpp> (cmake/InstallHeaders.cmake rewrites the
# in-tree "base/time.hpp" to "leaseproof/base/time.hpp"). The package's include
# path is PREFIX/include alone.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(LEASEPROOF_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/leaseproof)

# leaseproof_install_component(NAME TARGETS...): the targets' archives, their
# headers (rewritten) and an export file leaseproof<NAME>Targets.cmake.
function(leaseproof_install_component component)
  install(TARGETS ${ARGN}
    EXPORT leaseproof${component}Targets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT leaseproof${component}Targets NAMESPACE leaseproof:: DESTINATION ${LEASEPROOF_INSTALL_CMAKEDIR})
  set(headers "")
  foreach(target IN LISTS ARGN)
    get_target_property(target_headers ${target} LEASEPROOF_HEADERS)
    list(APPEND headers ${target_headers})
  endforeach()
  install(CODE "
    set(LEASEPROOF_SOURCE_DIR \"${PROJECT_SOURCE_DIR}\")
    set(LEASEPROOF_HEADERS \"${headers}\")
    set(LEASEPROOF_INCLUDE_DESTINATION \"${CMAKE_INSTALL_INCLUDEDIR}\")
    include(\"${PROJECT_SOURCE_DIR}/cmake/InstallHeaders.cmake\")")
endfunction()

leaseproof_install_component(Core leaseproof_base leaseproof_dynamo leaseproof_lease leaseproof_resume)
leaseproof_install_component(Runtime leaseproof_runtime)

configure_package_config_file(cmake/leaseproofConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/leaseproofConfig.cmake
  INSTALL_DESTINATION ${LEASEPROOF_INSTALL_CMAKEDIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/leaseproofConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/leaseproofConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/leaseproofConfigVersion.cmake
        DESTINATION ${LEASEPROOF_INSTALL_CMAKEDIR})
