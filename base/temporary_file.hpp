#pragma once
// Output files are written whole or not at all: to a temporary beside the
// final name, renamed into place once complete. The temporary's name is the
// process's own (PATH.tmp-PID-N), so two runs given one output path never
// write into the same temporary: the last rename wins with a whole file.

#include <string>

namespace leaseproof {

// "PATH.tmp-<pid>-<n>", n counting this process's calls.
std::string unique_temporary_path(const std::string& path);

// Renames `temporary` to `path`; on failure removes `temporary` and returns
// a message naming both and the reason (never throws).
std::string rename_into_place(const std::string& temporary, const std::string& path);

// Writes `text` to a temporary of this process's own, then renames it to
// `path`: a reader never sees half a file. False when either step failed
// (nothing is left behind then).
bool write_whole_file(const std::string& path, const std::string& text);

}  // namespace leaseproof
