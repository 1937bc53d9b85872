#pragma once
// Where a Syncopate program finds the data shipped with it (platforms/, scenarios/): no path of
// the source tree is compiled in, so a build tree and an installation both work.
//   1. $SYNCOPATE_DATA_DIR, if set;
//   2. <folder of the running executable>/../share/syncopate (an installation: <prefix>/bin and
//      <prefix>/share/syncopate; a build tree: build/bin, and build/share/syncopate holds links
//      to the source folders, made by CMake).
#include <string>

namespace syncopate {

// The data folder; throws UserError naming the places it looked in if none exists.
std::string data_dir();

// data_dir()/<folder>, e.g. data_path("scenarios").
std::string data_path(const std::string& folder);

// A scenario file: `name_or_path` itself if it is a path (has a folder or an extension, or
// exists), else data_path("scenarios")/<name>.toml. Throws UserError listing the shipped
// scenarios when a name is unknown.
std::string find_scenario(const std::string& name_or_path);

}  // namespace syncopate
