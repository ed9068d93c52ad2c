# The layers_enforced test: the build, not a convention, keeps a layer from including a layer
# above it (CMakeLists.txt, "the library: one target per layer"). Compiles one-line files into
# layers with the very flags their own files get (build/layers/<layer>.flags): each include that
# a layer may make must compile, each upward (or sideways) one must fail because the header is
# not there. Prints the compiler's first error for each refused include.
#
#   cmake -DCXX=<compiler> -DLAYERS_DIR=<build>/layers -DWORK_DIR=<dir> -P check_layers.cmake

# "<layer> <header>": includes the layering allows. These make sure a refusal below is the
# layering's doing, not a broken setup.
set(allowed
  "call ferry/metadata.h"           # its own public header
  "call call/call_stream.h"         # its own private header, which includes http2/connection.h
  "server http2/connection.h"       # two layers down
  "client ferry/server_context.h")  # the one server header the client sees (from_server_context)
# "<layer> <header>": includes of a layer above (or beside) the including one.
set(refused
  "buffer ferry/frame.h"            # codec
  "codec transport/byte_stream.h"   # transport
  "transport http2/connection.h"    # http2
  "http2 ferry/metadata.h"          # call, public
  "http2 call/call_stream.h"        # call, private
  "call ferry/server.h"             # server, public
  "call ferry/interceptor.h"        # above the core (what src/call included before #24)
  "call server/server_call.h"       # server, private
  "call ferry/channel.h"            # client
  "server ferry/channel.h"          # client, beside the server
  "server client/client_call.h"
  "client ferry/server.h"           # server, beside the client
  "client server/server_call.h")

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

# Compiles `#include "<header>"` into <layer>; sets rc and err in the caller.
function(compile_into layer header)
  string(MAKE_C_IDENTIFIER "${layer}_${header}" stem)
  set(tu ${WORK_DIR}/${stem}.cc)
  file(WRITE ${tu} "#include \"${header}\"\n")
  execute_process(COMMAND ${CXX} @${LAYERS_DIR}/${layer}.flags -fsyntax-only ${tu}
                  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(rc ${result} PARENT_SCOPE)
  set(err "${out}${err}" PARENT_SCOPE)
endfunction()

set(failures 0)
foreach(case IN LISTS allowed)
  separate_arguments(case)
  list(GET case 0 layer)
  list(GET case 1 header)
  compile_into(${layer} ${header})
  if(rc EQUAL 0)
    message(STATUS "allowed: ${layer} includes ${header}: compiles")
  else()
    message(STATUS "FAIL: ${layer} may include ${header}, but it does not compile:\n${err}")
    math(EXPR failures "${failures} + 1")
  endif()
endforeach()
foreach(case IN LISTS refused)
  separate_arguments(case)
  list(GET case 0 layer)
  list(GET case 1 header)
  compile_into(${layer} ${header})
  # GCC: "fatal error: ferry/server.h: No such file or directory"; clang: "'ferry/server.h'
  # file not found".
  string(REGEX MATCH "[^\n]*(${header}: No such file or directory|'${header}' file not found)[^\n]*"
         error_line "${err}")
  if(NOT rc EQUAL 0 AND error_line)
    message(STATUS "refused: ${layer} includes ${header}: ${error_line}")
  elseif(rc EQUAL 0)
    message(STATUS "FAIL: ${layer} includes ${header}, a layer above it, and compiles")
    math(EXPR failures "${failures} + 1")
  else()
    message(STATUS "FAIL: ${layer} including ${header} fails, but not for want of it:\n${err}")
    math(EXPR failures "${failures} + 1")
  endif()
endforeach()
if(failures GREATER 0)
  message(FATAL_ERROR "layers_enforced: ${failures} failure(s)")
endif()
list(LENGTH allowed n_allowed)
list(LENGTH refused n_refused)
message(STATUS "layers_enforced: ${n_allowed} allowed includes compile, ${n_refused} upward "
               "includes refused")
