# standalone asio (Debian: libasio-dev), header-only; cmake/FindAsio.cmake defines asio::asio.
find_package(Asio 1.18 REQUIRED)
