# FindAsio: standalone (header-only) asio, as Debian's libasio-dev installs it.
# Standalone asio ships no CMake config, so this module defines the imported target asio::asio
# (ASIO_STANDALONE, plus Threads) that ferry and its consumers link.
find_path(Asio_INCLUDE_DIR NAMES asio.hpp)
if(Asio_INCLUDE_DIR AND EXISTS "${Asio_INCLUDE_DIR}/asio/version.hpp")
  file(STRINGS "${Asio_INCLUDE_DIR}/asio/version.hpp" _asio_version_line REGEX "#define ASIO_VERSION ")
  string(REGEX REPLACE ".*ASIO_VERSION ([0-9]+).*" "\\1" _asio_version_num "${_asio_version_line}")
  math(EXPR _asio_major "${_asio_version_num} / 100000")
  math(EXPR _asio_minor "${_asio_version_num} / 100 % 1000")
  math(EXPR _asio_patch "${_asio_version_num} % 100")
  set(Asio_VERSION "${_asio_major}.${_asio_minor}.${_asio_patch}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Asio REQUIRED_VARS Asio_INCLUDE_DIR VERSION_VAR Asio_VERSION)

if(Asio_FOUND AND NOT TARGET asio::asio)
  find_package(Threads REQUIRED)
  add_library(asio::asio INTERFACE IMPORTED)
  set_target_properties(asio::asio PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${Asio_INCLUDE_DIR}"
    INTERFACE_COMPILE_DEFINITIONS "ASIO_STANDALONE;ASIO_NO_DEPRECATED"
    INTERFACE_LINK_LIBRARIES Threads::Threads)
  # Under clang, asio 1.22 (Debian 12's) finds co_await only through libc++'s
  # <experimental/coroutine>; clang with libstdc++ has C++20's <coroutine>, which asio uses when
  # told so (asio defines neither macro when it is set already).
  set_property(TARGET asio::asio APPEND PROPERTY INTERFACE_COMPILE_DEFINITIONS
    "$<$<CXX_COMPILER_ID:Clang>:ASIO_HAS_CO_AWAIT>"
    "$<$<CXX_COMPILER_ID:Clang>:ASIO_HAS_STD_COROUTINE>")
endif()
mark_as_advanced(Asio_INCLUDE_DIR)
