// One name table per enum: the spelling used by the command line, the trace, the checkpoint and
// the golden config, written once. An enum E opts in by specialising EnumNames<E> with a
// `values` array of {value, name} pairs (see core/model/model_config.h).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace reftrain {

template <typename E>
struct NamedValue {
  E value;
  const char* name;
};

template <typename E>
struct EnumNames;  // specialised per enum: static constexpr NamedValue<E> values[] = {...};

// The name of `v`; every value of a table has one.
template <typename E>
const char* enum_name(E v) {
  for (const NamedValue<E>& nv : EnumNames<E>::values) {
    if (nv.value == v) return nv.name;
  }
  return "?";
}

// The value spelled `name`; false when no value has that name.
template <typename E>
bool enum_from_name(const std::string& name, E* out) {
  for (const NamedValue<E>& nv : EnumNames<E>::values) {
    if (name == nv.name) return *out = nv.value, true;
  }
  return false;
}

// Every name, in table order (what a command-line option accepts).
template <typename E>
std::vector<std::string> enum_names() {
  std::vector<std::string> names;
  for (const NamedValue<E>& nv : EnumNames<E>::values) names.push_back(nv.name);
  return names;
}

// "a, b or c": the names for an error message.
template <typename E>
std::string enum_choices() {
  const std::vector<std::string> names = enum_names<E>();
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) {
    s += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  }
  return s;
}

}  // namespace reftrain
