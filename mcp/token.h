// The bearer token of `sbsh mcp --http`: read from --token-file, or, without one, the
// user's own token in the runtime directory, made on first use.
//
// A TCP port on loopback is open to every local user, so the HTTP server never serves
// without a token there: the default one lives beside sbshd's socket, in a directory only
// its owner may enter, in a file only its owner may read, so that being able to read it is
// what proves a client runs as that user.
#pragma once

#include <string>

#include "ipc/result.h"

namespace sbsh::mcp {

struct bearer_token {
  std::string value;
  std::string file;  // where a client reads it
};

// --token-file FILE: its text, one word of at least 16 characters (trailing blanks dropped).
result<bearer_token> read_token_file(const std::string& path);

// $XDG_RUNTIME_DIR/sbsh/mcp-token, else /tmp/sbsh-UID/mcp-token.
std::string default_token_path();

// The token in default_token_path(), reused when that file is a regular file of ours with
// mode 0600 holding a token; otherwise (missing, or anything else there) replaced by 32
// random bytes from getrandom(2), hex-encoded, in a new file of mode 0600. The directory is
// made and checked as sbshd's socket directory is (0700, ours).
result<bearer_token> default_token();

}  // namespace sbsh::mcp
