# Helper functions for libraries, binaries and tests.
#
#   longhaul_cc_library(NAME name SRCS ... [HDRS ...] [DEPS ...] [LAYER core|any])
#   longhaul_cc_binary(NAME longhaul-verb SRCS ... DEPS ...)
#   longhaul_cc_test(NAME name SRCS ... DEPS ... LABELS unit|sim|e2e|netns|nccl|rdma|fuzz
#                    [TIMEOUT seconds] [NO_GTEST_MAIN])
#
# Layering: a library declared with LAYER core may only depend on Abseil, glog, ISA-L
# and other core-layer libraries; the check below fails the configure step otherwise.

set(LONGHAUL_WARNINGS -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare
    -Wno-missing-field-initializers)
if(LONGHAUL_WERROR)
  list(APPEND LONGHAUL_WARNINGS -Werror)
endif()

if(LONGHAUL_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

set_property(GLOBAL PROPERTY LONGHAUL_CORE_LIBS "")

function(longhaul_cc_library)
  cmake_parse_arguments(A "" "NAME;LAYER;TYPE" "SRCS;HDRS;DEPS;PUBLIC_DEPS" ${ARGN})
  if(NOT A_TYPE)
    set(A_TYPE STATIC)
  endif()
  if(A_SRCS)
    add_library(${A_NAME} ${A_TYPE} ${A_SRCS} ${A_HDRS})
    target_include_directories(${A_NAME} PUBLIC ${PROJECT_SOURCE_DIR})
    target_compile_options(${A_NAME} PRIVATE ${LONGHAUL_WARNINGS})
    target_link_libraries(${A_NAME} PUBLIC ${A_DEPS} ${A_PUBLIC_DEPS})
  else()
    add_library(${A_NAME} INTERFACE)
    target_include_directories(${A_NAME} INTERFACE ${PROJECT_SOURCE_DIR})
    target_link_libraries(${A_NAME} INTERFACE ${A_DEPS} ${A_PUBLIC_DEPS})
  endif()
  if(A_LAYER STREQUAL "core")
    set_property(GLOBAL APPEND PROPERTY LONGHAUL_CORE_LIBS ${A_NAME})
    foreach(dep IN LISTS A_DEPS A_PUBLIC_DEPS)
      if(dep MATCHES "Boost|boost|ibverbs|IBVERBS|gflags")
        message(FATAL_ERROR "layering: core library ${A_NAME} must not depend on ${dep}")
      endif()
    endforeach()
  endif()
endfunction()

function(longhaul_cc_binary)
  cmake_parse_arguments(A "" "NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${A_NAME} ${A_SRCS})
  target_include_directories(${A_NAME} PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(${A_NAME} PRIVATE ${LONGHAUL_WARNINGS})
  target_link_libraries(${A_NAME} PRIVATE ${A_DEPS})
endfunction()

function(longhaul_cc_test)
  cmake_parse_arguments(A "NO_GTEST_MAIN;SERIAL" "NAME;TIMEOUT" "SRCS;DEPS;LABELS;ARGS" ${ARGN})
  add_executable(${A_NAME} ${A_SRCS})
  set_target_properties(${A_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  target_include_directories(${A_NAME} PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(${A_NAME} PRIVATE ${LONGHAUL_WARNINGS})
  if(A_NO_GTEST_MAIN)
    target_link_libraries(${A_NAME} PRIVATE ${A_DEPS} GTest::gtest GTest::gmock)
  else()
    target_link_libraries(${A_NAME} PRIVATE ${A_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  endif()
  add_test(NAME ${A_NAME} COMMAND ${A_NAME} ${A_ARGS})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 300)
  endif()
  set_tests_properties(${A_NAME} PROPERTIES LABELS "${A_LABELS}" TIMEOUT ${A_TIMEOUT})
  # Tests over real sockets and the real-time emulator measure what they run; on a small
  # machine a concurrent CPU-bound test (a simulation) would distort them, so they run
  # alone. Pure and simulated tests run in parallel.
  set(_lh_realtime FALSE)
  foreach(_lh_label IN LISTS A_LABELS)
    if(_lh_label MATCHES "^(e2e|netns|nccl|rdma)$")
      set(_lh_realtime TRUE)
    endif()
  endforeach()
  if(A_SERIAL OR _lh_realtime)
    set_tests_properties(${A_NAME} PROPERTIES RUN_SERIAL TRUE)
  endif()
endfunction()
