# Installs the built ferry into WORK_DIR/prefix, then builds and runs the consumer project in
# CONSUMER_SOURCE_DIR against it, exactly as a downstream project would use ferry.
file(REMOVE_RECURSE ${WORK_DIR})

function(run_step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "step failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
endfunction()

run_step(${CMAKE_COMMAND} --install ${FERRY_BUILD_DIR} --prefix ${WORK_DIR}/prefix)
run_step(${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR} -B ${WORK_DIR}/build -G ${GENERATOR}
         -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix)
run_step(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run_step(${WORK_DIR}/build/consumer)

# ferry has its own HTTP/2 engine: nghttp2 is neither a dependency of the installed package nor
# on a consumer's link line.
file(GLOB_RECURSE package_files ${WORK_DIR}/prefix/*.cmake)
if(NOT package_files)
  message(FATAL_ERROR "no CMake package files installed under ${WORK_DIR}/prefix")
endif()
# The consumer's link commands: Ninja's build.ninja, or a Makefile generator's link.txt files.
file(GLOB_RECURSE link_files ${WORK_DIR}/build/build.ninja ${WORK_DIR}/build/link.txt)
if(NOT link_files)
  message(FATAL_ERROR "no link command found under ${WORK_DIR}/build")
endif()
foreach(f IN LISTS package_files link_files)
  file(STRINGS ${f} lines REGEX "[Nn][Gg][Hh][Tt][Tt][Pp]2")
  if(lines)
    message(FATAL_ERROR "${f} names nghttp2:\n${lines}")
  endif()
endforeach()
message(STATUS "install consumer: built and ran against ${WORK_DIR}/prefix")
