#pragma once
// Checks a SimGrid XML platform before SimGrid reads it. SimGrid 3.32 ends the process (abort or
// segfault, which no exception handler sees) on files that parse but are inconsistent: a route
// declared twice, two links of one name, an unknown routing model, no route between two hosts
// of a Full zone, a state file, an infinite speed. These, and zero, negative, infinite or
// denormal speeds and bandwidths, become UserErrors naming file:line and the element.
// No SimGrid here: the file is read by a small XML reader of its own.
#include <cstdint>
#include <string>

namespace syncopate::sim::detail {

// At most this many hosts (those of <cluster radical="..."> included), as recipes.
inline constexpr int64_t kMaxXmlHosts = 1 << 20;

// Throws UserError "source:line: <element id=...>: what" on the first problem found; returns
// the number of hosts the file declares.
int64_t check_simgrid_xml(const std::string& text, const std::string& source);

// check_simgrid_xml on the content of a file.
int64_t check_simgrid_xml_file(const std::string& path);

}  // namespace syncopate::sim::detail
