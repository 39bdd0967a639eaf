// glibc compatibility of the bundle's binaries: definitions that keep them loadable on a
// glibc older than the build machine's (Debian 12, 2.36), down to 2.35 (docs/nccl-runs.md,
// section 4.1).
//
// arc4random (GLIBC_2.36) is what the statically linked libstdc++ (GCC 12) calls for
// std::random_device; this definition, hidden by the plugin's version script and
// internal to the emulator, satisfies it from getrandom(2) (GLIBC_2.25), so the binaries
// carry no GLIBC_2.36 reference. tests/nccl/bundle_test.py checks the symbol versions.
//
// Thread-safety: reentrant.
#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>

extern "C" uint32_t arc4random(void) {
  uint32_t v = 0;
  for (;;) {
    const ssize_t n = getrandom(&v, sizeof(v), 0);
    if (n == static_cast<ssize_t>(sizeof(v))) return v;
    // getrandom of 4 bytes only fails when interrupted (it blocks only until the entropy
    // pool is initialised, once per boot); anything else is a broken kernel or sandbox.
    if (n < 0 && errno != EINTR) abort();
  }
}
