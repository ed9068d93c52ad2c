# The codegen_refusals test: each test/codegen/refused/*.proto is a name or option
# protoc-gen-ferry cannot generate code for; protoc must fail on it with the message its
# `// expect: <regex>` line gives (a file whose line says `ok` must generate). Prints every
# mismatch, then fails if there was one.
#
#   cmake -DPROTOC=<protoc> -DPLUGIN=<protoc-gen-ferry> -DPROTO_ROOT=<test/codegen>
#         -DWKT_DIR=<dir of google/protobuf/*.proto> -DWORK_DIR=<dir> -P check_refusals.cmake

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
file(GLOB protos RELATIVE ${PROTO_ROOT} ${PROTO_ROOT}/refused/*.proto)
list(LENGTH protos count)
if(count EQUAL 0)
  message(FATAL_ERROR "no protos in ${PROTO_ROOT}/refused")
endif()

set(failures 0)
foreach(proto ${protos})
  file(STRINGS ${PROTO_ROOT}/${proto} expect REGEX "^// expect: " LIMIT_COUNT 1)
  string(REGEX REPLACE "^// expect: " "" expect "${expect}")
  if(expect STREQUAL "")
    message(SEND_ERROR "${proto}: no `// expect:` line")
    math(EXPR failures "${failures} + 1")
    continue()
  endif()
  execute_process(
    COMMAND ${PROTOC} -I${PROTO_ROOT} -I${WKT_DIR} --plugin=protoc-gen-ferry=${PLUGIN}
            --ferry_out=${WORK_DIR} ${PROTO_ROOT}/${proto}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(STRIP "${out}${err}" said)
  if(expect MATCHES "^ok")
    if(NOT rc EQUAL 0)
      message("FAIL ${proto}: should generate, protoc said: ${said}")
      math(EXPR failures "${failures} + 1")
    else()
      message("ok   ${proto}: generates")
    endif()
  elseif(rc EQUAL 0)
    message("FAIL ${proto}: generated; expected the refusal /${expect}/")
    math(EXPR failures "${failures} + 1")
  elseif(NOT said MATCHES "${expect}")
    message("FAIL ${proto}: protoc said: ${said}\n     expected /${expect}/")
    math(EXPR failures "${failures} + 1")
  else()
    message("ok   ${proto}: ${said}")
  endif()
endforeach()
if(failures GREATER 0)
  message(FATAL_ERROR "${failures} of ${count} refused protos did not fail as expected")
endif()
