// `reftrain compare A B`: a result B against a reference A — two traces (per-step loss drift),
// two safetensors files (per-tensor metrics), or two golden directories (every trace.jsonl and
// *.safetensors present in both). Exit 0 when everything is within tolerance, 1 when not, 2
// when an input cannot be read or the two do not match up (missing, truncated, other shapes or
// names). Definitions: core/golden/compare.h and docs/golden-format.md.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "apps/cli_util.h"
#include "apps/commands.h"
#include "core/base/error.h"
#include "core/base/json_depth.h"
#include "core/formats/safetensors.h"
#include "core/formats/trace.h"
#include "core/golden/compare.h"

namespace reftrain {

namespace {

namespace fs = std::filesystem;

struct CompareArgs {
  std::string a, b;
  Tolerance tol;
  double max_drift = 0.05;
  long long steps = 0;
  bool subset = false, json = false, quiet = false, first_divergence = false;
  bool tol_given = false;  // any of --rtol --atol --max-nmse --max-ulp
};

// What a file or directory holds.
enum class Kind { kTrace, kTensors, kDir };

Kind kind_of(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return Kind::kDir;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw input_error("cannot open " + path);
  // By content, not by name: a safetensors file opens with its header's length (8 bytes, little
  // endian) and the header's '{'; a trace with '{' after an optional UTF-8 byte order mark and
  // blanks (read_trace accepts both).
  std::string head(4096, '\0');
  in.read(&head[0], std::streamsize(head.size()));
  head.resize(size_t(in.gcount()));
  in.clear();
  in.seekg(0, std::ios::end);
  const uint64_t size = uint64_t(in.tellg());
  uint64_t n = 0;
  for (int i = 7; i >= 0 && head.size() >= 9; --i) n = n << 8 | static_cast<unsigned char>(head[i]);
  if (head.size() >= 9 && head[8] == '{' && n <= size - 8) return Kind::kTensors;
  size_t i = head.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;
  while (i < head.size() && std::isspace(static_cast<unsigned char>(head[i]))) ++i;
  if (i == size) throw input_error(path + " is empty: neither a trace nor a safetensors file");
  return i < head.size() && head[i] == '{' ? Kind::kTrace : Kind::kTensors;
}

// One compared pair: its verdict, its report as text and as JSON.
struct Outcome {
  bool pass = true;
  std::string text;
  Json json;
};

std::string format(const char* fmt, double v) {
  char buf[64];
  if (std::isinf(v)) return "inf";
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// The tolerance of tensor `name`: the command line's when given; else the one the reference
// file states in its "tolerances" metadata (kernel fixtures), exact for tensors it does not
// list; else the default by dtype and kernel (default_tolerance: bf16's for bf16 tensors and
// the calls of bf16 kernels).
Tolerance tolerance_for(const std::string& name, const SafetensorsFile& ref, const CompareArgs& a) {
  if (a.tol_given) return a.tol;
  const auto it = ref.metadata.find("tolerances");
  if (it == ref.metadata.end()) return default_tolerance(name, ref.tensors.at(name), a.tol);
  // Metadata strings escape the header's depth limit: checked here before parsing.
  const Json all = json_nested_deeper_than(it->second, 16)
                       ? Json(Json::value_t::discarded)
                       : Json::parse(it->second, nullptr, false);
  if (!all.is_object()) throw input_error(ref.path + ": metadata \"tolerances\" is not JSON");
  if (!all.contains(name)) return Tolerance::exact();
  return Tolerance::from_json(all.at(name), ref.path + ": " + name);
}

// A kernel-call dump's metadata entry `key` as JSON (docs/golden-format.md).
Json dump_meta(const SafetensorsFile& f, const char* key) {
  const auto it = f.metadata.find(key);
  const Json j = it == f.metadata.end() || json_nested_deeper_than(it->second, 16)
                     ? Json()
                     : Json::parse(it->second, nullptr, false);
  if (j.is_discarded() || j.is_null()) {
    throw input_error(f.path + ": no kernel-call dump (metadata \"" + key + "\" missing or bad)");
  }
  return j;
}

bool is_dump(const SafetensorsFile& f) {
  const auto it = f.metadata.find("format");
  return it != f.metadata.end() && it->second == "reftrain-kernel-dump";
}

// The probabilities `att` of every attention call a dump lists, and those it holds.
std::pair<std::set<std::string>, std::set<std::string>> attention_probs(const SafetensorsFile& f) {
  static const std::regex call(R"([0-9]{4}\.[^.]+\.attention_(forward|backward))");
  std::set<std::string> listed, held;
  for (const Json& c : dump_meta(f, "calls")) {
    const std::string name = c.is_string() ? c.get<std::string>() : "";
    if (!std::regex_match(name, call)) continue;
    listed.insert(name + ".att");
    if (f.tensors.count(name + ".att")) held.insert(name + ".att");
  }
  return {listed, held};
}

// The tensors only one of two kernel-call dumps may hold because they ran different attention
// forms: the materialised attention records the probabilities `att` of every attention call
// (attention_forward's output, attention_backward's input); the fused one keeps each row's
// log-sum-exp instead, which no dump records (reftrain's golden runs are fused; the WebGPU
// replay's default twins materialise). So one dump holds `att` at every attention call and the
// other at none; any other difference is not a form's, and stays a mismatch.
std::set<std::string> attention_form_tensors(const SafetensorsFile& ref,
                                             const SafetensorsFile& got) {
  if (!is_dump(ref) || !is_dump(got)) return {};
  const auto [ref_listed, ref_held] = attention_probs(ref);
  const auto [got_listed, got_held] = attention_probs(got);
  if (ref_held.empty() && got_held == got_listed) return got_held;
  if (got_held.empty() && ref_held == ref_listed) return ref_held;
  return {};
}

// `form`: the tensors one side may lack (attention_form_tensors).
void check_names(const SafetensorsFile& ref, const SafetensorsFile& got, bool subset,
                 const std::set<std::string>& form) {
  for (const auto& kv : got.tensors) {
    if (!ref.tensors.count(kv.first) && !form.count(kv.first)) {
      throw input_error(got.path + " has tensor '" + kv.first + "' that " + ref.path + " lacks");
    }
  }
  if (subset) return;
  for (const auto& kv : ref.tensors) {
    if (!got.tensors.count(kv.first) && !form.count(kv.first)) {
      throw input_error(got.path + " lacks tensor '" + kv.first + "' of " + ref.path +
                        " (--subset compares only the tensors B has)");
    }
  }
}

// The list of the tensors not compared for the attention forms, and which form each side ran.
void note_attention_forms(Outcome& o, const SafetensorsFile& ref,
                          const std::set<std::string>& form) {
  if (form.empty()) return;
  const bool in_a = ref.tensors.count(*form.begin()) > 0;
  Json not_compared = Json::array();
  for (const std::string& n : form) {
    not_compared.push_back(n + (in_a ? " (only in A)" : " (only in B)"));
    o.text += "not compared: " + not_compared.back().get<std::string>() + "\n";
  }
  o.text += std::string("A ran the ") + (in_a ? "materialised" : "fused") + " attention, B the " +
            (in_a ? "fused" : "materialised") + " one: only " + (in_a ? "A" : "B") +
            " records the probabilities att\n";
  o.json["not_compared"] = not_compared;
  o.json["attention"] = {{"a", in_a ? "materialised" : "fused"},
                         {"b", in_a ? "fused" : "materialised"}};
}

std::string tensor_row(const TensorDiff& d) {
  char buf[320];
  std::snprintf(buf, sizeof buf, "%-44s %-4s %-14s %9s %9s %9s %8s %7s  %s\n", d.name.c_str(),
                d.dtype.c_str(), shape_text(d.shape).c_str(), format("%.2e", d.max_abs).c_str(),
                format("%.2e", d.max_rel).c_str(), format("%.2e", d.nmse).c_str(),
                d.ulp < 0 ? "-" : format("%.0f", d.ulp).c_str(),
                format("%.1f%%", 100 * d.used).c_str(), d.pass ? "ok" : "FAIL");
  return buf;
}

Json tensor_json(const TensorDiff& d, const Tolerance& tol) {
  return {{"tensor", d.name},     {"dtype", d.dtype},
          {"shape", d.shape},     {"numel", d.numel},
          {"max_abs", d.max_abs}, {"max_rel", d.max_rel},
          {"nmse", d.nmse},       {"ulp", d.ulp < 0 ? Json() : Json(d.ulp)},
          {"worst", d.worst},     {"used", d.used},
          {"pass", d.pass},       {"tolerance", tol.to_json()}};
}

Outcome compare_tensor_files(const std::string& pa, const std::string& pb, const CompareArgs& a) {
  const SafetensorsFile ref = read_safetensors(pa), got = read_safetensors(pb);
  const std::set<std::string> form = attention_form_tensors(ref, got);
  check_names(ref, got, a.subset, form);
  Outcome o;
  o.json = {{"kind", "tensors"}, {"a", pa}, {"b", pb}, {"rows", Json::array()}};
  char head[256];
  std::snprintf(head, sizeof head, "%-44s %-4s %-14s %9s %9s %9s %8s %7s\n", "tensor", "type",
                "shape", "max_abs", "max_rel", "nmse", "ulp", "used");
  o.text = "A " + pa + "\nB " + pb + "\n" + (a.quiet ? "" : head);
  std::string first_fail;
  size_t compared = 0, passed = 0;
  for (const auto& kv : got.tensors) {
    if (form.count(kv.first) && !ref.tensors.count(kv.first)) continue;
    const Tolerance tol = tolerance_for(kv.first, ref, a);
    const TensorDiff d = compare_tensor(kv.first, ref.tensors.at(kv.first), kv.second, tol);
    if (!a.quiet) o.text += tensor_row(d);
    o.json["rows"].push_back(tensor_json(d, tol));
    ++compared, passed += d.pass;
    if (!d.pass && first_fail.empty()) first_fail = d.name;
  }
  // Nothing compared is no pass (--subset against a B of other names, an empty B).
  if (compared == 0) {
    throw input_error(pa + " and " + pb + " have no tensor in common: nothing was compared");
  }
  o.pass = passed == compared;
  o.json["pass"] = o.pass;
  o.json["first_fail"] = first_fail.empty() ? Json() : Json(first_fail);
  o.text += first_fail.empty() ? "" : "first tensor past tolerance: " + first_fail + "\n";
  note_attention_forms(o, ref, form);
  o.text +=
      std::to_string(passed) + " of " + std::to_string(compared) + " tensors within tolerance\n";
  return o;
}

std::string step_row(const StepDiff& s) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%6lld %14.9g %14.9g %9s %12.6g %12.6g %9s  %s%s\n", s.step,
                s.loss_ref, s.loss_got, format("%.2e", s.drift).c_str(), s.norm_ref, s.norm_got,
                std::isnan(s.norm_rel) ? "-" : format("%.2e", s.norm_rel).c_str(),
                s.pass ? "ok" : "FAIL", s.lr_differs ? " (lr differs)" : "");
  return buf;
}

Json step_json(const StepDiff& s) {
  const auto num = [](double v) { return std::isnan(v) ? Json() : Json(v); };
  return {{"step", s.step},
          {"loss_a", num(s.loss_ref)},
          {"loss_b", num(s.loss_got)},
          {"drift", s.drift},
          {"grad_norm_a", num(s.norm_ref)},
          {"grad_norm_b", num(s.norm_got)},
          {"grad_norm_rel", num(s.norm_rel)},
          {"lr_differs", s.lr_differs},
          {"pass", s.pass}};
}

std::string trace_summary(const TraceDiff& d, double gate) {
  std::string s = "max drift " + format("%.3e", d.max_drift) + " at step " +
                  std::to_string(d.max_drift_step) + " (gate " + format("%.3g", gate) + ")";
  if (!d.steps.empty()) {
    s += "; drift at step " + std::to_string(d.steps.back().step) + " " +
         format("%.3e", d.steps.back().drift);
  }
  s += "\n";
  if (!d.missing.empty()) {
    s += std::to_string(d.missing.size()) + " step(s) missing from B, the first " +
         std::to_string(d.missing.front()) + "\n";
  }
  s += d.first_fail < 0 ? "all " + std::to_string(d.steps.size()) + " steps within tolerance\n"
                        : "first step past tolerance: " + std::to_string(d.first_fail) + "\n";
  return s;
}

Outcome compare_trace_files(const std::string& pa, const std::string& pb, const CompareArgs& a) {
  const TraceDiff d = compare_traces(read_trace(pa), read_trace(pb), a.max_drift, a.steps);
  Outcome o;
  o.pass = d.pass;
  o.text = "A " + pa + "\nB " + pb + "\n";
  o.json = {{"kind", "trace"},
            {"a", pa},
            {"b", pb},
            {"max_drift_allowed", a.max_drift},
            {"max_drift", d.max_drift},
            {"max_drift_step", d.max_drift_step},
            {"missing", d.missing},
            {"rows", Json::array()}};
  char head[160];
  std::snprintf(head, sizeof head, "%6s %14s %14s %9s %12s %12s %9s\n", "step", "loss A", "loss B",
                "drift", "grad_norm A", "grad_norm B", "rel");
  if (!a.quiet) o.text += head;
  for (const StepDiff& s : d.steps) {
    if (!a.quiet) o.text += step_row(s);
    o.json["rows"].push_back(step_json(s));
  }
  o.text += trace_summary(d, a.max_drift);
  o.json["first_fail"] = d.first_fail < 0 ? Json() : Json(d.first_fail);
  o.json["pass"] = d.pass;
  return o;
}

Outcome compare_files(const std::string& pa, const std::string& pb, const CompareArgs& a) {
  const Kind ka = kind_of(pa), kb = kind_of(pb);
  if (ka != kb) throw input_error(pa + " and " + pb + " are not the same kind of file");
  return ka == Kind::kTrace ? compare_trace_files(pa, pb, a) : compare_tensor_files(pa, pb, a);
}

// The comparable files of a golden directory: trace.jsonl and every *.safetensors, by name.
std::set<std::string> comparable_files(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (e.is_regular_file() && (n == "trace.jsonl" || e.path().extension() == ".safetensors")) {
      names.insert(n);
    }
  }
  return names;
}

