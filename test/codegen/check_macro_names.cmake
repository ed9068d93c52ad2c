# The codegen_macro_names test: a method named as a macro must get a C++ name the macro cannot
# replace. Generates corpus/names.proto, preprocesses its .ferry.h together with the C
# library's headers (-std=gnu++20, where linux and unix are macros too) to list every macro the
# generated code's translation unit defines whose name starts with a lower-case letter (the
# names a method can plausibly have), then generates a service with one method per macro and
# checks that each method's C++ name is escaped with a trailing _.
#
#   cmake -DCXX=<compiler> -DFERRY_INCLUDE=<include/> -DPROTOC=<protoc> -DPLUGIN=<plugin>
#         -DPROTO_ROOT=<test/codegen> -DWKT_DIR=<dir> -DWORK_DIR=<dir> -P check_macro_names.cmake

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
execute_process(
  COMMAND ${PROTOC} -I${PROTO_ROOT} -I${WKT_DIR} --plugin=protoc-gen-ferry=${PLUGIN}
          --cpp_out=${WORK_DIR} --ferry_out=${WORK_DIR} ${PROTO_ROOT}/corpus/names.proto
  RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "protoc on corpus/names.proto failed: ${err}")
endif()

set(tu ${WORK_DIR}/macros.cc)
file(WRITE ${tu} "#include \"corpus/names.ferry.h\"\n")
foreach(header cassert cerrno cfenv cfloat cinttypes climits clocale cmath csetjmp csignal
               cstdarg cstddef cstdint cstdio cstdlib cstring ctime cwchar)
  file(APPEND ${tu} "#include <${header}>\n")
endforeach()
execute_process(COMMAND ${CXX} -std=gnu++20 -I${FERRY_INCLUDE} -I${WORK_DIR} -dM -E ${tu}
                RESULT_VARIABLE rc OUTPUT_VARIABLE defines ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "preprocessing ${tu} failed: ${err}")
endif()
string(REGEX MATCHALL "#define [a-z][A-Za-z0-9_]*" names "${defines}")
list(TRANSFORM names REPLACE "^#define " "")
list(REMOVE_DUPLICATES names)
list(SORT names)
list(LENGTH names count)
if(count LESS 10)
  message(FATAL_ERROR "only ${count} lower-case macros found; is the preprocessing right?")
endif()

file(WRITE ${WORK_DIR}/macros/macros.proto
     "syntax = \"proto3\";\npackage macros;\nimport \"google/protobuf/empty.proto\";\n"
     "service Macros {\n")
foreach(name ${names})
  file(APPEND ${WORK_DIR}/macros/macros.proto
       "  rpc ${name}(google.protobuf.Empty) returns (google.protobuf.Empty);\n")
endforeach()
file(APPEND ${WORK_DIR}/macros/macros.proto "}\n")
execute_process(
  COMMAND ${PROTOC} -I${WORK_DIR} -I${WKT_DIR} --plugin=protoc-gen-ferry=${PLUGIN}
          --ferry_out=${WORK_DIR} ${WORK_DIR}/macros/macros.proto
  RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "protoc on the macros' service failed: ${err}")
endif()
file(READ ${WORK_DIR}/macros/macros.ferry.h header)
set(unescaped)
foreach(name ${names})
  if(NOT header MATCHES "> ${name}_\\(\n")
    list(APPEND unescaped ${name})
  endif()
endforeach()
if(unescaped)
  list(JOIN unescaped " " unescaped)
  message(FATAL_ERROR "methods named as these macros keep their name in C++ (add them to "
                      "macros() in src/codegen/ferry_generator.cc): ${unescaped}")
endif()
message("all ${count} lower-case macros are escaped: ${names}")
