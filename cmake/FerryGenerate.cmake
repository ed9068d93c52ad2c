# ferry_generate(TARGET <target> PROTOS <files...> [IMPORT_DIRS <dirs...>] [OUT_DIR <dir>]
#                [MESSAGES_ONLY] [LITE])
#
# Runs protoc on PROTOS with its C++ generator (<stem>.pb.h/.cc: the messages) and with
# protoc-gen-ferry (<stem>.ferry.h/.cc: a service base class and client stubs per service), adds
# the generated sources to TARGET, links TARGET with ferry::ferry, and makes OUT_DIR (default:
# <binary dir>/ferry_generated) a public include directory. MESSAGES_ONLY skips protoc-gen-ferry.
# LITE generates for protobuf's lite runtime whatever the files' optimize_for says
# (--cpp_out=lite: and --ferry_out=lite:; link protobuf::libprotobuf-lite yourself if you want it).
#
# Outputs are named as protoc names them: the proto's path relative to the import directory that
# holds it, so `IMPORT_DIRS proto` and `proto/foo/bar.proto` give `foo/bar.pb.h` and
# `foo/bar.ferry.h`. The first import directory that contains a proto is its root; a proto under
# none of them is rooted at its own directory. A .protodevel file is named as a .proto is.
#
# Each proto's outputs depend on the files it imports, as protoc lists them (--dependency_out,
# read through add_custom_command's DEPFILE): editing an imported proto regenerates them.

# The policies in effect where the function is defined are those it runs with: CMP0116 (3.20)
# takes the depfile's paths (absolute here) as they are, and quiets the warning in projects
# whose cmake_minimum_required predates it.
cmake_policy(PUSH)
cmake_policy(SET CMP0116 NEW)
function(ferry_generate)
  cmake_parse_arguments(FG "MESSAGES_ONLY;LITE" "TARGET;OUT_DIR" "PROTOS;IMPORT_DIRS" ${ARGN})
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
    # protoc's StripProto: both suffixes.
    string(REGEX REPLACE "\\.(proto|protodevel)$" "" stem ${rel})
    set(outputs ${FG_OUT_DIR}/${stem}.pb.h ${FG_OUT_DIR}/${stem}.pb.cc)
    set(lite)
    if(FG_LITE)
      set(lite lite:)
    endif()
    set(plugin_args)
    set(plugin_depends)
    if(NOT FG_MESSAGES_ONLY)
      list(APPEND outputs ${FG_OUT_DIR}/${stem}.ferry.h ${FG_OUT_DIR}/${stem}.ferry.cc)
      set(plugin_args --plugin=protoc-gen-ferry=$<TARGET_FILE:ferry::protoc-gen-ferry>
                      --ferry_out=${lite}${FG_OUT_DIR})
      set(plugin_depends ferry::protoc-gen-ferry)
    endif()

    set(include_args -I${root})
    foreach(dir ${import_dirs})
      list(APPEND include_args -I${dir})
    endforeach()
    list(REMOVE_DUPLICATES include_args)

    # protoc's depfile names the outputs in sorted order, and Ninja takes it for this command's
    # only if its first output is the command's first.
    list(SORT outputs)
    # protoc writes the depfile but does not make its directory.
    set(depfile ${FG_OUT_DIR}/${stem}.proto.d)
    get_filename_component(depfile_dir ${depfile} DIRECTORY)
    add_custom_command(
      OUTPUT ${outputs}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${FG_OUT_DIR} ${depfile_dir}
      COMMAND protobuf::protoc ${include_args} --cpp_out=${lite}${FG_OUT_DIR} ${plugin_args}
              --dependency_out=${depfile} ${abs_proto}
      DEPENDS ${abs_proto} protobuf::protoc ${plugin_depends}
      DEPFILE ${depfile}
      COMMENT "ferry_generate: ${rel}"
      VERBATIM)
    list(APPEND generated ${outputs})
  endforeach()

  target_sources(${FG_TARGET} PRIVATE ${generated})
  # protoc's .pb.cc files define the same file-level names: never batched into one unity source.
  set_source_files_properties(${generated} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
  target_include_directories(${FG_TARGET} PUBLIC $<BUILD_INTERFACE:${FG_OUT_DIR}>)
  if(FG_MESSAGES_ONLY)
    target_link_libraries(${FG_TARGET} PUBLIC protobuf::libprotobuf)
  else()
    target_link_libraries(${FG_TARGET} PUBLIC ferry::ferry protobuf::libprotobuf)
  endif()
  # Every target given generated code, once, in the order of the calls (ferry's own build reads
  # it to give its tests' generated code a precompiled header).
  get_property(targets GLOBAL PROPERTY FERRY_GENERATE_TARGETS)
  if(NOT FG_TARGET IN_LIST targets)
    set_property(GLOBAL APPEND PROPERTY FERRY_GENERATE_TARGETS ${FG_TARGET})
  endif()
endfunction()
cmake_policy(POP)
