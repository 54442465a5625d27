# The production core as a CMake package (DESIGN.md section 2): base and the
# core layers, with their public headers, so that a worker outside this
# repository can write find_package(leaseproof) and link leaseproof::lease
# alone; and the embeddable runtime, leaseproof::runtime (docs/embedding.md),
# which hosts the lease core on an io_context. Nothing of the simulator, the
# models or the servers (hub, relay) is installed.
#
#   cmake --install build/release --prefix /opt/leaseproof
#
# Headers land under include/leaseproof/ with their path from the repository
# root: #include <leaseproof/core/lease/manager.hpp>. The headers include each
# other by the in-tree path ("base/time.hpp"), so the package also puts
# include/leaseproof on the include path.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(LEASEPROOF_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/leaseproof)
install(TARGETS leaseproof_base leaseproof_dynamo leaseproof_lease leaseproof_resume leaseproof_runtime
  EXPORT leaseproofTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  FILE_SET HEADERS DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/leaseproof
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT leaseproofTargets NAMESPACE leaseproof:: DESTINATION ${LEASEPROOF_INSTALL_CMAKEDIR})

configure_package_config_file(cmake/leaseproofConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/leaseproofConfig.cmake
  INSTALL_DESTINATION ${LEASEPROOF_INSTALL_CMAKEDIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/leaseproofConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/leaseproofConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/leaseproofConfigVersion.cmake
        DESTINATION ${LEASEPROOF_INSTALL_CMAKEDIR})
