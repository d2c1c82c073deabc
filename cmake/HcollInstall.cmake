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

# The .pc file locates the prefix relative to itself (${pcfiledir}), so it stays right when the
# prefix is chosen at install time (cmake --install --prefix) or the tree is moved.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(HCOLL_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _hcoll_up "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
  string(REGEX REPLACE "/$" "" _hcoll_up "${_hcoll_up}")
  set(HCOLL_PC_PREFIX "\${pcfiledir}/${_hcoll_up}")
endif()
configure_file(cmake/hcoll.pc.in ${CMAKE_CURRENT_BINARY_DIR}/hcoll.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/hcoll.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
