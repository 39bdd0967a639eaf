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

# Sanitizers. LONGHAUL_SANITIZE (CMakeLists.txt) names one of:
#   address  ASan + LeakSanitizer (on by default with ASan on Linux x86-64) + UBSan;
#            the asan preset. ON means address (what the preset used to say).
#   thread   ThreadSanitizer; the tsan preset.
# ASan and TSan each replace the allocator and instrument every access: one process
# cannot have both, so a combination is refused here rather than failing at link time.
# UBSan does not recover (-fno-sanitize-recover): a report ends the process with an
# error, so a test that hits undefined behaviour fails. LONGHAUL_SANITIZER holds the
# normalised name ("address", "thread" or empty) for the rest of the build.
string(TOLOWER "${LONGHAUL_SANITIZE}" _lh_sanitize)
string(REPLACE "," ";" _lh_sanitize "${_lh_sanitize}")
if(_lh_sanitize MATCHES "address" AND _lh_sanitize MATCHES "thread")
  message(FATAL_ERROR "LONGHAUL_SANITIZE=${LONGHAUL_SANITIZE}: AddressSanitizer and "
          "ThreadSanitizer cannot be combined in one build; use the asan or the tsan preset")
endif()
if(_lh_sanitize STREQUAL "address" OR _lh_sanitize MATCHES "^(on|yes|true|1)$")
  set(LONGHAUL_SANITIZER address)
elseif(_lh_sanitize STREQUAL "thread")
  set(LONGHAUL_SANITIZER thread)
elseif(_lh_sanitize MATCHES "^(off|no|false|0|)$")
  set(LONGHAUL_SANITIZER "")
else()
  message(FATAL_ERROR "LONGHAUL_SANITIZE=${LONGHAUL_SANITIZE}: expected OFF, address (or ON) "
          "or thread")
endif()
set(_lh_user_flags "${CMAKE_C_FLAGS} ${CMAKE_CXX_FLAGS} ${CMAKE_EXE_LINKER_FLAGS}")
if((LONGHAUL_SANITIZER STREQUAL "address" AND _lh_user_flags MATCHES "-fsanitize=[^ ]*thread")
   OR (LONGHAUL_SANITIZER STREQUAL "thread" AND
       _lh_user_flags MATCHES "-fsanitize=[^ ]*(address|leak|memory)"))
  message(FATAL_ERROR "LONGHAUL_SANITIZE=${LONGHAUL_SANITIZE} contradicts the -fsanitize= in "
          "CMAKE_*_FLAGS (${_lh_user_flags}); ASan/LSan and TSan cannot be combined")
endif()
if(LONGHAUL_SANITIZER AND LONGHAUL_FUZZ)
  message(FATAL_ERROR "LONGHAUL_FUZZ builds its own ASan+UBSan fuzz targets; do not combine it "
          "with LONGHAUL_SANITIZE (use the fuzz preset alone)")
endif()
if(LONGHAUL_SANITIZER STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
elseif(LONGHAUL_SANITIZER STREQUAL "thread")
  if(CMAKE_BUILD_TYPE STREQUAL "Debug")
    message(STATUS "tsan: a Debug build is very slow under TSan; the tsan preset uses RelWithDebInfo")
  endif()
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
endif()

# What every test of a sanitizer build runs with (longhaul_sanitizer_test_env; the tools
# a test starts inherit it). ASan: leak checking on (the default on Linux x86-64, made
# explicit), UBSan stack traces; TSan: the third-party suppressions in
# tests/sanitizers/tsan.supp, both stacks of a lock-order inversion. A report makes the
# process exit non-zero (ASan/LSan 1, UBSan aborts, TSan 66 at exit), so the test fails.
# The tests' TIMEOUTs are multiplied by LONGHAUL_TEST_TIMEOUT_SCALE (ctest --timeout
# only applies to tests without a TIMEOUT of their own): instrumented code runs 2-5x
# slower (TSan the most).
set(LONGHAUL_SANITIZER_TEST_ENV "")
set(_lh_timeout_scale 1)
if(LONGHAUL_SANITIZER STREQUAL "address")
  set(LONGHAUL_SANITIZER_TEST_ENV
      "ASAN_OPTIONS=detect_leaks=1"
      "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
  set(_lh_timeout_scale 3)
elseif(LONGHAUL_SANITIZER STREQUAL "thread")
  set(LONGHAUL_SANITIZER_TEST_ENV
      "TSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/sanitizers/tsan.supp:second_deadlock_stack=1")
  set(_lh_timeout_scale 5)
endif()
set(LONGHAUL_TEST_TIMEOUT_SCALE ${_lh_timeout_scale} CACHE STRING
    "Multiplier for every test's TIMEOUT (3 under ASan, 5 under TSan, else 1)")

# Sets the sanitizer environment and scales the TIMEOUT of `test` (a test added in the
# calling directory with a TIMEOUT property).
function(longhaul_sanitizer_test_env test)
  if(LONGHAUL_SANITIZER_TEST_ENV)
    set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT ${LONGHAUL_SANITIZER_TEST_ENV})
  endif()
  if(NOT LONGHAUL_TEST_TIMEOUT_SCALE EQUAL 1)
    get_test_property(${test} TIMEOUT _lh_t)
    if(_lh_t)
      math(EXPR _lh_t "${_lh_t} * ${LONGHAUL_TEST_TIMEOUT_SCALE}")
      set_tests_properties(${test} PROPERTIES TIMEOUT ${_lh_t})
    endif()
  endif()
endfunction()

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
  # The tools' path memory (tools/common/path_memory.h) lives under XDG_CACHE_HOME: each
  # test binary gets its own, so tests neither write the user's cache nor start from
  # rates another test measured.
  set_property(TEST ${A_NAME} APPEND PROPERTY ENVIRONMENT
               "XDG_CACHE_HOME=${CMAKE_BINARY_DIR}/test-cache/${A_NAME}")
  longhaul_sanitizer_test_env(${A_NAME})
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
