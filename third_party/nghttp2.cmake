# nghttp2 (Debian: libnghttp2-dev): HTTP/2 framing and HPACK; cmake/FindNGHTTP2.cmake defines
# nghttp2::nghttp2.
find_package(NGHTTP2 1.43 REQUIRED)
