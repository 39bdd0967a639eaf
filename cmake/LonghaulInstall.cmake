# Installing and packaging (docs/install.md).
#
#   cmake --install build [--prefix P]     (DESTDIR works too)
#   cmake --build build --target packages  Debian packages into build/packages/
#
# Components, one Debian package each:
#   lib    liblonghaul<SOVERSION>   the shared library
#   dev    liblonghaul-dev          headers, the CMake package, longhaul.pc, the .so link
#   tools  longhaul                 the tools, profiles and link specs, man pages, the
#                                   bridge's systemd unit, the sysctl.d snippet, docs
#   nccl   libnccl-net-longhaul     the NCCL net plugin, where NCCL's dlopen finds it
include(CMakePackageConfigHelpers)

set(LONGHAUL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/longhaul)
set(LONGHAUL_SHARE_DIR ${CMAKE_INSTALL_DATADIR}/longhaul)
# On Debian 12 units live in /usr/lib/systemd/system: <prefix>/lib, not the multiarch libdir.
set(LONGHAUL_UNIT_DIR lib/systemd/system)
set(LONGHAUL_SYSCTL_DIR lib/sysctl.d)
set(LONGHAUL_DOC_DIR ${CMAKE_INSTALL_DATADIR}/doc/longhaul)

# ---- the library ----
install(TARGETS longhaul_shared EXPORT longhaulTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT lib NAMELINK_COMPONENT dev)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/transport/api/include/longhaul
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev FILES_MATCHING PATTERN "*.h")
install(EXPORT longhaulTargets NAMESPACE longhaul:: DESTINATION ${LONGHAUL_CMAKE_DIR}
  COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/tools/packaging/longhaulConfig.cmake.in
  ${CMAKE_BINARY_DIR}/packaging/longhaulConfig.cmake INSTALL_DESTINATION ${LONGHAUL_CMAKE_DIR})
# 0.x: a new minor version may break the API, so only the same minor is compatible.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/packaging/longhaulConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/packaging/longhaulConfig.cmake
              ${CMAKE_BINARY_DIR}/packaging/longhaulConfigVersion.cmake
  DESTINATION ${LONGHAUL_CMAKE_DIR} COMPONENT dev)
# liblonghaul.a: the API's objects and every internal archive they need, merged into one
# archive (ar's MRI script), for programs that link statically; the CMake package's
# `static` component (longhaul::longhaul_static) and `pkg-config --static` name what it
# needs from Debian's libraries.
function(_lh_collect_deps tgt)
  get_property(_seen GLOBAL PROPERTY _LH_SEEN)
  if(tgt IN_LIST _seen)
    return()
  endif()
  set_property(GLOBAL APPEND PROPERTY _LH_SEEN ${tgt})
  get_target_property(_type ${tgt} TYPE)
  if(_type STREQUAL "STATIC_LIBRARY")
    set_property(GLOBAL APPEND PROPERTY _LH_ARCHIVES ${tgt})
  endif()
  set(_libs "")
  if(NOT _type STREQUAL "INTERFACE_LIBRARY")
    get_target_property(_l ${tgt} LINK_LIBRARIES)
    if(_l)
      list(APPEND _libs ${_l})
    endif()
  endif()
  get_target_property(_il ${tgt} INTERFACE_LINK_LIBRARIES)
  if(_il)
    list(APPEND _libs ${_il})
  endif()
  foreach(_x IN LISTS _libs)
    if(_x MATCHES "^longhaul_" AND TARGET ${_x})
      _lh_collect_deps(${_x})
    elseif(NOT _x MATCHES "^\\$<")
      set_property(GLOBAL APPEND PROPERTY _LH_EXTERNAL ${_x})
    endif()
  endforeach()
