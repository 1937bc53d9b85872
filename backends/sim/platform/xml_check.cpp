// Checking a SimGrid XML platform before SimGrid reads it: a small XML reader (elements and
// attributes, no recursion) and the rules SimGrid 3.32 would otherwise enforce by aborting.
#include "backends/sim/platform/xml_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "core/base/check.hpp"

namespace syncopate::sim::detail {
namespace {

constexpr size_t kMaxDepth = 64;  // zones nest a few levels deep; SimGrid's reader keeps a stack

struct Element {
  std::string name;
  int line = 0;
  int parent = -1;
  std::vector<std::pair<std::string, std::string>> attributes;
  std::vector<int> children;

  const std::string* attribute(std::string_view key) const {
    for (const auto& [name_, value] : attributes)
      if (name_ == key) return &value;
    return nullptr;
  }
};

bool is_name_char(char c, bool first) {
  const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
  return letter || (!first && ((c >= '0' && c <= '9') || c == '-' || c == '.'));
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Reads the elements of an XML document into a flat list (element 0 is the root).
class XmlReader {
 public:
  XmlReader(const std::string& text, const std::string& source) : text_(text), source_(source) {}

  std::vector<Element> read() {
    while (pos_ < text_.size()) {
      if (text_[pos_] != '<') {
        if (!is_space(text_[pos_]) && stack_.empty()) fail("text outside the root element");
        advance(1);
      } else if (starts("<?")) {
        skip_past("?>");
      } else if (starts("<!--")) {
        skip_past("-->");
      } else if (starts("<![CDATA[")) {
        skip_past("]]>");
      } else if (starts("<!")) {
        skip_declaration();
      } else if (starts("</")) {
        close_element();
      } else {
        open_element();
      }
    }
    if (!stack_.empty()) fail("the file ends inside <" + elements_[stack_.back()].name + ">");
    if (elements_.empty()) fail("no root element");
    return std::move(elements_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw UserError(source_ + ":" + std::to_string(line_) + ": XML: " + what);
  }
  bool starts(std::string_view prefix) const {
    return std::string_view(text_).substr(pos_).starts_with(prefix);
  }
  void advance(size_t n) {
    for (size_t end = std::min(text_.size(), pos_ + n); pos_ < end; ++pos_)
      if (text_[pos_] == '\n') ++line_;
  }
  void skip_past(std::string_view end) {
    const size_t found = text_.find(end, pos_);
    if (found == std::string::npos)
      fail("unterminated '" + std::string(text_.substr(pos_, 4)) + "'");
    advance(found + end.size() - pos_);
  }
  void skip_declaration() {  // <!DOCTYPE ...>, possibly with an internal subset [ ... ]
    const size_t bracket = text_.find('[', pos_), close = text_.find('>', pos_);
    if (bracket != std::string::npos && bracket < close) {
      skip_past("]");
    }
    skip_past(">");
  }
  void skip_spaces() {
    while (pos_ < text_.size() && is_space(text_[pos_])) advance(1);
  }
  std::string read_name() {
    const size_t start = pos_;
    while (pos_ < text_.size() && is_name_char(text_[pos_], pos_ == start)) ++pos_;
    if (pos_ == start) fail("expected a name");
    return text_.substr(start, pos_ - start);
  }
  std::string read_value();
  void open_element();
  void close_element();

  const std::string& text_;
  const std::string& source_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Element> elements_;
  std::vector<int> stack_;
};

std::string XmlReader::read_value() {
  if (pos_ >= text_.size() || (text_[pos_] != '"' && text_[pos_] != '\'')) {
    fail("expected a quoted attribute value");
  }
  const char quote = text_[pos_];
  const size_t end = text_.find(quote, pos_ + 1);
  if (end == std::string::npos) fail("unterminated attribute value");
  std::string raw = text_.substr(pos_ + 1, end - pos_ - 1);
  if (raw.find('<') != std::string::npos) fail("'<' in an attribute value");
  advance(end + 1 - pos_);
  std::string value;
  static const std::pair<std::string_view, char> kEntities[] = {
      {"&lt;", '<'}, {"&gt;", '>'}, {"&amp;", '&'}, {"&quot;", '"'}, {"&apos;", '\''}};
  for (size_t i = 0; i < raw.size(); ++i) {
    bool replaced = false;
    for (const auto& [entity, c] : kEntities) {
      if (std::string_view(raw).substr(i).starts_with(entity)) {
        value.push_back(c);
        i += entity.size() - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) value.push_back(raw[i]);
  }
  return value;
}

void XmlReader::open_element() {
  advance(1);
  Element element;
  element.line = line_;
  element.name = read_name();
  element.parent = stack_.empty() ? -1 : stack_.back();
  if (stack_.empty() && !elements_.empty()) fail("a second root element <" + element.name + ">");
  for (;;) {
    skip_spaces();
    if (pos_ >= text_.size()) fail("the file ends inside <" + element.name + ">");
    if (starts("/>") || starts(">")) break;
    std::string key = read_name();
    skip_spaces();
    if (!starts("=")) fail("attribute " + key + " of <" + element.name + "> has no value");
    advance(1);
    skip_spaces();
    if (element.attribute(key) != nullptr) fail("attribute " + key + " given twice");
    element.attributes.emplace_back(std::move(key), read_value());
  }
  const bool empty = starts("/>");
  advance(empty ? 2 : 1);
  const int index = static_cast<int>(elements_.size());
  if (element.parent >= 0) elements_[static_cast<size_t>(element.parent)].children.push_back(index);
  elements_.push_back(std::move(element));
  if (!empty) {
    if (stack_.size() >= kMaxDepth) fail("elements nested more than 64 deep");
    stack_.push_back(index);
  }
}

void XmlReader::close_element() {
  advance(2);
  const std::string name = read_name();
  skip_spaces();
  if (!starts(">")) fail("expected '>' after </" + name);
  advance(1);
  if (stack_.empty() || elements_[static_cast<size_t>(stack_.back())].name != name)
    fail("</" + name + "> closes no open <" + name + ">");
  stack_.pop_back();
}

// ---- The rules ----------------------------------------------------------------------------

class Checker {
 public:
  Checker(std::vector<Element> elements, const std::string& source)
      : elements_(std::move(elements)), source_(source) {}
  void run();
  int64_t hosts() const { return hosts_; }

 private:
  [[noreturn]] void fail(const Element& e, const std::string& what) const {
    const std::string* id = e.attribute("id");
    throw UserError(source_ + ":" + std::to_string(e.line) + ": <" + e.name +
                    (id != nullptr ? " id=\"" + *id + "\"" : "") + ">: " + what);
  }
  void check_element(const Element& e);
  void check_quantities(const Element& e);
  void check_zone(const Element& zone);
  void check_full_routes(const Element& zone, const std::set<std::pair<std::string, std::string>>&);
  void check_connected(const Element& zone, const std::set<std::pair<std::string, std::string>>&);
  std::vector<std::string> endpoints(const Element& zone) const;  // its hosts, routers, zones

  void count_hosts(const Element& e);

  std::vector<Element> elements_;
  const std::string& source_;
  std::set<std::string> netpoints_, links_;
  int64_t hosts_ = 0;
};

const std::set<std::string, std::less<>> kElements = {
    "platform",     "zone",      "AS",       "host",        "prop",
    "link",         "route",     "link_ctn", "zoneRoute",   "ASroute",
    "router",       "cluster",   "cabinet",  "peer",        "backbone",
    "config",       "host_link", "disk",     "bypassRoute", "bypassZoneRoute",
    "bypassASroute"};
const std::set<std::string, std::less<>> kRoutings = {
    "Full", "Floyd", "Dijkstra", "DijkstraCache", "None", "Vivaldi", "Cluster", "Wifi"};
const std::set<std::string, std::less<>> kZones = {"zone", "AS", "cluster"};

bool is_route(const Element& e) {
  return e.name == "route" || e.name == "zoneRoute" || e.name == "ASroute";
}

void Checker::run() {
  if (elements_[0].name != "platform") fail(elements_[0], "the root element must be <platform>");
  for (const Element& e : elements_) check_element(e);
  for (const Element& e : elements_)
    if (e.name == "zone" || e.name == "AS") check_zone(e);
}

void Checker::check_element(const Element& e) {
  if (e.name == "trace" || e.name == "trace_connect")
    fail(e, "traces (availability or state changes over time) are not supported");
  if (!kElements.contains(e.name)) fail(e, "unknown or unsupported element");
  for (const auto& [key, value] : e.attributes) {
    if (key.ends_with("_file"))
      fail(e, key + ": files of speed, bandwidth, latency or state changes are not supported");
  }
  if (e.parent >= 0 && e.name == "platform") fail(e, "<platform> inside another element");
  const std::string* id = e.attribute("id");
  const bool netpoint =
      e.name == "host" || e.name == "router" || e.name == "peer" || kZones.contains(e.name);
  if (netpoint && id != nullptr && !netpoints_.insert(*id).second)
    fail(e, "a host, router or zone of this name is declared twice");
  if ((e.name == "link" || e.name == "backbone") && id != nullptr && !links_.insert(*id).second)
    fail(e, "a link of this name is declared twice");
  if (e.name == "zone" || e.name == "AS") {
    const std::string* routing = e.attribute("routing");
    if (routing == nullptr || !kRoutings.contains(*routing))
      fail(e, "routing=\"" + (routing ? *routing : "") +
                  "\": unknown routing model; allowed: Full, Floyd, Dijkstra, DijkstraCache, None, "
                  "Vivaldi, Cluster, Wifi");
  }
  check_quantities(e);
  count_hosts(e);
}

// A host, or a cluster's or cabinet's hosts: radical="0-15,32" (ranges and single numbers).
void Checker::count_hosts(const Element& e) {
  if (e.name == "host" || e.name == "peer") ++hosts_;
  const std::string* radical = e.attribute("radical");
  if (radical != nullptr && (e.name == "cluster" || e.name == "cabinet")) {
    std::stringstream list(*radical);
    for (std::string item; std::getline(list, item, ',');) {
      const size_t dash = item.find('-');
      const long long first = std::strtoll(item.c_str(), nullptr, 10);
      const long long last =
          dash == std::string::npos ? first : std::strtoll(item.c_str() + dash + 1, nullptr, 10);
      if (first < 0 || last < first || last - first >= kMaxXmlHosts)
        fail(e, "radical=\"" + *radical + "\": expected ranges like \"0-15,32\"");
      hosts_ += last - first + 1;
      if (hosts_ > kMaxXmlHosts) break;
    }
  }
  if (hosts_ > kMaxXmlHosts)
    fail(e, "more than " + std::to_string(kMaxXmlHosts) + " hosts in the platform");
}

// A number with SimGrid's units (read with strtod, as SimGrid does), in base units: flop/s,
// bytes/s or seconds. An unknown unit is left for SimGrid to refuse (scale 1).
double in_base_units(const std::string& text) {
  char* end = nullptr;
  const double number = std::strtod(text.c_str(), &end);
  std::string_view unit(end);
  while (!unit.empty() && is_space(unit.back())) unit.remove_suffix(1);
  double base = 1;
  for (const auto& [suffix, scale] : {std::pair<std::string_view, double>{"flops", 1},
                                      {"f", 1},
                                      {"Bps", 1},
                                      {"bps", 0.125},
                                      {"s", 1}}) {
    if (unit.ends_with(suffix)) {
      unit.remove_suffix(suffix.size());
      base = scale;
      break;
    }
  }
  static const std::map<std::string_view, double> kPrefixes = {
      {"", 1},        {"k", 1e3},      {"K", 1e3},      {"M", 1e6},     {"G", 1e9},
      {"T", 1e12},    {"P", 1e15},     {"E", 1e18},     {"Z", 1e21},    {"Y", 1e24},
      {"Ki", 1024.},  {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 0x1p40}, {"Pi", 0x1p50},
      {"Ei", 0x1p60}, {"Zi", 0x1p70},  {"Yi", 0x1p80},  {"m", 1e-3},    {"u", 1e-6},
      {"n", 1e-9},    {"p", 1e-12},    {"h", 3600},     {"d", 86400},   {"w", 604800}};
  const auto prefix = kPrefixes.find(unit);
  return number * base * (prefix == kPrefixes.end() ? 1 : prefix->second);
}

// Speeds and bandwidths must be positive, latencies >= 0; all finite and not denormal, whatever
// the unit (SimGrid's units scale by 1e-12 to 1e24).
void Checker::check_quantities(const Element& e) {
  static const std::map<std::string, std::vector<std::pair<std::string, bool>>, std::less<>>
      kQuantities = {
          // element -> (attribute, may be zero)
          {"host", {{"speed", false}}},
          {"link", {{"bandwidth", false}, {"latency", true}}},
          {"backbone", {{"bandwidth", false}, {"latency", true}}},
          {"cluster",
           {{"speed", false},
            {"bw", false},
            {"lat", true},
            {"bb_bw", false},
            {"bb_lat", true},
            {"loopback_bw", false},
            {"loopback_lat", true},
            {"limiter_link", false}}},
          {"cabinet", {{"speed", false}, {"bw", false}, {"lat", true}}},
          {"peer", {{"speed", false}, {"bw_in", false}, {"bw_out", false}, {"lat", true}}}};
  const auto found = kQuantities.find(e.name);
  if (found == kQuantities.end()) return;
  for (const auto& [key, zero_ok] : found->second) {
    const std::string* value = e.attribute(key);
    if (value == nullptr) continue;
    std::stringstream list(*value);  // a host's speed may list one per power state
    for (std::string item; std::getline(list, item, ',');) {
      const double number = in_base_units(item);
      const bool ok = (zero_ok && number == 0) || (zero_ok ? number >= 1e-15 && number <= 1e9
                                                           : number >= 1e-6 && number <= 1e30);
      if (!ok)
        fail(e, key + "=\"" + *value + "\": must be " +
                    (zero_ok ? "0 or 1e-15 to 1e9 s" : "1e-6 to 1e30") +
                    " in base units (beyond, simulated durations are not finite)");
    }
  }
}

std::vector<std::string> Checker::endpoints(const Element& zone) const {
  std::vector<std::string> out;
  for (const int child : zone.children) {
    const Element& e = elements_[static_cast<size_t>(child)];
    const std::string* id = e.attribute("id");
    if (id != nullptr && (e.name == "host" || e.name == "router" || kZones.contains(e.name)))
      out.push_back(*id);
  }
  return out;
}

void Checker::check_zone(const Element& zone) {
  const std::string routing = *zone.attribute("routing");
  std::set<std::pair<std::string, std::string>> routes;
  for (const int child : zone.children) {
    const Element& route = elements_[static_cast<size_t>(child)];
    if (!is_route(route)) continue;
    if (routing == "None") fail(route, "a zone with routing=\"None\" can hold no route");
    const std::string* src = route.attribute("src");
    const std::string* dst = route.attribute("dst");
    if (src == nullptr || dst == nullptr) fail(route, "a route needs src and dst");
    for (const std::string* end : {src, dst})
      if (!netpoints_.contains(*end)) fail(route, "'" + *end + "' names no host, router or zone");
    const std::string* symmetrical = route.attribute("symmetrical");
    const bool both = symmetrical == nullptr || (*symmetrical != "NO" && *symmetrical != "no");
    if (!routes.emplace(*src, *dst).second || (both && !routes.emplace(*dst, *src).second))
      fail(route, "the route between " + *src + " and " + *dst +
                      " is declared twice (routes are symmetrical unless symmetrical=\"NO\")");
  }
  if (routing == "None" && endpoints(zone).size() > 1)
    fail(zone, "routing=\"None\" joins nothing: its " + std::to_string(endpoints(zone).size()) +
                   " hosts, routers or zones could not reach each other");
  if (routing == "Full") check_full_routes(zone, routes);
  if (routing == "Floyd" || routing == "Dijkstra" || routing == "DijkstraCache")
    check_connected(zone, routes);
}

void Checker::check_full_routes(const Element& zone,
                                const std::set<std::pair<std::string, std::string>>& routes) {
  const std::vector<std::string> ends = endpoints(zone);
  if (ends.size() > 1 && routes.empty())
    fail(zone, "routing=\"Full\" with " + std::to_string(ends.size()) +
                   " hosts, routers or zones and no route");
  for (const std::string& a : ends)
    for (const std::string& b : ends)
      if (a != b && !routes.contains({a, b}))
        fail(zone, "routing=\"Full\": no route from " + a + " to " + b);
}

void Checker::check_connected(const Element& zone,
                              const std::set<std::pair<std::string, std::string>>& routes) {
  std::map<std::string, std::vector<std::string>> next;
  for (const auto& [a, b] : routes) next[a].push_back(b);
  const std::vector<std::string> ends = endpoints(zone);
  for (const std::string& from : ends) {
    std::set<std::string> seen = {from};
    std::vector<std::string> todo = {from};
    while (!todo.empty()) {
      const std::string at = todo.back();
      todo.pop_back();
      for (const std::string& to : next[at])
        if (seen.insert(to).second) todo.push_back(to);
    }
    for (const std::string& to : ends)
      if (!seen.contains(to))
        fail(zone,
             "routing=\"" + *zone.attribute("routing") + "\": no path from " + from + " to " + to);
  }
}

}  // namespace

int64_t check_simgrid_xml(const std::string& text, const std::string& source) {
  Checker checker(XmlReader(text, source).read(), source);
  checker.run();
  return checker.hosts();
}

int64_t check_simgrid_xml_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(path + ": cannot open the platform file");
  std::ostringstream text;
  text << in.rdbuf();
  return check_simgrid_xml(text.str(), path);
}

}  // namespace syncopate::sim::detail
