# llhttp (Debian: node-llhttp, its C sources): HTTP/1.1 parsing for gRPC-Web and Connect over
# HTTP/1.1, strict (no lenient flag is ever set); cmake/FindLlhttp.cmake defines llhttp::llhttp,
# imported from a built libllhttp or built here from the sources. Built here, it is installed
# with ferry (ferry::llhttp, in ferry's export) so that a static libferry still links for its
# users; imported, the installed ferryConfig.cmake finds it again.
find_package(Llhttp 8 REQUIRED)
if(Llhttp_FROM_SOURCES)
  set(FERRY_LLHTTP_IMPORTED FALSE)
else()
  set(FERRY_LLHTTP_IMPORTED TRUE)
endif()
