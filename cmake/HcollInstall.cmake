# Installs the header, the library, the CMake package (find_package(hcoll) -> hcoll::hcoll) and
# a pkg-config file.
include(CMakePackageConfigHelpers)

install(TARGETS hcoll EXPORT hcollTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES include/hcoll/hcoll.h ${CMAKE_CURRENT_BINARY_DIR}/include/hcoll/config.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/hcoll)
install(EXPORT hcollTargets NAMESPACE hcoll:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/hcoll)

configure_package_config_file(cmake/hcollConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/hcollConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/hcoll)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/hcollConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/hcollConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/hcollConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/hcoll)

configure_file(cmake/hcoll.pc.in ${CMAKE_CURRENT_BINARY_DIR}/hcoll.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/hcoll.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
