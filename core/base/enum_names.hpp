#pragma once
// One name table per enum: the names that files, errors, summaries and to_string() share. A table
// is a constexpr array of (value, name) pairs, in enum order; these look-ups work on any of them.
#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace syncopate {

template <typename E, size_t N>
using NameTable = std::array<std::pair<E, std::string_view>, N>;

template <typename E, size_t N>
constexpr std::string_view name_in(const NameTable<E, N>& table, E value) {
  for (const auto& [v, name] : table)
    if (v == value) return name;
  return "?";
}

template <typename E, size_t N>
constexpr std::optional<E> value_in(const NameTable<E, N>& table, std::string_view name) {
  for (const auto& [v, n] : table)
    if (n == name) return v;
  return std::nullopt;
}

// "a, b, c": the allowed values, for error messages.
template <typename E, size_t N>
std::string names_in(const NameTable<E, N>& table) {
  std::string out;
  for (const auto& [v, name] : table) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

}  // namespace syncopate
