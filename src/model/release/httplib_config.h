// cpp-httplib as Debian compiles it. libcpp-httplib.so is built with OpenSSL, zlib and Brotli support, and those
// macros change the layout of httplib's classes: every translation unit must see the same ones (pkg-config
// cpp-httplib --cflags), or objects are shared between two different layouts (garbage values, crashes).
#pragma once
#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT
#endif
#ifndef CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT
#endif
#ifndef CPPHTTPLIB_BROTLI_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT
#endif
#include <httplib.h>
