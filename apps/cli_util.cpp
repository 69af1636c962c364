#include "apps/cli_util.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <variant>

#include "core/base/error.h"

namespace reftrain {

namespace {

CLI::Validator number_at_least(double lo, bool strict, const std::string& what) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double x = 0;
        if (!CLI::detail::lexical_cast(text, x)) return printable(text) + " is not a number";
        if (!(strict ? x > lo : x >= lo)) return printable(text) + " is not " + what;
        return "";
      },
      "NUMBER " + what, what);
}

}  // namespace

CLI::Validator non_negative_number() {
  return number_at_least(0, false, ">= 0");
}
CLI::Validator positive_number() {
  return number_at_least(0, true, "> 0");
}

uint64_t parse_seed(const std::string& text) {
  const bool digits = !text.empty() && text.size() <= 20 &&
                      text.find_first_not_of("0123456789") == std::string::npos;
  errno = 0;
  const unsigned long long v = digits ? std::strtoull(text.c_str(), nullptr, 10) : 0;
  if (!digits || errno == ERANGE) {
    throw usage_error("--seed " + text + " is not an integer in [0, 18446744073709551615]");
  }
  return v;
}

void add_field_option(CLI::App& app, const TrainField& field, TrainConfig& numbers,
                      FieldOption& o) {
  o.field = &field;
  const std::string flag = field_flag(field);
  std::visit(
      [&](auto m) {
        using M = decltype(m);
        if constexpr (std::is_same_v<M, TrainField::Int>) {
          o.option = app.add_option(flag, numbers.*m.member, field.help);
        } else if constexpr (std::is_same_v<M, float TrainConfig::*>) {
          o.option = app.add_option(flag, numbers.*m, field.help);
        } else if constexpr (std::is_same_v<M, uint64_t TrainConfig::*>) {
          o.option = app.add_option(flag, o.text, field.help);
        } else {
          using E = std::remove_reference_t<decltype(numbers.*m)>;
          o.option =
              app.add_option(flag, o.text, field.help)->check(CLI::IsMember(enum_names<E>()));
        }
      },
      field.member);
}

void apply_field_option(const FieldOption& o, const TrainConfig& numbers, TrainConfig& t) {
  if (!o.given()) return;
  std::visit(
      [&](auto m) {
        using M = decltype(m);
        if constexpr (std::is_same_v<M, TrainField::Int>) {
          t.*m.member = numbers.*m.member;
        } else if constexpr (std::is_same_v<M, float TrainConfig::*>) {
          t.*m = numbers.*m;
        } else if constexpr (std::is_same_v<M, uint64_t TrainConfig::*>) {
          t.*m = parse_seed(o.text);
        } else {
          enum_from_name(o.text, &(t.*m));  // CLI11 checked the name
        }
      },
      o.field->member);
}

std::function<void(int32_t)> token_printer(bool byte_tokens) {
  return [byte_tokens](int32_t token) {
    if (byte_tokens) {
      std::fputc(token, stdout);
    } else {
      std::printf(" %d", int(token));
    }
    std::fflush(stdout);
  };
}

}  // namespace reftrain
