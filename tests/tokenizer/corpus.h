// The texts the tokenizer tests encode: fortunes (the first 8 KB of each file, in pieces of
// about 2 KB), samples in many scripts, emoji, whitespace runs, numbers, code, contractions with
// straight and curly quotes, the literal "<|endoftext|>", and short random strings drawn from
// characters of every class the pre-tokenizer tells apart. All valid UTF-8 (the JavaScript
// encoders read text, not bytes), and deterministic.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/tokenizer/byte_level.h"
#include "tests/common/test_util.h"

namespace reftrain::testing {

// `text` cut into pieces of about `size` bytes, each ending after a newline (or at the end).
inline std::vector<std::string> pieces_of(const std::string& text, size_t size) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', std::min(pos + size, text.size()));
    end = end == std::string::npos ? text.size() : end + 1;
    out.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  return out;
}

inline std::vector<std::string> fortune_texts() {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator("/usr/share/games/fortunes")) {
    const std::string ext = e.path().extension().string();
    if (e.is_regular_file() && !e.is_symlink() && ext != ".dat" && ext != ".u8") {
      files.push_back(e.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> out;
  for (const std::string& f : files) {
    for (const std::string& p : pieces_of(pieces_of(read_file(f), 8000)[0], 2000)) {
      out.push_back(p);
    }
  }
  return out;
}

inline std::vector<std::string> handmade_texts() {
  return {
      "Hello world! It's 2024, isn't it? They're here; we've gone; I'm sure you'll see; he'd go.",
      "It\u2019s curly: \u2018quoted\u2019 and \u201cdouble\u201d; IT'S UPPER 'S 'T 'RE 'VE",
      "trailing spaces   ",
      "   leading spaces",
      "tabs\there\t\tand\t\t\t",
      "\n\n\nnewlines\n\n",
      "windows\r\nline\r\nendings\r\n",
      "mixed \t \n \r\n  \t x",
      " ",
      "\n",
      "\t\t",
      "  a  b   c    d     e",
      "a \u00a0b\u3000c\u2028d\u2029e\ufeffg\u0085h\u180ei\u200bj",
      "\ufeffBOM first",
      "numbers 0 1 12 123 1234 12345 3.14159 -42 1e10 0x1F 1,000,000",
      "\u00b2\u00b3\u00bd \u2167 \u0663\u0664 \u096a \uff11\uff12 \u2460",
      "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac: "
      "\u039a\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1 "
      "\u03ba\u03cc\u03c3\u03bc\u03b5",
      "\u0420\u0443\u0441\u0441\u043a\u0438\u0439 \u044f\u0437\u044b\u043a: "
      "\u041f\u0440\u0438\u0432"
      "\u0435\u0442, \u043c\u0438\u0440!",
      "\u0627\u0644\u0639\u0631\u0628\u064a\u0629: \u0645\u0631\u062d\u0628\u0627 "
      "\u0628\u0627\u0644"
      "\u0639\u0627\u0644\u0645",
      "\u05e2\u05d1\u05e8\u05d9\u05ea: \u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",
      "\u0939\u093f\u0928\u094d\u0926\u0940: \u0928\u092e\u0938\u094d\u0924\u0947 "
      "\u0926\u0941\u0928"
      "\u093f\u092f\u093e",
      "\u0e44\u0e17\u0e22: "
      "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e0a\u0e32\u0e27\u0e42\u0e25\u0e01",
      "\u65e5\u672c\u8a9e\u306e\u6587\u7ae0\u3002\u6f22\u5b57\u3068\u3072\u3089\u304c\u306a\u3001"
      "\u30ab\u30bf\u30ab\u30ca\u3002",
      "\u4e2d\u6587\uff1a\u4f60\u597d\uff0c\u4e16\u754c\uff01",
      "\ud55c\uad6d\uc5b4: \uc548\ub155\ud558\uc138\uc694 \uc138\uacc4",
      "Ti\u1ebfng Vi\u1ec7t: Xin ch\u00e0o th\u1ebf gi\u1edbi",
      "e\u0301 combining a\u0300\u0301\u0302",
      "\u10e5\u10d0\u10e0\u10d7\u10e3\u10da\u10d8 \u0531\u0580\u0574\u0565\u0576",
      "emoji \U0001F600\U0001F389 \U0001F468\u200D\U0001F469\u200D\U0001F467 "
      "\U0001F44D\U0001F3FD \U0001F1EB\U0001F1F7 \u2764\ufe0f",
      "math \u2200x\u2208\u211d: x\u00b2 \u2265 0 \u21d2 \u221ax \u2248 \u03c0/\u221e",
      "\U0001D400\U0001D401 \U00020000\U0002A6D6 \U00010330\U00010331",
      "<|endoftext|>",
      "a<|endoftext|>b <|endoftext|> <|endoftext|><|endoftext|>",
      "int main(int argc, char** argv) {\n  for (int i = 0; i < argc; ++i) {\n    "
      "printf(\"%s\\n\", argv[i]);\n  }\n  return 0;\n}\n",
      "def f(x):\n    return {'a': [1, 2, 3], \"b\": x ** 2}  # comment\n\n\n",
      "https://example.com/path?q=1&r=2#frag user@example.org C:\\Windows\\path",
      "!!!??? ... --- *** ### $$$ %%% ^^^ &&& ((( ))) [[[ ]]] {{{ }}} ||| ~~~ ``` '''",
      "'''s ''t 'll've 'd'm 're's",
      "x's\n's\t's 's  's",
  };
}

// Short random strings over a pool of characters from every class and of the contraction and
// space rules: the pre-tokenizer's corner cases, many times over.
inline std::vector<std::string> random_class_texts(int count, uint64_t seed) {
  const std::vector<std::string> pool = {
      " ",      " ",          "  ",     "\n",         "\t",     "\r",     "\r\n",   "\u00a0",
      "\u3000", "\u2028",     "\ufeff", "\u0085",     "\u180e", "\u200b", "a",      "Z",
      "s",      "t",          "r",      "e",          "v",      "l",      "d",      "m",
      "\u00e9", "\u65e5",     "\u0301", "1",          "7",      "\u00b2", "\u0663", "\u2167",
      "'",      "'",          "\u2019", "!",          ".",      "<",      "|",      "-",
      "_",      "\U0001F600", "\u200d", "\U0001F3FD", "\\",     "\"",     "#",      "0"};
  TestData rng(seed);
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    std::string s;
    const uint64_t n = 1 + rng.below(24);
    for (uint64_t k = 0; k < n; ++k) s += pool[rng.below(pool.size())];
    out.push_back(s);
  }
  return out;
}

// Every text of the comparison with the JavaScript encoders.
inline std::vector<std::string> oracle_texts() {
  std::vector<std::string> all = fortune_texts();
  for (const std::string& t : handmade_texts()) all.push_back(t);
  for (const std::string& t : random_class_texts(3000, 16)) all.push_back(t);
  return all;
}

// Writes the texts as DIR/0.txt, DIR/1.txt, ... for tests/tokenizer/oracle.mjs.
inline void write_texts(const std::string& dir, const std::vector<std::string>& texts) {
  for (size_t i = 0; i < texts.size(); ++i) {
    write_file(dir + "/" + std::to_string(i) + ".txt", texts[i]);
  }
}

// `node tests/tokenizer/oracle.mjs ARGS`, its output parsed; a test failure (never a skip)
// naming scripts/install-deps.sh when node or the npm cache is missing.
inline nlohmann::json run_oracle(const std::string& args) {
  const CommandResult r =
      run_command("node " REFTRAIN_SOURCE_DIR "/tests/tokenizer/oracle.mjs " + args);
  if (r.exit_code != 0) {
    ADD_FAILURE() << "node tests/tokenizer/oracle.mjs " << args << " failed (exit " << r.exit_code
                  << "); node and the npm cache come from scripts/install-deps.sh:\n"
                  << r.output.substr(0, 2000);
    return nlohmann::json();
  }
  try {
    return nlohmann::json::parse(r.output);
  } catch (const nlohmann::json::exception& e) {
    ADD_FAILURE() << "oracle output is not JSON (" << e.what() << "):\n"
                  << r.output.substr(0, 2000);
    return nlohmann::json();
  }
}

}  // namespace reftrain::testing