// The files of a golden run B may lack: its inputs (config.json's "files" init and batches),
// which a replay reads and need not write back, and its kernel-call dumps (step-K.safetensors,
// written by --dump-step K), which a replay writes only when asked.
std::set<std::string> golden_optional_files(const std::string& dir) {
  std::error_code ec;
  std::ifstream in(fs::path(dir) / "config.json");
  std::string text;
  if (in && fs::file_size(fs::path(dir) / "config.json", ec) <= (1 << 20)) {
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  // A golden config.json is a few KB and nests 3 levels; anything else is read as no config.
  const Json config = text.empty() || json_nested_deeper_than(text, 16)
                          ? Json()
                          : Json::parse(text, nullptr, false);
  std::set<std::string> inputs;
  if (!config.is_object() || !config.contains("files") || !config["files"].is_object()) {
    return inputs;
  }
  for (const char* key : {"init", "batches"}) {
    const Json& f = config["files"].value(key, Json());
    if (f.is_string()) inputs.insert(f.get<std::string>());
  }
  static const std::regex dump(R"(step-[0-9]+\.safetensors)");
  for (const std::string& n : comparable_files(dir)) {
    if (std::regex_match(n, dump)) inputs.insert(n);
  }
  return inputs;
}

Outcome compare_dirs(const std::string& da, const std::string& db, const CompareArgs& a) {
  const std::set<std::string> in_a = comparable_files(da), in_b = comparable_files(db);
  Outcome o;
  o.json = {{"kind", "dir"}, {"a", da}, {"b", db}, {"files", Json::array()}};
  const std::set<std::string> optional = golden_optional_files(da);
  std::vector<std::string> only, missing;
  for (const std::string& n : in_a) {
    if (in_b.count(n)) continue;
    only.push_back(n + " (only in A)");
    if (!a.subset && !optional.count(n)) missing.push_back(n);
  }
  for (const std::string& n : in_b) {
    if (!in_a.count(n)) only.push_back(n + " (only in B)");
  }
  size_t compared = 0;
  for (const std::string& n : in_a) {
    if (!in_b.count(n)) continue;
    Outcome f = compare_files((fs::path(da) / n).string(), (fs::path(db) / n).string(), a);
    o.pass = o.pass && f.pass;
    o.text += f.text + "\n";
    o.json["files"].push_back(std::move(f.json));
    ++compared;
  }
  if (compared == 0) throw input_error(da + " and " + db + " have no file to compare in common");
  for (const std::string& n : only) o.text += "not compared: " + n + "\n";
  o.json["not_compared"] = only;
  o.json["missing"] = missing;
  // A result that lacks files of the reference has not passed them: exit 1, like a missing step.
  const bool within = o.pass;
  o.pass = o.pass && missing.empty();
  o.json["pass"] = o.pass;
  if (!missing.empty()) {
    o.text += std::to_string(missing.size()) + " of " + std::to_string(in_a.size()) +
              " files of A missing from B, the first " + missing.front() + "\n";
  }
  const std::string of_a = only.empty() ? "" : " (of A's " + std::to_string(in_a.size()) + ")";
  o.text += !within  ? "some files are past tolerance\n"
            : o.pass ? "all " + std::to_string(compared) + " compared files within tolerance" +
                           of_a + "\n"
                     : std::to_string(compared) + " compared files within tolerance, " +
                           std::to_string(missing.size()) + " missing\n";
  return o;
}

// The one step-K.safetensors two directories both hold, or the files themselves.
std::pair<std::string, std::string> dump_files(const std::string& pa, const std::string& pb) {
  if (kind_of(pa) != Kind::kDir) {
    for (const std::string& p : {pa, pb}) {
      if (kind_of(p) == Kind::kTrace) {
        throw input_error(p +
                          " is a trace; --first-divergence compares two kernel-call dumps "
                          "(step-K.safetensors, written by golden run --dump-step K)");
      }
    }
    return {pa, pb};
  }
  std::vector<std::string> both;
  const std::set<std::string> in_b = comparable_files(pb);
  for (const std::string& n : comparable_files(pa)) {
    if (n.rfind("step-", 0) == 0 && in_b.count(n)) both.push_back(n);
  }
  if (both.size() != 1) {
    throw input_error(pa + " and " + pb + " hold " + std::to_string(both.size()) +
                      " kernel-call dumps (step-K.safetensors) in common, not 1");
  }
  return {(fs::path(pa) / both[0]).string(), (fs::path(pb) / both[0]).string()};
}

// Two dumps compare call by call only when they are dumps of the same step of the same kind of
// run: the same `step` and the same `calls` (an fp32 run's calls are not a mixed one's).
void check_same_dump_kind(const SafetensorsFile& ref, const SafetensorsFile& got) {
  for (const SafetensorsFile* f : {&ref, &got}) {
    if (!is_dump(*f)) {
      throw input_error(f->path +
                        " is not a kernel-call dump (metadata format is not "
                        "reftrain-kernel-dump); --first-divergence compares two");
    }
  }
  const auto step = [](const SafetensorsFile& f) {
    const auto it = f.metadata.find("step");
    return it == f.metadata.end() ? std::string("?") : it->second;
  };
  if (step(ref) != step(got)) {
    throw input_error(ref.path + " is step " + step(ref) + "'s dump but " + got.path + " step " +
                      step(got) + "'s; compare dumps of the same step");
  }
  const Json a = dump_meta(ref, "calls"), b = dump_meta(got, "calls");
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string ca = i < a.size() ? a[i].dump() : "none",
                      cb = i < b.size() ? b[i].dump() : "none";
    if (ca == cb) continue;
    throw input_error("the dumps ran other calls (call " + std::to_string(i) + ": " + ca +
                      " in A, " + cb +
                      " in B): they come from runs of another kind "
                      "(precision, architecture or optimizer), which are not compared");
  }
}

