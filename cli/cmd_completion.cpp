// sbsh completion SHELL: prints the completion script of bash or zsh for sbsh, written from
// the declarations of its commands and options (completion.cpp), as kubectl and gh do. The
// build writes both with it and installs them where bash-completion and zsh look.
#include <algorithm>
#include <cstdio>
#include <iterator>
#include <memory>

#include <fmt/format.h>

#include "cli/cli.h"

namespace sbsh::cli {

runner declare_completion(command_line& cl) {
  auto shell = std::make_shared<std::string>();
  cl.describe(
      "Prints the completion script of SHELL, bash or zsh: sbsh's commands, their options, the values an option "
      "takes where sbsh knows them, and the names of sessions and background processes, asked of sbshd as you "
      "type. An installed sbsh has both in place already; to load one by hand, add 'source <(sbsh completion "
      "bash)' to ~/.bashrc, or write 'sbsh completion zsh' to a file named _sbsh in a directory of $fpath.");
  cl.argument("SHELL", *shell);
  cl.complete(value_kind::text, {std::begin(kCompletionShells), std::end(kCompletionShells)});
  return [shell](const global_opts&) {
    if (shell->empty()) return fail("completion needs a shell: give bash or zsh");
    if (std::find(std::begin(kCompletionShells), std::end(kCompletionShells), *shell) == std::end(kCompletionShells))
      return fail(fmt::format("completion: no script for the shell '{}'; give bash or zsh", *shell));
    std::fputs(completion_script(*shell).c_str(), stdout);
    return 0;
  };
}

}  // namespace sbsh::cli
