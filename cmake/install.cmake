# What `cmake --install` puts where: binaries, libsbsh (shared and static), headers, a
# pkg-config file, a CMake package, manual pages, shell completions and systemd units.
#
# Every path follows GNUInstallDirs, so that a multiarch libdir (lib/x86_64-linux-gnu) and a
# /usr prefix staged through DESTDIR come out right; the files that name a path (sbsh.pc,
# the units) are written at install time, so that `cmake --install --prefix DIR` is honoured
# as it is for everything else. tests/install/install_test.sh checks all of it.
include(CMakePackageConfigHelpers)

install(TARGETS sbsh sbshd sbsh-wrapper RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# Where sbsh-wrapper looks for it, relative to its own directory (SBSH_BUILTIN_RELPATH).
install(TARGETS sbsh-builtin LIBRARY DESTINATION ${SBSH_BUILTIN_DIR})
install(TARGETS sbsh_shared sbsh_static EXPORT sbshTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/client/include/sbsh DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
# client.h includes "ipc/result.h" and "ipc/records.h", found beside it once installed.
install(FILES ${PROJECT_SOURCE_DIR}/ipc/result.h ${PROJECT_SOURCE_DIR}/ipc/records.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/sbsh/ipc)

# The CMake package: sbsh::sbsh (libsbsh.so) and sbsh::sbsh_static (libsbsh.a), with paths
# relative to the file that defines them.
set(sbsh_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/sbsh)
install(EXPORT sbshTargets NAMESPACE sbsh:: DESTINATION ${sbsh_cmake_dir})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/sbshConfig.cmake.in ${CMAKE_BINARY_DIR}/sbshConfig.cmake
                              INSTALL_DESTINATION ${sbsh_cmake_dir} PATH_VARS CMAKE_INSTALL_INCLUDEDIR)
# Before 1.0 a minor version may change the API (semantic versioning); from 1.0 on, a major one.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(sbsh_compatibility SameMinorVersion)
else()
  set(sbsh_compatibility SameMajorVersion)
endif()
write_basic_package_version_file(${CMAKE_BINARY_DIR}/sbshConfigVersion.cmake COMPATIBILITY ${sbsh_compatibility})
install(FILES ${CMAKE_BINARY_DIR}/sbshConfig.cmake ${CMAKE_BINARY_DIR}/sbshConfigVersion.cmake
        DESTINATION ${sbsh_cmake_dir})

foreach(page sbsh.1 sbshd.8 sbsh-protocol.7)
  string(REGEX MATCH "[0-9]$" section ${page})
  install(FILES ${PROJECT_SOURCE_DIR}/man/${page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section})
endforeach()
# The completions the build wrote with sbsh completion (cli/CMakeLists.txt).
install(FILES ${SBSH_COMPLETIONS_DIR}/sbsh.bash DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
        RENAME sbsh)
install(FILES ${SBSH_COMPLETIONS_DIR}/_sbsh DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions)

# Files made at install time from a template in cmake/ or dist/, with @VARIABLE@ replaced:
# the prefix is known only then (--prefix). For each of BINDIR, LIBDIR and INCLUDEDIR the
# template may use SBSH_FULL_<DIR> (an absolute path) or SBSH_PC_<DIR> (the same below
# ${prefix}, as pkg-config files spell it). DESTDIR is added by file(INSTALL) alone, so the
# files name the paths of the installed system.
function(sbsh_install_configured template dest_dir)
  get_filename_component(name ${template} NAME)
  string(REGEX REPLACE "\\.in$" "" name ${name})
  set(code "set(prefix \"\${CMAKE_INSTALL_PREFIX}\")\n")
  foreach(dir BINDIR LIBDIR INCLUDEDIR)
    if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
      string(APPEND code "set(SBSH_FULL_${dir} \"${CMAKE_INSTALL_${dir}}\")\n"
                         "set(SBSH_PC_${dir} \"${CMAKE_INSTALL_${dir}}\")\n")
    else()
      string(APPEND code "set(SBSH_FULL_${dir} \"\${prefix}/${CMAKE_INSTALL_${dir}}\")\n"
                         "set(SBSH_PC_${dir} \"\\\${prefix}/${CMAKE_INSTALL_${dir}}\")\n")
    endif()
  endforeach()
  install(CODE "${code}
    set(PROJECT_VERSION \"${PROJECT_VERSION}\")
    configure_file(\"${template}\" \"${CMAKE_BINARY_DIR}/installed/${name}\" @ONLY)
    file(INSTALL DESTINATION \"\${prefix}/${dest_dir}\" TYPE FILE FILES \"${CMAKE_BINARY_DIR}/installed/${name}\")
  ")
endfunction()

sbsh_install_configured(${CMAKE_CURRENT_LIST_DIR}/sbsh.pc.in ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
# systemd looks for units below the prefix too (/usr/local/lib/systemd/...); not in the
# multiarch libdir.
foreach(unit sbshd.service sbshd.socket)
  sbsh_install_configured(${PROJECT_SOURCE_DIR}/dist/${unit}.in lib/systemd/user)
endforeach()
foreach(unit sbshd@.service sbshd@.socket)
  sbsh_install_configured(${PROJECT_SOURCE_DIR}/dist/${unit}.in lib/systemd/system)
endforeach()

# The Python package as the build staged it (python/sbsh with the generated
# _records.py: python/CMakeLists.txt), where Debian's python3 finds it under /usr
# (SBSH_PYTHON_DIR, relative to the prefix; add it to PYTHONPATH for another prefix). Its
# _install.py names the libdir, so that it finds libsbsh there without SBSH_LIB.
set(SBSH_PYTHON_DIR lib/python3/dist-packages CACHE STRING "Where cmake --install puts the Python package sbsh")
install(DIRECTORY ${CMAKE_BINARY_DIR}/python/sbsh DESTINATION ${SBSH_PYTHON_DIR}
        FILES_MATCHING PATTERN "*.py" PATTERN "py.typed" PATTERN "_install.py" EXCLUDE PATTERN "__pycache__" EXCLUDE)
sbsh_install_configured(${CMAKE_CURRENT_LIST_DIR}/_install.py.in ${SBSH_PYTHON_DIR}/sbsh)