// One call of A: its inputs' and outputs' diffs against B, and whether B lacked any of its
// tensors (then it was not compared: judging it on what is left could miss its divergence).
struct CallDiff {
  std::vector<TensorDiff> ins, outs;
  bool skipped = false;
};

CallDiff diff_call(const std::string& call, const SafetensorsFile& ref, const SafetensorsFile& got,
                   const Json& written, const std::set<std::string>& form, const CompareArgs& a) {
  CallDiff c;
  const std::string prefix = call + ".";
  for (auto it = ref.tensors.lower_bound(prefix);
       it != ref.tensors.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    if (!got.tensors.count(it->first)) {
      c.skipped = c.skipped || !form.count(it->first);
      continue;
    }
    const std::string binding = it->first.substr(prefix.size());
    const TensorDiff d = compare_tensor(it->first, it->second, got.tensors.at(it->first),
                                        tolerance_for(it->first, ref, a));
    const bool out = std::find(written.begin(), written.end(), Json(binding)) != written.end();
    (out ? c.outs : c.ins).push_back(d);
  }
  if (c.skipped) c.ins.clear(), c.outs.clear();
  return c;
}

bool any_failed(const std::vector<TensorDiff>& v) {
  return std::any_of(v.begin(), v.end(), [](const TensorDiff& d) { return !d.pass; });
}

