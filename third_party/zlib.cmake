# zlib (Debian: zlib1g-dev): gzip per-message compression (grpc-encoding: gzip). CMake's own
# FindZLIB defines ZLIB::ZLIB.
find_package(ZLIB REQUIRED)
