# ferry_generate(TARGET <target> PROTOS <files...> [IMPORT_DIRS <dirs...>] [OUT_DIR <dir>])
#
# Runs protoc's C++ generator on PROTOS and adds the generated sources to TARGET, with OUT_DIR
# (default: <binary dir>/ferry_generated) as a public include directory. Outputs are named as
# protoc names them: the proto's path relative to the import directory that holds it, so
# `IMPORT_DIRS proto` and `proto/foo/bar.proto` give `foo/bar.pb.h`. The first import directory
# that contains a proto is its root; a proto under none of them is rooted at its own directory.
function(ferry_generate)
  cmake_parse_arguments(FG "" "TARGET;OUT_DIR" "PROTOS;IMPORT_DIRS" ${ARGN})
  if(NOT FG_TARGET OR NOT FG_PROTOS)
    message(FATAL_ERROR "ferry_generate: TARGET and PROTOS are required")
  endif()
  if(NOT FG_OUT_DIR)
    set(FG_OUT_DIR ${CMAKE_CURRENT_BINARY_DIR}/ferry_generated)
  endif()

  set(import_dirs)
  foreach(dir ${FG_IMPORT_DIRS})
    get_filename_component(abs ${dir} ABSOLUTE)
    list(APPEND import_dirs ${abs})
  endforeach()

  set(generated)
  foreach(proto ${FG_PROTOS})
    get_filename_component(abs_proto ${proto} ABSOLUTE)
    get_filename_component(root ${abs_proto} DIRECTORY)
    foreach(dir ${import_dirs})
      string(FIND "${abs_proto}" "${dir}/" at)
      if(at EQUAL 0)
        set(root ${dir})
        break()
      endif()
    endforeach()
    file(RELATIVE_PATH rel ${root} ${abs_proto})
    string(REGEX REPLACE "\\.proto$" "" stem ${rel})
    set(outputs ${FG_OUT_DIR}/${stem}.pb.h ${FG_OUT_DIR}/${stem}.pb.cc)

    set(include_args -I${root})
    foreach(dir ${import_dirs})
      list(APPEND include_args -I${dir})
    endforeach()
    list(REMOVE_DUPLICATES include_args)

    add_custom_command(
      OUTPUT ${outputs}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${FG_OUT_DIR}
      COMMAND protobuf::protoc ${include_args} --cpp_out=${FG_OUT_DIR} ${abs_proto}
      DEPENDS ${abs_proto} protobuf::protoc
      COMMENT "ferry_generate: ${rel}"
      VERBATIM)
    list(APPEND generated ${outputs})
  endforeach()

  target_sources(${FG_TARGET} PRIVATE ${generated})
  target_include_directories(${FG_TARGET} PUBLIC $<BUILD_INTERFACE:${FG_OUT_DIR}>)
  target_link_libraries(${FG_TARGET} PUBLIC protobuf::libprotobuf)
endfunction()
