#include "core/formats/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
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

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa = {}, sb = {};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
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

std::string output_target(const std::string& path) {
  std::error_code ec;
  fs::path p(path);
  for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(p, ec)); ++hops) {
    const fs::path target = fs::read_symlink(p, ec);
    if (ec) break;
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  return p.string();
}

AtomicFileWriter::AtomicFileWriter(const std::string& path, Links links) : path_(path) {
  struct stat st = {};
  if (links == Links::kRefuse) {
    if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
      throw input_error(printable(path, 200) +
                        " is a symbolic link, directory, device or FIFO, not a file reftrain "
                        "wrote; remove it");
    }
    create_tmp(path);
    return;
  }
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    // A directory is refused by name: renaming over it used to fail as "cannot rename
    // /.tmp.tmp" (for --trace /tmp), a message that names neither the value nor the reason.
    if (S_ISDIR(st.st_mode)) {
      throw input_error(printable(path, 200) + " is a directory; give a file name to write");
    }
    // A device or a FIFO (/dev/null, /dev/stdout, a pipe): renaming a file over it would
    // replace the node, so the bytes go to it directly.
    fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) fail("cannot open", errno);
    return;
  }
  create_tmp(output_target(path));
}

void AtomicFileWriter::create_tmp(const std::string& target) {
  path_ = target;
  tmp_ = atomic_tmp_path(path_);
  // O_EXCL | O_NOFOLLOW after the unlink: a file that appears at the temporary name in between
  // (a link planted there) makes the open fail rather than be written through. The unlink's own
  // failure (usually: nothing there) shows in the open's.
  ::unlink(tmp_.c_str());
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot create", errno);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !tmp_.empty()) ::unlink(tmp_.c_str());
}

void AtomicFileWriter::fail(const std::string& what, int err) {
  const std::string file = tmp_.empty() ? path_ : tmp_ + " (for " + path_ + ")";
  throw input_error(what + " " + file + ": " + describe_write_error(err));
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
  if (tmp_.empty()) {  // written through to a device or FIFO: nothing to sync or rename
    const int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) fail("cannot close", errno);
    committed_ = true;
    return;
  }
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

void check_writable(const std::string& flag, const std::string& path) {
  const auto refuse = [&](const std::string& why) {
    return input_error(flag + " " + path + " cannot be written: " + why + "; choose another " +
                       flag);
  };
  struct stat st = {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) throw refuse("it is a directory");
    if (::access(path.c_str(), W_OK) != 0) throw refuse(describe_write_error(errno));
    return;
  }
  // The writer's own first step: create the temporary file next to the target. O_EXCL leaves
  // a temporary file that is already there (a stale one, or another writer's) alone.
  const std::string tmp = atomic_tmp_path(output_target(path));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 && errno != EEXIST) throw refuse(describe_write_error(errno));
  if (fd >= 0) ::close(fd), ::unlink(tmp.c_str());
}

void write_text_file(const std::string& path, const std::string& text) {
  AtomicFileWriter out(path);
  out.write(text.data(), text.size());
  out.commit();
}

}  // namespace reftrain
