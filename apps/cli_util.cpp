#include "apps/cli_util.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <variant>

#include "core/base/error.h"
#include "core/formats/atomic_file.h"
#include "core/formats/input_file.h"

namespace reftrain {

namespace {
// A value the user typed, quoted in a message (main's one_line escapes its control bytes and
// cuts it short).
std::string in_quotes(const std::string& text) {
  return "'" + text + "'";
}

std::string prefix(const std::string& flag) {
  return flag.empty() ? "" : flag + " ";
}

// A CLI11 validator runs `parse` on the option's text; a UserError becomes its message, which
// CLI11 reports as "FLAG: message" (a usage error, exit 2).
CLI::Validator validator(std::function<void(std::string&)> parse, const std::string& what) {
  return CLI::Validator(
      [parse](std::string& text) {
        try {
          parse(text);
          return std::string();
        } catch (const UserError& e) {
          return std::string(e.what());
        }
      },
      what);
}
}  // namespace

uint64_t parse_seed(const std::string& text) {
  const bool digits = !text.empty() && text.size() <= 20 &&
                      text.find_first_not_of("0123456789") == std::string::npos;
  errno = 0;
  const unsigned long long v = digits ? std::strtoull(text.c_str(), nullptr, 10) : 0;
  if (!digits || errno == ERANGE) {
    throw usage_error("--seed " + in_quotes(text) +
                      " is not an integer in [0, 18446744073709551615]");
  }
  return v;
}

int64_t parse_int(const std::string& flag, const std::string& text, int64_t lo, int64_t hi) {
  const size_t sign = !text.empty() && text[0] == '-' ? 1 : 0;
  const bool digits = text.size() > sign && text.size() <= sign + 19 &&
                      text.find_first_not_of("0123456789", sign) == std::string::npos;
  errno = 0;
  const long long v = digits ? std::strtoll(text.c_str(), nullptr, 10) : 0;
  if (!digits || errno == ERANGE || v < lo || v > hi) {
    throw usage_error(prefix(flag) + in_quotes(text) + " is not a decimal integer in [" +
                      std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return v;
}

double parse_real(const std::string& flag, const std::string& text, bool single_precision) {
  const auto bad = [&](const std::string& why) {
    throw usage_error(prefix(flag) + in_quotes(text) + " is not " + why);
  };
  const size_t digit = text.find_first_of("0123456789");
  if (text.empty() || digit == std::string::npos ||
      text.find_first_not_of("0123456789+-.eE") != std::string::npos) {
    bad("a decimal number");
  }
  char* end = nullptr;
  const double d = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) bad("a decimal number");
  const float f = float(d);
  if (!std::isfinite(d) || (single_precision && !std::isfinite(f))) {
    bad(single_precision ? "a finite number within the float range" : "a finite number");
  }
  // The mantissa's digits (before any exponent) say whether the text means a nonzero value.
  const std::string mantissa = text.substr(0, text.find_first_of("eE"));
  const bool nonzero_text = mantissa.find_first_of("123456789") != std::string::npos;
  if (nonzero_text && (d == 0.0 || (single_precision && f == 0.0f))) {
    bad("representable: it rounds to 0 (give 0 to mean 0)");
  }
  return d;
}

CLI::Validator one_of(const std::vector<std::string>& names) {
  std::string choices;
  for (size_t i = 0; i < names.size(); ++i) {
    choices += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  }
  return validator(
      [names, choices](std::string& text) {
        if (std::find(names.begin(), names.end(), text) == names.end()) {
          throw usage_error(in_quotes(text) + " is not one of " + choices);
        }
      },
      choices);
}

CLI::Validator decimal_int(int64_t lo, int64_t hi) {
  return validator(
      [lo, hi](std::string& text) { text = std::to_string(parse_int("", text, lo, hi)); },
      "INT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

CLI::Validator decimal_real(bool single_precision, double lo) {
  return validator(
      [single_precision, lo](std::string& text) {
        if (parse_real("", text, single_precision) < lo) {
          throw usage_error(in_quotes(text) + " is below " + json_text(Json(lo)) +
                            ", the least allowed");
        }
      },
      single_precision ? "FLOAT" : "NUMBER");
}

void add_field_option(CLI::App& app, const TrainField& field, TrainConfig& numbers,
                      FieldOption& o) {
  o.field = &field;
  const std::string flag = field_flag(field);
  std::visit(
      [&](auto m) {
        using M = decltype(m);
        if constexpr (std::is_same_v<M, TrainField::Int>) {
          o.option = app.add_option(flag, numbers.*m.member, field.help)
                         ->transform(decimal_int(m.lo, m.hi));
        } else if constexpr (std::is_same_v<M, float TrainConfig::*>) {
          o.option = app.add_option(flag, numbers.*m, field.help)->transform(decimal_real(true));
        } else if constexpr (std::is_same_v<M, uint64_t TrainConfig::*>) {
          o.option = app.add_option(flag, o.text, field.help);  // parse_seed in apply
        } else {
          using E = std::remove_reference_t<decltype(numbers.*m)>;
          o.option = app.add_option(flag, o.text, field.help)->check(one_of(enum_names<E>()));
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

void refuse_clobbering(const std::vector<NamedPath>& outputs,
                       const std::vector<NamedPath>& inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const NamedPath& out = outputs[i];
    std::vector<NamedPath> others(inputs);
    others.insert(others.end(), outputs.begin(), outputs.begin() + long(i));
    for (const NamedPath& in : others) {
      if (out.path.empty() || in.path.empty() || !same_file(out.path, in.path)) continue;
      throw usage_error(out.flag + " " + out.path + " is the same file as " + in.flag + " " +
                        in.path + ": writing one would destroy the other; choose another " +
                        out.flag);
    }
  }
}

void write_stdout(const std::string& bytes) {
  if (std::fwrite(bytes.data(), 1, bytes.size(), stdout) != bytes.size() || std::fflush(stdout)) {
    throw StdoutError();
  }
}

std::function<void(int32_t)> token_printer(std::shared_ptr<const Tokenizer> tokenizer,
                                           bool strict) {
  return [tokenizer, strict](int32_t token) {
    const std::string bytes =
        tokenizer ? tokenizer->decode({token}) : " " + std::to_string(int(token));
    if (strict) return write_stdout(bytes);
    std::fwrite(bytes.data(), 1, bytes.size(), stdout);
    std::fflush(stdout);
  };
}

int32_t default_prompt(const Tokenizer* tokenizer, int model_vocab) {
  if (!tokenizer) return int32_t(model_vocab - 1);
  if (tokenizer->eot_id() >= 0) return tokenizer->eot_id();
  return tokenizer->encode("\n").at(0);
}

std::vector<int32_t> eval_ids(const std::string& flag, const std::string& path,
                              const Tokenizer& tokenizer) {
  if (path.empty()) throw usage_error(flag + " needs a text file");
  const std::string text = InputFile(path, flag + " file").read_all();
  if (text.empty()) throw input_error(flag + " file " + path + " is empty; give it some text");
  return tokenizer.encode(text);
}

EvalResult evaluate_with_progress(Model& model, int B, int T, const std::vector<int32_t>& ids,
                                  const Tokenizer& tokenizer) {
  const bool tty = isatty(fileno(stderr));
  const auto progress = [tty](size_t done, size_t total) {
    // On a terminal every forward; in a log about ten lines.
    if (!tty && done != total && done % std::max<size_t>(1, total / 10) != 0) return;
    std::fprintf(stderr, "%seval: window %zu/%zu%s", tty ? "\r\033[K" : "", done, total,
                 tty && done != total ? "" : "\n");
    std::fflush(stderr);
  };
  return evaluate(model, B, T, ids, tokenizer, progress);
}

std::string eval_summary(const EvalResult& e) {
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "loss %.4f nats/token | perplexity %.2f | %.4f bits/byte (%llu tokens, %llu bytes)",
                e.loss(), e.perplexity(), e.bits_per_byte(), (unsigned long long)e.tokens,
                (unsigned long long)e.bytes);
  return buf;
}

}  // namespace reftrain
