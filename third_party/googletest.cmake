# googletest (Debian: libgtest-dev, libgmock-dev), tests only. Ships a CMake config (GTest::gtest).
find_package(GTest CONFIG REQUIRED)
