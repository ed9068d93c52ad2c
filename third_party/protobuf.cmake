# protobuf + protoc + libprotoc (Debian: libprotobuf-dev, protobuf-compiler, libprotoc-dev).
# Debian's protobuf 3.21 ships no CMake config: CMake's own FindProtobuf module defines
# protobuf::libprotobuf, protobuf::libprotoc and protobuf::protoc.
find_package(Protobuf 3.21 REQUIRED)
