# grpc++ (Debian: libgrpc++-dev), optional: only a benchmark baseline and a test peer, never
# linked into ferry itself. FERRY_HAVE_GRPCPP says whether it was found.
find_package(gRPC CONFIG QUIET)
if(TARGET gRPC::grpc++)
  set(FERRY_HAVE_GRPCPP ON)
  message(STATUS "ferry: grpc++ ${gRPC_VERSION} found: grpc++ baselines enabled")
else()
  set(FERRY_HAVE_GRPCPP OFF)
  message(STATUS "ferry: grpc++ not found: grpc++ baselines disabled")
endif()
