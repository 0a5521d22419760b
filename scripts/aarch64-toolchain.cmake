# CMake toolchain file for cross-compiling lmq to aarch64 Linux with the
# Debian cross toolchain (gcc-aarch64-linux-gnu). A full build also needs the
# arm64 -dev packages of libzstd, libxxhash, libcjson, libpcre2 and openblas;
# scripts/test-arm.sh does not need them (it builds the kernel test alone).
#   cmake -S . -B build-arm -DCMAKE_TOOLCHAIN_FILE=scripts/aarch64-toolchain.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu)
