# FindHttpParser: Node's http-parser (HTTP/1.1 request parsing), as Debian's libhttp-parser-dev
# installs it: a header and a library, with neither a CMake config nor a pkg-config file, so this
# module defines the imported target HttpParser::HttpParser.
find_path(HTTP_PARSER_INCLUDE_DIR NAMES http_parser.h)
find_library(HTTP_PARSER_LIBRARY NAMES http_parser)
if(HTTP_PARSER_INCLUDE_DIR AND EXISTS "${HTTP_PARSER_INCLUDE_DIR}/http_parser.h")
  file(STRINGS "${HTTP_PARSER_INCLUDE_DIR}/http_parser.h" _hp_version
       REGEX "#define HTTP_PARSER_VERSION_(MAJOR|MINOR|PATCH) [0-9]+")
  string(REGEX REPLACE ".*MAJOR ([0-9]+).*MINOR ([0-9]+).*PATCH ([0-9]+).*" "\\1.\\2.\\3"
         HttpParser_VERSION "${_hp_version}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(HttpParser
  REQUIRED_VARS HTTP_PARSER_LIBRARY HTTP_PARSER_INCLUDE_DIR VERSION_VAR HttpParser_VERSION)

if(HttpParser_FOUND AND NOT TARGET HttpParser::HttpParser)
  add_library(HttpParser::HttpParser UNKNOWN IMPORTED)
  set_target_properties(HttpParser::HttpParser PROPERTIES
    IMPORTED_LOCATION "${HTTP_PARSER_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${HTTP_PARSER_INCLUDE_DIR}")
endif()
mark_as_advanced(HTTP_PARSER_INCLUDE_DIR HTTP_PARSER_LIBRARY)
