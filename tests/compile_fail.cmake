# A negative compile test (tests/CMakeLists.txt): runs the compiler command
# given after `--` and succeeds only when the compile fails with a
# diagnostic that matches the regular expression on SOURCE's line
# `// expect-error: <regex>`; then touches STAMP.
#   cmake -DSOURCE=<file.cpp> -DSTAMP=<file> -P compile_fail.cmake -- <compiler command...>
set(command)
set(after_separator OFF)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(after_separator)
    list(APPEND command "${CMAKE_ARGV${i}}")
  elseif(CMAKE_ARGV${i} STREQUAL "--")
    set(after_separator ON)
  endif()
endforeach()
file(STRINGS ${SOURCE} expect_line REGEX "^// expect-error: ")
string(REGEX REPLACE "^// expect-error: " "" expect "${expect_line}")
execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE}: compiled, but must fail with a diagnostic matching\n  ${expect}")
endif()
if(NOT "${out}${err}" MATCHES "${expect}")
  message(FATAL_ERROR "${SOURCE}: failed to compile, but no diagnostic matches\n  ${expect}\n"
                      "The compiler said:\n${out}${err}")
endif()
file(TOUCH ${STAMP})
