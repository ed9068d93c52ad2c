# The ferry_generate_tracks_imports test: a proto's generated files are regenerated when a proto
# it imports changes, with Ninja and with Makefiles. Configures a project that calls
# ferry_generate (cmake/FerryGenerate.cmake, with the built protoc-gen-ferry) on a.proto, which
# imports b.proto, builds the generated files, checks that a second build regenerates nothing,
# touches b.proto and checks that the next build regenerates a.proto's files. Builds no C++.
#
#   cmake -DFERRY_CMAKE_DIR=<cmake/> -DPLUGIN=<protoc-gen-ferry> -DWORK_DIR=<dir>
#         -DGENERATORS="Ninja,Unix Makefiles" -P check_depfile.cmake

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/src/protos)
file(WRITE ${WORK_DIR}/src/protos/b.proto
     "syntax = \"proto3\";\npackage deps;\nmessage B { string text = 1; }\n")
file(WRITE ${WORK_DIR}/src/protos/a.proto
     "syntax = \"proto3\";\npackage deps;\nimport \"b.proto\";\n"
     "service A { rpc Get(B) returns (B); }\n")
file(WRITE ${WORK_DIR}/src/CMakeLists.txt "
cmake_minimum_required(VERSION 3.16)  # older than CMP0116: ferry_generate sets it itself
project(deps LANGUAGES CXX)
find_package(Protobuf REQUIRED)
add_executable(ferry::protoc-gen-ferry IMPORTED)
set_target_properties(ferry::protoc-gen-ferry PROPERTIES IMPORTED_LOCATION ${PLUGIN})
add_library(ferry::ferry INTERFACE IMPORTED)
include(${FERRY_CMAKE_DIR}/FerryGenerate.cmake)
add_library(deps_proto OBJECT EXCLUDE_FROM_ALL)
ferry_generate(TARGET deps_proto PROTOS protos/a.proto IMPORT_DIRS protos
               OUT_DIR \${CMAKE_BINARY_DIR}/gen)
add_custom_target(generate DEPENDS \${CMAKE_BINARY_DIR}/gen/a.ferry.h)
")

function(build dir what out_var)
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${dir} --target generate
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what}: the build failed:\n${out}${err}")
  endif()
  set(${out_var} "${out}${err}" PARENT_SCOPE)
endfunction()

string(REPLACE "," ";" generators "${GENERATORS}")
foreach(generator ${generators})
  string(MAKE_C_IDENTIFIER "${generator}" name)
  set(dir ${WORK_DIR}/build_${name})
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${WORK_DIR}/src -B ${dir} -G ${generator}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR err MATCHES "CMP0116")
    message(FATAL_ERROR "${generator}: configuring failed or warned:\n${out}${err}")
  endif()
  build(${dir} "${generator}, first build" out)
  if(NOT out MATCHES "ferry_generate: a.proto" OR NOT EXISTS ${dir}/gen/a.ferry.h)
    message(FATAL_ERROR "${generator}: the first build did not generate a.proto:\n${out}")
  endif()
  build(${dir} "${generator}, second build" out)
  if(out MATCHES "ferry_generate: a.proto")
    message(FATAL_ERROR "${generator}: nothing changed, yet a.proto was regenerated:\n${out}")
  endif()
  # A second later, so the edit is newer than the outputs at any timestamp resolution.
  execute_process(COMMAND ${CMAKE_COMMAND} -E sleep 1.1)
  file(TOUCH ${WORK_DIR}/src/protos/b.proto)
  build(${dir} "${generator}, after editing b.proto" out)
  if(NOT out MATCHES "ferry_generate: a.proto")
    message(FATAL_ERROR "${generator}: b.proto, which a.proto imports, changed, and a.proto's "
                        "files were not regenerated:\n${out}")
  endif()
  message("${generator}: a.proto is regenerated when b.proto changes, and only then")
endforeach()