endfunction()
_lh_collect_deps(longhaul_shared)
get_property(_lh_archives GLOBAL PROPERTY _LH_ARCHIVES)
get_property(_lh_external GLOBAL PROPERTY _LH_EXTERNAL)
list(REMOVE_DUPLICATES _lh_external)
# What a static link needs, as the consumer names it (imported targets of the packages
# the config finds, or plain library names), and as pkg-config modules / -l flags.
set(_lh_static_link "")
set(_lh_pc_requires "")
set(_lh_pc_libs "")
foreach(_x IN LISTS _lh_external)
  if(_x MATCHES "^absl::(.*)$")
    list(APPEND _lh_static_link ${_x})
    list(APPEND _lh_pc_requires absl_${CMAKE_MATCH_1})
  elseif(_x STREQUAL "glog::glog")
    list(APPEND _lh_static_link glog::glog)
    list(APPEND _lh_pc_requires libglog)
  elseif(_x STREQUAL "OpenSSL::Crypto")
    list(APPEND _lh_static_link OpenSSL::Crypto)
    list(APPEND _lh_pc_requires libcrypto)
  elseif(_x STREQUAL "PkgConfig::ISAL")
    list(APPEND _lh_static_link isal)
    list(APPEND _lh_pc_requires libisal)
  elseif(_x STREQUAL "Threads::Threads")
    list(APPEND _lh_static_link Threads::Threads)
    list(APPEND _lh_pc_libs -pthread)
  elseif(_x MATCHES "libIPSec_MB")
    list(APPEND _lh_static_link IPSec_MB)
    list(APPEND _lh_pc_libs -lIPSec_MB)
  elseif(_x STREQUAL "dl" OR _x STREQUAL "${CMAKE_DL_LIBS}")
    list(APPEND _lh_static_link dl)
    list(APPEND _lh_pc_libs -ldl)
  elseif(_x MATCHES "^(gflags|nlohmann_json::nlohmann_json|Boost::)")
    # header-only here, or not reached by the library's objects
  else()
    message(FATAL_ERROR "liblonghaul.a: no rule for the dependency '${_x}' "
                        "(cmake/LonghaulInstall.cmake)")
  endif()
endforeach()
list(REMOVE_DUPLICATES _lh_static_link)
list(REMOVE_DUPLICATES _lh_pc_requires)
list(REMOVE_DUPLICATES _lh_pc_libs)
string(REPLACE ";" " " LONGHAUL_PC_REQUIRES_PRIVATE "${_lh_pc_requires}")
string(REPLACE ";" " " LONGHAUL_PC_LIBS_PRIVATE "${_lh_pc_libs}")

add_library(longhaul_static_objects OBJECT ${PROJECT_SOURCE_DIR}/transport/api/public_api.cc
            ${PROJECT_SOURCE_DIR}/transport/api/version.cc)
add_dependencies(longhaul_static_objects longhaul_git_revision)
get_target_property(_lh_inc longhaul_shared INCLUDE_DIRECTORIES)
target_include_directories(longhaul_static_objects PRIVATE ${_lh_inc})
target_compile_definitions(longhaul_static_objects PRIVATE
  LONGHAUL_VERSION_STRING="${PROJECT_VERSION}")
target_compile_options(longhaul_static_objects PRIVATE ${LONGHAUL_WARNINGS})
target_link_libraries(longhaul_static_objects PRIVATE absl::status absl::statusor)
set(_lh_static ${CMAKE_ARCHIVE_OUTPUT_DIRECTORY}/liblonghaul.a)
set(_lh_mri "CREATE ${_lh_static}\n")
foreach(_a IN LISTS _lh_archives)
  string(APPEND _lh_mri "ADDLIB $<TARGET_FILE:${_a}>\n")
endforeach()
string(APPEND _lh_mri "ADDMOD $<JOIN:$<TARGET_OBJECTS:longhaul_static_objects>, >\nSAVE\nEND\n")
file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/packaging/liblonghaul.mri CONTENT "${_lh_mri}")
add_custom_command(OUTPUT ${_lh_static}
  COMMAND ${CMAKE_COMMAND} -E rm -f ${_lh_static}
  COMMAND sh -c "\"$0\" -M < \"$1\"" ${CMAKE_AR} ${CMAKE_BINARY_DIR}/packaging/liblonghaul.mri
  COMMAND ${CMAKE_RANLIB} ${_lh_static}
  DEPENDS ${_lh_archives} longhaul_static_objects $<TARGET_OBJECTS:longhaul_static_objects>
          ${CMAKE_BINARY_DIR}/packaging/liblonghaul.mri
  COMMENT "liblonghaul.a"
  VERBATIM)
