# abseil-cpp (Debian: libabsl-dev): absl::Status across the API, containers. Ships a CMake config.
find_package(absl CONFIG REQUIRED)