// The table and advice of the first diverged call; `skipped`: the calls before it B lacked.
void report_divergence(Outcome& o, const std::string& call, const CallDiff& c,
                       const std::vector<std::string>& skipped) {
  o.pass = false;
  o.json["call"] = call;
  o.json["pass"] = false;
  o.json["inputs_within"] = !any_failed(c.ins);
  char head[256];
  std::snprintf(head, sizeof head, "       %-44s %-4s %-14s %9s %9s %9s %8s %7s\n", "tensor",
                "type", "shape", "max_abs", "max_rel", "nmse", "ulp", "used");
  o.text += "first divergence: call " + call + "\n" + head;
  for (const TensorDiff& d : c.ins) o.text += "  in   " + tensor_row(d);
  for (const TensorDiff& d : c.outs) o.text += "  out  " + tensor_row(d);
  if (!any_failed(c.ins)) {
    o.text += "its inputs are within tolerance: the kernel of this call diverged\n";
  } else if (!skipped.empty()) {
    o.text += "its inputs are past tolerance too, and " + std::to_string(skipped.size()) +
              " call(s) before it were not compared (B lacks their tensors; the first " +
              skipped.front() + "): the divergence may be in one of those\n";
  } else {
    o.text +=
        "its inputs are past tolerance too: the divergence is before this step (compare "
        "an earlier step's dump)\n";
  }
}