add_custom_target(longhaul_static ALL DEPENDS ${_lh_static})
install(FILES ${_lh_static} DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
configure_file(${PROJECT_SOURCE_DIR}/tools/packaging/longhaulStaticTargets.cmake.in
  ${CMAKE_BINARY_DIR}/packaging/longhaulStaticTargets.cmake @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/packaging/longhaulStaticTargets.cmake
  DESTINATION ${LONGHAUL_CMAKE_DIR} COMPONENT dev)
# pkg-config: relocatable (prefix from ${pcfiledir}); libdir and includedir relative to it.
file(RELATIVE_PATH LONGHAUL_PC_UP ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig
     ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" LONGHAUL_PC_UP "${LONGHAUL_PC_UP}")
configure_file(${PROJECT_SOURCE_DIR}/tools/packaging/longhaul.pc.in
  ${CMAKE_BINARY_DIR}/packaging/longhaul.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/packaging/longhaul.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

# ---- the tools ----
set(LONGHAUL_INSTALLED_TOOLS longhaul-perf longhaul-bridge longhaul-keygen longhaul-emu
    longhaul-sim longhaul-probe longhaul-tune longhaul-nccl-bench longhaul-tcp-peer)
if(TARGET longhaul-udt-peer)
  list(APPEND LONGHAUL_INSTALLED_TOOLS longhaul-udt-peer)
endif()
install(TARGETS ${LONGHAUL_INSTALLED_TOOLS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  COMPONENT tools)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/profiles/ DESTINATION ${LONGHAUL_SHARE_DIR}/profiles
  COMPONENT tools FILES_MATCHING PATTERN "*.profile" PATTERN "*.link")
install(FILES ${PROJECT_SOURCE_DIR}/tools/packaging/systemd/longhaul-bridge@.service
  DESTINATION ${LONGHAUL_UNIT_DIR} COMPONENT tools)
install(FILES ${PROJECT_SOURCE_DIR}/tools/packaging/sysctl/60-longhaul.conf
  DESTINATION ${LONGHAUL_SYSCTL_DIR} COMPONENT tools)
install(FILES ${PROJECT_SOURCE_DIR}/tools/packaging/systemd/bridge.conf.example
  DESTINATION ${LONGHAUL_DOC_DIR}/examples COMPONENT tools)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${LONGHAUL_DOC_DIR} COMPONENT tools)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${LONGHAUL_DOC_DIR}
  COMPONENT tools FILES_MATCHING PATTERN "*.md")

# Man pages from each tool's --help and --version (help2man), built with the tools when
# help2man is there (tools/setup.sh installs it); the packages need them.
find_program(LONGHAUL_HELP2MAN help2man)
set(LONGHAUL_MAN_DIR ${CMAKE_BINARY_DIR}/man)
set(_lh_whatis_longhaul-perf "iperf3-style tests over longhaul")
set(_lh_whatis_longhaul-bridge "carry TCP connections over one longhaul connection")
set(_lh_whatis_longhaul-keygen "keys for longhaul's packet protection")
set(_lh_whatis_longhaul-emu "a user-space netem: the link model in real time")
set(_lh_whatis_longhaul-sim "longhaul connections over a simulated link, in virtual time")
set(_lh_whatis_longhaul-probe "measure a path: RTT, rate, loss, burstiness, reordering, MTU")
set(_lh_whatis_longhaul-tune "choose longhaul's transport parameters for a link")
set(_lh_whatis_longhaul-nccl-bench "ring allreduce over the longhaul NCCL net plugin")
set(_lh_whatis_longhaul-tcp-peer "longhaul-perf's workloads over TCP, for comparisons")
set(_lh_whatis_longhaul-udt-peer "longhaul-perf's workloads over UDT, for comparisons")
if(LONGHAUL_HELP2MAN)
  set(_lh_pages "")
  foreach(tool IN LISTS LONGHAUL_INSTALLED_TOOLS)
    set(_page ${LONGHAUL_MAN_DIR}/${tool}.1.gz)
    # The version string without the git revision: pages change only with the text.
    add_custom_command(OUTPUT ${_page}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${LONGHAUL_MAN_DIR}
      COMMAND ${LONGHAUL_HELP2MAN} --no-info --section=1 --source=longhaul
              "--name=${_lh_whatis_${tool}}" "--version-string=${PROJECT_VERSION}"
              --output=${LONGHAUL_MAN_DIR}/${tool}.1 $<TARGET_FILE:${tool}>
      COMMAND gzip -9nf ${LONGHAUL_MAN_DIR}/${tool}.1
      DEPENDS ${tool}
      COMMENT "man page of ${tool}"
      VERBATIM)
    list(APPEND _lh_pages ${_page})
    install(FILES ${_page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT tools)
  endforeach()
  add_custom_target(longhaul_manpages ALL DEPENDS ${_lh_pages})
else()
  message(STATUS "help2man not found: no man pages (tools/setup.sh installs it)")
endif()

# ---- the NCCL plugin ----
install(TARGETS nccl-net-longhaul LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT nccl)

# ---- Debian packages (CPack's DEB generator) ----
include(LonghaulPackages)
