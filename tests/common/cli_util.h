// Helpers for tests that run the `reftrain` command: stdout and stderr apart, the one-line user
// error contract, a small learnable text, traces compared without their wall-time fields, llm.c
// file headers, and a process in the background (to kill it, or to watch its output arrive).
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/test_util.h"

namespace reftrain::testing {

using nlohmann::json;

struct SplitResult {
  int exit_code;    // as run_command: -1 when the shell did not exit normally
  std::string out;  // stdout
  std::string err;  // stderr
};

// `reftrain ARGS` with stdout and stderr captured apart. The command runs inside a { ...; }
// group, so the shell does not exec it and a crash shows as exit code 128 + signal.
inline SplitResult run_split(const std::string& args) {
  TempDir dir;
  const std::string err_path = dir.file("stderr");
  const CommandResult r =
      run_command("{ " + std::string(REFTRAIN_BIN) + " " + args + " 2>" + err_path + "; }");
  return {r.exit_code, r.output, read_file(err_path)};
}

inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

inline std::vector<std::string> non_empty_lines(const std::string& text) {
  std::vector<std::string> out;
  for (const std::string& l : split_lines(text)) {
    if (!l.empty()) out.push_back(l);
  }
  return out;
}

// A user error: exit code `code` (never a signal), and stderr holds exactly one message line
// "error: ..." containing `substring` (no stack trace, no "terminate called", no second error).
inline void expect_user_error(const std::string& args, int code, const std::string& substring) {
  SCOPED_TRACE("reftrain " + args);
  const SplitResult r = run_split(args);
  EXPECT_EQ(r.exit_code, code) << "stderr: " << r.err;
  const std::vector<std::string> lines = non_empty_lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << "stderr should be one line, got:\n" << r.err;
  EXPECT_EQ(lines[0].rfind("error: ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find(substring), std::string::npos)
      << "message '" << lines[0] << "' lacks '" << substring << "'";
}

// ~50 KB of simple English: a handful of sentences in an order drawn from a fixed-seed LCG
// (not std:: distributions, so the text is the same on every platform).
inline std::string learnable_text() {
  const char* sentences[] = {
      "the cat sat on the mat.\n", "a dog ran in the park.\n",     "the sun is hot today.\n",
      "we like to read books.\n",  "birds sing in the morning.\n", "she drinks tea with milk.\n",
  };
  const uint64_t n = sizeof(sentences) / sizeof(sentences[0]);
  uint64_t x = 20240520;
  std::string text;
  while (text.size() < 50000) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    text += sentences[(x >> 33) % n];
  }
  return text;
}

inline std::vector<json> read_trace(const std::string& path) {
  std::vector<json> lines;
  for (const std::string& l : split_lines(read_file(path))) lines.push_back(json::parse(l));
  return lines;
}

// The trace without what measures the machine rather than the computation: the wall time ("ms")
// of step lines and the final memory line; and without the line that says where a resumed run
// resumed, so that a resumed run's trace compares equal to the run that was never stopped.
inline std::vector<json> trace_without_ms(const std::string& path) {
  std::vector<json> lines;
  for (json& j : read_trace(path)) {
    if (j.value("type", "") == "memory" || j.value("type", "") == "resume") continue;
    if (j.value("type", "") == "step") {
      EXPECT_TRUE(j.contains("ms")) << j.dump();
      j.erase("ms");
    }
    lines.push_back(j);
  }
  return lines;
}

inline void expect_same_trace(const std::string& a, const std::string& b) {
  const std::vector<json> ta = trace_without_ms(a), tb = trace_without_ms(b);
  ASSERT_EQ(ta.size(), tb.size());
  for (size_t i = 0; i < ta.size(); ++i) {
    EXPECT_EQ(ta[i], tb[i]) << "line " << i + 1 << ":\n" << ta[i].dump() << "\n" << tb[i].dump();
  }
}

// A test with a fresh directory holding learnable_text() as text.txt (text_), for --data.
class LearnableTextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    text_ = dir_.file("text.txt");
    write_file(text_, learnable_text());
  }
  TempDir dir_;
  std::string text_;
};

// The learnable text and a small BPE tokenizer trained on it by the CLI (tok_).
class TokenizedTextTest : public LearnableTextTest {
 protected:
  void SetUp() override {
    LearnableTextTest::SetUp();
    tok_ = dir_.file("tok.json");
    const CommandResult r =
        run_reftrain("tokenizer train --data " + text_ + " --vocab-size 300 --out " + tok_);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  std::string tok_;
};

// Every file name in `dir`, sorted; hidden ones too, so a stray temporary file shows.
inline std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// `reftrain ARGS` started in the background through /bin/sh (which execs it, so the pid is
// reftrain's), stdout and stderr to files; optionally with an environment prefix and a
// file-size limit (RLIMIT_FSIZE, bytes).
class Background {
 public:
  Background(const std::string& args, const std::string& out, const std::string& err,
             const std::string& env = "", rlim_t file_size_limit = 0) {
    const std::string cmd =
        "exec " + env + " " + REFTRAIN_BIN + " " + args + " >" + out + " 2>" + err;
    pid_ = fork();
    if (pid_ == 0) {
      if (file_size_limit > 0) {
        const rlimit limit{file_size_limit, file_size_limit};
        setrlimit(RLIMIT_FSIZE, &limit);
      }
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~Background() {
    if (pid_ > 0 && !done_) kill(), wait();
  }
  // A process already reaped is not signalled: its pid may belong to another one by now.
  void send(int sig) {
    if (!done_) ::kill(pid_, sig);
  }
  void kill() { send(SIGKILL); }
  pid_t pid() const { return pid_; }
  // The exit code, or 128 + the signal that ended it.
  int wait() {
    if (!done_) reap(0);
    return exit_;
  }
  bool running() {
    if (!done_) reap(WNOHANG);
    return !done_;
  }

 private:
  void reap(int options) {
    int status = 0;
    if (waitpid(pid_, &status, options) != pid_) return;
    done_ = true;
    exit_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  pid_t pid_ = -1;
  bool done_ = false;
  int exit_ = -1;
};

// Polls `ready` every 5 ms for up to `seconds`.
inline bool wait_for(const std::function<bool()>& ready, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return ready();
}

}  // namespace reftrain::testing
