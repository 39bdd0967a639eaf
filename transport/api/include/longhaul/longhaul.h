// longhaul: a user-space transport for long fat links. The one header an application
// includes; link with liblonghaul (CMake: find_package(longhaul CONFIG REQUIRED) and
// target longhaul::longhaul; pkg-config: longhaul). docs/install.md.
#pragma once

#include "longhaul/endpoint.h"  // IWYU pragma: export
#include "longhaul/export.h"    // IWYU pragma: export
#include "longhaul/version.h"   // IWYU pragma: export
