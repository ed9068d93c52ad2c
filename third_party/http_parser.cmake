# http-parser (Debian: libhttp-parser-dev): HTTP/1.1 request parsing for gRPC-Web and Connect over
# HTTP/1.1; cmake/FindHttpParser.cmake defines HttpParser::HttpParser.
find_package(HttpParser 2.9 REQUIRED)