// --first-divergence: the first call, in A's order, with an output past tolerance, and its
// table (inputs, then outputs). The tensors one attention form lacks are not compared; a call
// with any other tensor missing from B is skipped and named, and nothing compared is no pass.
Outcome first_divergence(const std::string& pa, const std::string& pb, const CompareArgs& a) {
  const SafetensorsFile ref = read_safetensors(pa), got = read_safetensors(pb);
  check_same_dump_kind(ref, got);
  const Json calls = dump_meta(ref, "calls"), outputs = dump_meta(ref, "outputs");
  const std::set<std::string> form = attention_form_tensors(ref, got);
  Outcome o;
  o.json = {{"kind", "first_divergence"}, {"a", pa}, {"b", pb}, {"call", Json()}};
  o.text = "A " + pa + "\nB " + pb + "\n";
  std::vector<std::string> skipped;
  size_t compared = 0;
  for (const Json& entry : calls) {
    const std::string call = entry.get<std::string>();
    const Json& written = outputs.contains(call) ? outputs.at(call) : Json::array();
    const CallDiff c = diff_call(call, ref, got, written, form, a);
    if (c.skipped) {
      skipped.push_back(call);
      o.text += "not compared: call " + call + " (B lacks its tensors)\n";
      continue;
    }
    compared += !c.outs.empty();
    if (!any_failed(c.outs)) continue;
    o.json["skipped"] = skipped;
    report_divergence(o, call, c, skipped);
    return o;
  }
  if (compared == 0) {
    throw input_error(pb + " holds no output of a call of " + pa + ": nothing was compared");
  }
  o.json["skipped"] = skipped;
  o.pass = skipped.empty();
  o.json["pass"] = o.pass;
  o.text += skipped.empty()
                ? "no call diverged: " + std::to_string(calls.size()) + " calls within tolerance\n"
                : "no compared call diverged, but " + std::to_string(skipped.size()) + " of " +
                      std::to_string(calls.size()) +
                      " calls were not compared (B lacks their tensors; the first " +
                      skipped.front() + ")\n";
  return o;
}

