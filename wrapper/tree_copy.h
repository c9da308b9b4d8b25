// The copy of a directory for a snapshot session (`sbsh session create --snapshot DIR`),
// run by sbshd as `sbsh-wrapper --copy-tree ...` in a process of its own: a large tree never
// stalls sbshd, and stopping the copy is one signal.
//
// What is left out is decided by git itself (common/ignored.h: `git ls-files --others --ignored --directory`
// against a private, empty repository whose exclude file holds the rules), so the rules mean
// exactly what they mean in a .gitignore; git is run only when there are rules. A directory
// git reports as ignored is never entered, so a large node_modules costs nothing. git never
// looks at a directory named .git: such a directory is left out when the rules name `.git`.
//
// Regular files are cloned where the filesystem can (FICLONE) and copied in the kernel
// otherwise (copy_file_range), keeping modes and times (and owners, when run as root).
// Symbolic links are copied as links, never followed; fifos, sockets and device nodes are
// skipped and counted. Hard links become separate files.
#pragma once

namespace sbsh::wrapper {

// argv: SOURCE TARGET GITIGNORE(0|1) [RULE...]. Creates TARGET (which must not exist) as the
// copy. Prints "special N" (entries skipped for being neither a file, a directory nor a
// link) on stdout and returns 0, or prints what went wrong on stderr and returns 1.
int copy_tree_main(int argc, char** argv);

}  // namespace sbsh::wrapper
