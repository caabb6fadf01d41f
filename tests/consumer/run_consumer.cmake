# Builds and runs tests/consumer against flowlib, either installed into a
# temporary prefix (MODE=find_package) or as a subdirectory
# (MODE=add_subdirectory, MODE=provided: see tests/consumer/CMakeLists.txt).
# As a subdirectory, flowlib must also default to FLOWLIB_INSTALL=OFF and
# install nothing: the consumer's own install puts its program there and no
# flowlib file. Prints "consumer ok" on success.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGV}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

# No build type (no optimisation): the consumers check packaging, linking
# and a run, not speed, and so compile in about 60% of the time of -O3.
set(args -S ${FLOWLIB_SOURCE_DIR}/tests/consumer -B ${WORK_DIR}/build
         -DCMAKE_CXX_COMPILER=${CXX} -DMODE=${MODE} -DCMAKE_BUILD_TYPE=)
if(LAUNCHER)  # flowlib's own compiler launcher (ccache), for cheap re-runs
  list(APPEND args -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
# The provided mode checks that flowlib uses the range-v3 and Abseil targets
# its parent defines. The component targets (flowlib::sqlite, files, kafka)
# reach those only through flowlib::flowlib: configuring them is checked
# here and as a plain subdirectory, building and running them in the
# find_package mode (as a subdirectory they are the targets flowlib's own
# build links its tests and examples with).
set(components sqlite files kafka)
set(build_args)
if(NOT MODE STREQUAL "find_package")
  set(components)
  set(build_args --target consumer)
endif()
if(MODE STREQUAL "find_package")
  run(${CMAKE_COMMAND} --install ${FLOWLIB_BUILD_DIR} --prefix ${WORK_DIR}/prefix)
  if(NOT EXISTS ${WORK_DIR}/prefix/include/flowlib/flowlib.hpp)
    message(FATAL_ERROR "install did not place the headers")
  endif()
  list(APPEND args -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix)
elseif(MODE STREQUAL "add_subdirectory" OR MODE STREQUAL "provided")
  list(APPEND args -DFLOWLIB_SOURCE_DIR=${FLOWLIB_SOURCE_DIR})
else()
  message(FATAL_ERROR "unknown MODE '${MODE}'")
endif()
run(${CMAKE_COMMAND} ${args})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build ${build_args})
foreach(component IN LISTS components)
  run(${WORK_DIR}/build/consumer_${component})
  if(NOT last_output MATCHES "${component} consumer ok")
    message(FATAL_ERROR "the flowlib::${component} consumer failed: ${last_output}")
  endif()
endforeach()
run(${WORK_DIR}/build/consumer)
set(consumer_output "${last_output}")

if(NOT MODE STREQUAL "find_package")
  file(READ ${WORK_DIR}/build/flowlib_install_option.txt install_option)
  if(install_option)
    message(FATAL_ERROR "FLOWLIB_INSTALL is '${install_option}' in a subproject; "
                        "it must default to OFF")
  endif()
  set(prefix ${WORK_DIR}/consumer_prefix)
  run(${CMAKE_COMMAND} --install ${WORK_DIR}/build --prefix ${prefix})
  file(GLOB_RECURSE installed LIST_DIRECTORIES false RELATIVE ${prefix} ${prefix}/*)
  if(NOT installed STREQUAL "bin/consumer")
    message(FATAL_ERROR "the consumer's install should hold bin/consumer only; it holds: "
                        "${installed}")
  endif()
endif()
message("${consumer_output}")
