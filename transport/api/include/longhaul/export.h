// LONGHAUL_API marks what liblonghaul.so exports: the public API under include/longhaul/.
// Everything else in the shared library is hidden (it is built with hidden visibility and
// links the internal archives with --exclude-libs), so a program that embeds longhaul
// sees only these names and their ABI.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define LONGHAUL_API __attribute__((visibility("default")))
#else
#define LONGHAUL_API
#endif