int run_compare(const CompareArgs& a) {
  try {
    const bool dirs = kind_of(a.a) == Kind::kDir || kind_of(a.b) == Kind::kDir;
    if (dirs && (kind_of(a.a) != Kind::kDir || kind_of(a.b) != Kind::kDir)) {
      throw input_error("compare a directory with a directory, a file with a file");
    }
    Outcome o;
    if (a.first_divergence) {
      const auto [fa, fb] = dump_files(a.a, a.b);
      o = first_divergence(fa, fb, a);
    } else {
      o = dirs ? compare_dirs(a.a, a.b, a) : compare_files(a.a, a.b, a);
    }
    std::fputs(a.json ? (json_text(o.json, 1) + "\n").c_str() : o.text.c_str(), stdout);
    return o.pass ? 0 : 1;
  } catch (const UserError& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;  // unreadable or mismatched input: compare's own code, not train's 1
  }
}

}  // namespace

CommandRunner add_compare_command(CLI::App& app) {
  auto a = std::make_shared<CompareArgs>();
  app.add_option("A", a->a, "reference: a trace, a safetensors file or a golden directory")
      ->required();
  app.add_option("B", a->b, "result to check against A (the same kind)")->required();
  CLI::Option* rtol = app.add_option("--rtol", a->tol.rtol, "tensors: |b-a| <= atol + rtol*|a|")
                          ->capture_default_str();
  CLI::Option* atol =
      app.add_option("--atol", a->tol.atol, "tensors: see --rtol")->capture_default_str();
  CLI::Option* nmse =
      app.add_option("--max-nmse", a->tol.max_nmse, "tensors: sum (b-a)^2 / sum a^2 at most this");
  CLI::Option* ulp =
      app.add_option("--max-ulp", a->tol.max_ulp, "tensors: distance in units in the last place");
  for (CLI::Option* o : {rtol, atol, nmse, ulp}) o->transform(decimal_real(false, 0.0));
  app.add_option("--max-drift", a->max_drift, "traces: |loss_b - loss_a| / |loss_a| per step")
      ->transform(decimal_real(false, 0.0))
      ->capture_default_str();
  app.add_option("--steps", a->steps, "traces: compare only steps 1..N (default: all of A's)")
      ->transform(decimal_int(1, INT64_MAX));
  app.add_flag("--subset", a->subset, "tensors: B may hold only some of A's tensors");
  app.add_flag("--first-divergence", a->first_divergence,
               "kernel-call dumps (step-K.safetensors, or two directories holding one): the "
               "first call whose outputs are past tolerance, with its inputs and outputs");
  app.add_flag("--json", a->json, "print the report as JSON");
  app.add_flag("--quiet", a->quiet, "print the summary lines only, not every step or tensor");
  return [a, rtol, atol, nmse, ulp] {
    a->tol_given = rtol->count() + atol->count() + nmse->count() + ulp->count() > 0;
    // --max-nmse or --max-ulp alone replace the element-wise check; --rtol/--atol keep it on.
    if (a->tol_given && rtol->count() + atol->count() == 0) a->tol.allclose = false;
    return run_compare(*a);
  };
}

}  // namespace reftrain
