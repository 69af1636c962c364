// Writing a file so that a crash, a kill or a full disk never leaves a partial file under its
// name: the bytes go to a temporary file next to it (DIR/.NAME.tmp), which is flushed and
// fsynced, then renamed over NAME, and the directory is fsynced so the rename itself is durable.
// Until the rename, whatever NAME held before stays intact; a kill before it leaves at most the
// stale .tmp file, which the next write of NAME replaces.
//
// Only regular files (and new paths) are written that way. A device or a FIFO (/dev/null,
// /dev/stdout, a named pipe) is written directly: a rename would replace the node itself. A
// symlink is followed: its target is written atomically (DIR-OF-TARGET/.TARGET.tmp renamed over
// TARGET), so the link stays a link; a dangling symlink creates its target.
#pragma once

#include <cstddef>
#include <string>

namespace reftrain {

//
// The temporary name is never followed: whatever is there (a stale file, a link someone put in
// its place) is removed and the file created anew, so a link at .NAME.tmp cannot redirect the
// bytes into its target.
class AtomicFileWriter {
 public:
  // What the writer does with a symlink, device or FIFO at PATH.
  enum class Links {
    kFollow,  // write the link's target, or the device: outputs the user named
    kRefuse,  // an input error unless PATH is a regular file or new; the rename replaces the
              // name itself, never a link's target: files reftrain names on its own (caches)
  };
  // Creates DIR/.NAME.tmp (NAME a symlink's target), or opens a device or FIFO for writing; an
  // input error naming the file and the reason otherwise.
  explicit AtomicFileWriter(const std::string& path, Links links = Links::kFollow);
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  // Removes the temporary file when commit() was not reached (an error on the way).
  ~AtomicFileWriter();

  // Appends bytes; a failed write (disk full, file-size limit, I/O error) is an input error.
  void write(const void* data, size_t n);
  // fsync of the temporary file, rename over the final name, fsync of the directory.
  // `before_rename` runs between the fsync and the rename (a test hook; may be empty).
  void commit(void (*before_rename)(const std::string& tmp, const std::string& path) = nullptr);

  const std::string& tmp_path() const { return tmp_; }  // "" when written through

 private:
  // Opens a fresh DIR/.NAME.tmp for `target` (DIR/NAME).
  void create_tmp(const std::string& target);
  [[noreturn]] void fail(const std::string& what, int err);
  std::string path_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

// Writes `text` to `path` through an AtomicFileWriter (an input error naming the file when it
// cannot): plots, JSON files.
void write_text_file(const std::string& path, const std::string& text);

// An input error "FLAG PATH cannot be written: why" unless AtomicFileWriter(path) could write
// there: for runs that write an output at their end, checked before they start.
void check_writable(const std::string& flag, const std::string& path);

// The file an output path leads to: a symlink's target (through chains of links, also when the
// target does not exist yet: a dangling link names the file to create), else the path itself.
std::string output_target(const std::string& path);

// Creates `dir` (and its parents) for a command's `--out`; an input error with the reason when
// it cannot: a file of that name, a parent that is a file, no permission.
void create_output_dir(const std::string& dir);

// The temporary name AtomicFileWriter uses for `path`: DIR/.NAME.tmp.
std::string atomic_tmp_path(const std::string& path);

// Whether `a` and `b` name one existing file (the same device and inode, symlinks followed):
// `x`, `./x`, a hard link and a symlink to it all are `x`.
bool same_file(const std::string& a, const std::string& b);

// The one-line reason for errno `err`, with the fix for the common ones (disk full, file too
// large, read-only file system, permission denied).
std::string describe_write_error(int err);

}  // namespace reftrain
