# google-benchmark (Debian: libbenchmark-dev), benchmarks only. Ships a CMake config.
find_package(benchmark CONFIG REQUIRED)
