# Debian packages of the install components (cmake/LonghaulInstall.cmake), built by
# `cmake --build build --target packages` into build/packages/ with CPack's DEB
# generator. Dependencies on Debian's libraries come from dpkg-shlibdeps (by package
# name, nothing bundled); copyright and changelog from tools/packaging/debian/.
set(LONGHAUL_PACKAGES_DIR ${CMAKE_BINARY_DIR}/packages)
set(LONGHAUL_LIB_PACKAGE liblonghaul${LONGHAUL_SOVERSION})

set(CPACK_PACKAGE_NAME longhaul)
set(CPACK_PACKAGE_VENDOR "longhaul")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "longhaul maintainers <maintainers@longhaul.invalid>")
# No CPACK_PACKAGE_DESCRIPTION_SUMMARY: each description's first line is its synopsis.
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_GENERATOR DEB)
set(CPACK_OUTPUT_FILE_PREFIX ${LONGHAUL_PACKAGES_DIR})
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/packages-work)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING IGNORE)
set(CPACK_COMPONENTS_ALL lib dev tools nccl)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://longhaul.invalid/")

set(CPACK_DEBIAN_LIB_PACKAGE_NAME ${LONGHAUL_LIB_PACKAGE})
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIB_DESCRIPTION "user-space transport for long fat links (shared library)
longhaul carries messages over long, lossy, high-rate links (two data
centres across regions) with large windows, paced sending, selective repeat
and forward error correction, protected with Noise and AES-256-GCM. This
package holds the shared library; liblonghaul-dev has what programs need to
build against it.")
# shlibs (programs built against it depend on this exact upstream version while the
# ABI is 0.x) and ldconfig triggers.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY "=")

# ldconfig by dpkg trigger (CPack would call it from generated maintainer scripts).
set(CPACK_DEBIAN_LIB_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/tools/packaging/debian/triggers)
set(CPACK_DEBIAN_NCCL_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/tools/packaging/debian/triggers)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME liblonghaul-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "${LONGHAUL_LIB_PACKAGE} (= ${PROJECT_VERSION}-1), libabsl-dev")
set(CPACK_DEBIAN_DEV_PACKAGE_ARCHITECTURE amd64)
set(CPACK_DEBIAN_DEV_DESCRIPTION "user-space transport for long fat links (development files)
longhaul carries messages over long, lossy, high-rate links with large
windows, paced sending, selective repeat and forward error correction. This
package holds the headers (longhaul/longhaul.h), the CMake package
(find_package(longhaul)) and longhaul.pc.")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME longhaul)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION net)
set(CPACK_DEBIAN_TOOLS_DESCRIPTION "user-space transport for long fat links (tools)
longhaul-perf (iperf3-like tests), longhaul-bridge (TCP services between
two sites over one longhaul connection, with a systemd unit),
longhaul-probe and longhaul-tune (measure a link and choose parameters),
longhaul-emu and longhaul-sim (a link emulator and a simulator),
longhaul-keygen, link profiles and man pages.")
set(CPACK_DEBIAN_TOOLS_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/tools/packaging/debian/postinst
    ${PROJECT_SOURCE_DIR}/tools/packaging/debian/postrm)

set(CPACK_DEBIAN_NCCL_PACKAGE_NAME libnccl-net-longhaul)
set(CPACK_DEBIAN_NCCL_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_NCCL_DESCRIPTION "NCCL net plugin over longhaul
Lets NCCL (NCCL_NET_PLUGIN=longhaul) carry collective traffic between data
centres over longhaul connections: large windows, selective repeat, forward
error correction and packet protection on long, lossy links.")

# Every package carries /usr/share/doc/<package>/copyright and changelog.Debian.gz.
foreach(comp lib dev tools nccl)
  string(TOUPPER ${comp} _C)
  set(_pkg ${CPACK_DEBIAN_${_C}_PACKAGE_NAME})
  install(FILES ${PROJECT_SOURCE_DIR}/tools/packaging/debian/copyright
    DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${_pkg} COMPONENT ${comp} EXCLUDE_FROM_ALL)
  set(_gz ${CMAKE_BINARY_DIR}/packaging/changelog.Debian.gz)
  install(FILES ${_gz} DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${_pkg} COMPONENT ${comp}
    EXCLUDE_FROM_ALL)
endforeach()

include(CPack)

# The packages target: build what the packages hold, the compressed changelog, then CPack.
get_filename_component(_lh_cmake_bin ${CMAKE_COMMAND} DIRECTORY)
add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/packaging/changelog.Debian.gz
  COMMAND sh -c "gzip -9n -c \"$0\" > \"$1\""
          ${PROJECT_SOURCE_DIR}/tools/packaging/debian/changelog
          ${CMAKE_BINARY_DIR}/packaging/changelog.Debian.gz
  DEPENDS ${PROJECT_SOURCE_DIR}/tools/packaging/debian/changelog
  VERBATIM)
# Built with everything (a component install of one package needs it too).
add_custom_target(longhaul_changelog ALL DEPENDS ${CMAKE_BINARY_DIR}/packaging/changelog.Debian.gz)
add_custom_target(packages
  COMMAND ${CMAKE_COMMAND} -E rm -rf ${LONGHAUL_PACKAGES_DIR} ${CMAKE_BINARY_DIR}/packages-work
  COMMAND ${_lh_cmake_bin}/cpack --config ${CMAKE_BINARY_DIR}/CPackConfig.cmake
  WORKING_DIRECTORY ${CMAKE_BINARY_DIR}
  COMMENT "Debian packages into ${LONGHAUL_PACKAGES_DIR}"
  VERBATIM)
add_dependencies(packages longhaul_changelog longhaul_shared nccl-net-longhaul ${LONGHAUL_INSTALLED_TOOLS})
if(TARGET longhaul_manpages)
  add_dependencies(packages longhaul_manpages)
endif()
