# What `cmake --install` puts where: binaries, libsbsh (shared and static), headers, a
# pkg-config file, a CMake package, manual pages, shell completions and systemd units.
include(GNUInstallDirs)

install(TARGETS sbsh sbshd sbsh-wrapper RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# Where sbsh-wrapper looks for it, relative to its own directory (SBSH_BUILTIN_RELPATH).
install(TARGETS sbsh-builtin LIBRARY DESTINATION ${SBSH_BUILTIN_DIR})
if(TARGET sbsh_shared AND TARGET sbsh_static)
  install(TARGETS sbsh_shared sbsh_static
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/client/include/sbsh DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
# client.h includes "ipc/result.h" and "ipc/records.h", found beside it once installed.
install(FILES ${PROJECT_SOURCE_DIR}/ipc/result.h ${PROJECT_SOURCE_DIR}/ipc/records.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/sbsh/ipc)

configure_file(${CMAKE_CURRENT_LIST_DIR}/sbsh.pc.in ${CMAKE_BINARY_DIR}/sbsh.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/sbsh.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
configure_file(${CMAKE_CURRENT_LIST_DIR}/sbshConfig.cmake.in ${CMAKE_BINARY_DIR}/sbshConfig.cmake @ONLY)
include(CMakePackageConfigHelpers)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/sbshConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/sbshConfig.cmake ${CMAKE_BINARY_DIR}/sbshConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/sbsh)

foreach(page sbsh.1 sbshd.8 sbsh-protocol.7)
  if(EXISTS ${PROJECT_SOURCE_DIR}/man/${page})
    string(REGEX MATCH "[0-9]$" section ${page})
    install(FILES ${PROJECT_SOURCE_DIR}/man/${page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section})
  endif()
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/dist/completions/sbsh.bash
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME sbsh)
install(FILES ${PROJECT_SOURCE_DIR}/dist/completions/_sbsh DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions)
# The systemd user units, with ExecStart= naming sbshd where it is installed: made at install
# time, so that `cmake --install --prefix` is honoured as it is for the files above.
foreach(unit sbshd.service sbshd.socket)
  install(CODE "
    set(SBSHD_PATH \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/sbshd\")
    configure_file(\"${PROJECT_SOURCE_DIR}/dist/${unit}.in\" \"${CMAKE_BINARY_DIR}/dist/${unit}\" @ONLY)
    file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/lib/systemd/user\" TYPE FILE FILES \"${CMAKE_BINARY_DIR}/dist/${unit}\")
  ")
endforeach()
