// The run configuration as JSON and on the command line, from one table. Every TrainConfig value
// has one row in train_fields(): its JSON key, the object the trace's run line puts it in, its
// command-line help (and so its flag), its type and bounds. The command line (apps/train_cmd),
// the trace's run line (Trainer::describe), the checkpoint's "config" metadata and the golden
// run's config.json all read that table, so a new option is a TrainConfig member, a row here
// and the code that uses it.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "core/formats/trace.h"
#include "core/train/config.h"
#include "optim/schedule.h"

namespace reftrain {

// Where the trace's run line puts a value: {"train": {...}}, {"optimizer": {...}}, or the line
// itself ("seed").
enum class RunLineGroup { kTrain, kOptimizer, kTop };

struct TrainField {
  // The member it sets: an integer in [lo, hi], a float (written by json_float, read back
  // bit-exactly), the 64-bit seed, or one of the named enums (core/base/names.h).
  struct Int {
    int TrainConfig::*member;
    int64_t lo, hi;
  };
  using Member =
      std::variant<Int, float TrainConfig::*, uint64_t TrainConfig::*, Schedule TrainConfig::*,
                   Precision TrainConfig::*, Optimizer TrainConfig::*, AttentionKind TrainConfig::*,
                   MatmulKind TrainConfig::*, Kernels TrainConfig::*>;
  const char* key;      // the checkpoint's JSON key; the flag is "--" + key, '_' -> '-'
  RunLineGroup group;   // where the run line puts it
  const char* run_key;  // its key there
  const char* help;     // the flag's help; null: not a command-line option
  Member member;
  bool required = true;  // false: a checkpoint written before the field existed may lack it
};

// Every TrainConfig value, in the order the run line writes them.
const std::vector<TrainField>& train_fields();
// The row whose key is `key`; a std::logic_error when none is (a programming error).
const TrainField& train_field(const std::string& key);

// "--min-lr" for "min_lr".
std::string field_flag(const TrainField& f);
// The value of `f` in `t` as JSON: what the checkpoint and the run line write.
Json field_json(const TrainField& f, const TrainConfig& t);

// Every value, keyed by field key: the checkpoint's "config"."train" object.
Json train_config_json(const TrainConfig& t);
// The inverse, checking types and bounds; errors (std::runtime_error) name "config.train.KEY".
TrainConfig parse_train_config(const Json& j);
// The run line's "train" or "optimizer" object (the latter opens with "name", the optimizer).
Json run_line_group(const TrainConfig& t, RunLineGroup group);

// The learning-rate schedule of a run, and its values as JSON (kind, lr, min_lr, warmup, steps):
// the head of the checkpoint's "schedule" metadata and of the golden config's "schedule".
LrSchedule lr_schedule(const TrainConfig& t);
Json schedule_json(const TrainConfig& t);

// Typed, range-checked reads of one JSON object's fields; errors (std::runtime_error) name the
// object (`where`) and the field.
class JsonFields {
 public:
  JsonFields(Json j, std::string where);
  bool has(const char* key) const { return j_.contains(key); }
  // An integer in [lo, hi] (0 <= hi). JSON's non-negative integers parse as unsigned.
  int64_t integer(const char* key, int64_t lo, int64_t hi) const;
  uint64_t unsigned64(const char* key) const;
  double real(const char* key) const;
  // The float that json_float wrote as this value: float(d) or a neighbour, never a rounding of
  // a rounding (so the resumed run's hyperparameters are bit-identical).
  float real32(const char* key) const;
  std::string text(const char* key) const;
  // One of the names of E's table.
  template <typename E>
  E choice(const char* key) const {
    const std::string s = text(key);
    E value{};
    if (!enum_from_name(s, &value)) bad(key, "one of " + enum_choices<E>() + ", not '" + s + "'");
    return value;
  }

 private:
  const Json& at(const char* key) const;
  [[noreturn]] void bad(const char* key, const std::string& want) const;
  Json j_;
  std::string where_;
};

}  // namespace reftrain
