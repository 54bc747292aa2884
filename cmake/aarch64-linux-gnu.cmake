# Cross build for AArch64 Linux with Debian's cross compiler
# (g++-aarch64-linux-gnu) and the arm64 libraries of a multiarch install
# (dpkg --add-architecture arm64); tests run under qemu-user.
# Used by scripts/cross_test.sh.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Headers and CMake packages from the host prefix (multiarch keeps arm64
# libraries in /usr/lib/aarch64-linux-gnu), never host programs' libraries.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
# Test discovery and ctest run the binaries through the emulator, with the
# arm64 C library of the multiarch install (libc6:arm64) and its loader,
# not the cross toolchain's copy: mixing the two hangs pthread_create.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
