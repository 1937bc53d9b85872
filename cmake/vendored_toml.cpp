// toml++ compiled once for the vendored build (SYNCOPATE_VENDOR_DIR), as Debian's libtomlplusplus
// is for the system build: every other file includes its declarations only (TOML_HEADER_ONLY=0).
#define TOML_IMPLEMENTATION
#include <toml++/toml.h>
