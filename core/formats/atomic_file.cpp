#include "core/formats/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/base/error.h"

namespace reftrain {

namespace fs = std::filesystem;

std::string atomic_tmp_path(const std::string& path) {
  const fs::path p(path);
  return (p.parent_path() / ("." + p.filename().string() + ".tmp")).string();
}

void create_output_dir(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) {
    throw input_error("--out " + printable(dir, 200) +
                      " is a file, not a directory; choose another --out");
  }
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec)) {
    throw input_error("cannot create directory " + printable(dir, 200) + ": " +
                      (ec ? ec.message() : std::string("it is not a directory")) +
                      "; choose another --out");
  }
}

std::string describe_write_error(int err) {
  switch (err) {
    case ENOSPC:
    case EDQUOT:
      return std::string(std::strerror(err)) + ": the disk is full; free some space";
    case EFBIG:
      return std::string(std::strerror(err)) +
             ": the file-size limit was reached (ulimit -f) or the disk is full";
    case EROFS:
    case EACCES:
    case EPERM:
      return std::string(std::strerror(err)) + ": the directory is not writable";
    default:
      return std::strerror(err);
  }
}

AtomicFileWriter::AtomicFileWriter(const std::string& path)
    : path_(path), tmp_(atomic_tmp_path(path)) {
  // A directory is refused by name: renaming over it used to fail as "cannot rename /.tmp.tmp"
  // (for --trace /tmp), a message that names neither the flag's value nor the reason.
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    throw input_error(printable(path, 200) + " is a directory; give a file name to write");
  }
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot create", errno);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void AtomicFileWriter::fail(const std::string& what, int err) {
  throw input_error(what + " " + tmp_ + " (for " + path_ + "): " + describe_write_error(err));
}

void AtomicFileWriter::write(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) fail("cannot write", errno);
    if (w == 0) fail("cannot write", EIO);
    p += w;
    n -= size_t(w);
  }
}

void AtomicFileWriter::commit(void (*before_rename)(const std::string&, const std::string&)) {
  if (::fsync(fd_) != 0) fail("cannot sync", errno);
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) fail("cannot close", errno);
  if (before_rename) before_rename(tmp_, path_);
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) fail("cannot rename", errno);
  committed_ = true;
  // The rename is an entry in the directory: sync the directory so that it survives a crash.
  const std::string dir = fs::path(path_).parent_path().empty()
                              ? std::string(".")
                              : fs::path(path_).parent_path().string();
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) fail("cannot open the directory of", errno);
  const int sync_rc = ::fsync(dfd);
  const int sync_err = errno;
  ::close(dfd);
  if (sync_rc != 0) fail("cannot sync the directory of", sync_err);
}

void write_text_file(const std::string& path, const std::string& text) {
  AtomicFileWriter out(path);
  out.write(text.data(), text.size());
  out.commit();
}

}  // namespace reftrain
