# nghttp2 (Debian: libnghttp2-dev): not a dependency of the library, which has its own HTTP/2
# engine (src/http2). The tests, benchmarks and fuzzers use it as an oracle: its HPACK decoder
# and encoder beside ferry's (hpack_test, the differential fuzzer, hpack_bench). Only found when
# one of them is built; cmake/FindNGHTTP2.cmake defines nghttp2::nghttp2.
if(FERRY_BUILD_TESTS OR FERRY_BUILD_BENCHMARKS OR FERRY_BUILD_FUZZERS)
  find_package(NGHTTP2 1.43 REQUIRED)
endif()
