# The Debian package: the `leaseproof` command and the installed core and
# runtime (cmake/Install.cmake), built from a configured tree with
#
#   cpack -G DEB --config build/release/CPackConfig.cmake -B OUTDIR
#
# Its Depends come from the binary's shared libraries (dpkg-shlibdeps: Boost,
# fmt, hiredis, OpenSSL, libstdc++). A project that builds against the
# installed core also needs the headers' dependencies, suggested below.
# deploy/Dockerfile installs this package; tests/package/deb_test.sh builds,
# extracts and runs it.
include(GNUInstallDirs)
install(TARGETS leaseproof leaseproof-runtime RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

set(CPACK_PACKAGE_NAME leaseproof)
set(CPACK_PACKAGE_VENDOR "leaseproof")
set(CPACK_PACKAGE_CONTACT "leaseproof maintainers <leaseproof@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "DynamoDB-leased WebSocket workers, and a deterministic simulator that checks them")
set(CPACK_PACKAGE_DESCRIPTION
    "The leaseproof command (workers holding connections through DynamoDB conditional-write leases, \
the upstream hub, the simulator and its checkers), and the production core and the embeddable \
runtime as static libraries with headers and a CMake package (find_package(leaseproof)).")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # leaseproof_VERSION_ARCH.deb
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# What a project building against the installed package needs: the core
# component fmt and nlohmann-json; the runtime component Boost 1.81 (Asio and
# Beast are headers of libboost1.81-dev; system and url have libraries) and
# OpenSSL. Boost by its 1.81 names: Debian 12's libboost-dev is 1.74, whose
# libboost1.74-dev conflicts with libboost1.81-dev (tests/package/deb_test.sh
# simulates installing the package with these).
set(CPACK_DEBIAN_PACKAGE_SUGGESTS
    "libfmt-dev, nlohmann-json3-dev, libboost1.81-dev, libboost-system1.81-dev, libboost-url1.81-dev, libssl-dev, cmake, g++")
set(CPACK_STRIP_FILES ON)
include(CPack)
